"""The config base every section's model shares, and the value parsers more than one section needs."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from difflib import get_close_matches
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = [
    "BASE_DIR",
    "ConfigPath",
    "Model",
    "check_type",
    "context_value",
    "did_you_mean",
    "parse_listen",
    "resolve_against",
    "resolve_config_path",
]

# The validation context key holding the directory of the config file being loaded.
BASE_DIR = "base_dir"


class Model(BaseModel):
    """Base for every config model: unknown fields are errors (with a "did you mean"), values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _suggest_field_names(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as e:
            errors = e.errors(include_url=False)
            if not any(_unnamed_key(err) for err in errors):
                raise
            known = sorted({name for n, f in cls.model_fields.items() for name in (n, f.alias) if name})
            details: list[InitErrorDetails] = []
            for err in errors:
                ctx = err.get("ctx") or {}
                if _unnamed_key(err):
                    hint = did_you_mean(str(err["loc"][0]), known) or f"valid fields: {', '.join(known)}"
                    ctx = {"message": err["msg"], "hint": hint}  # field names only: no user text to format
                if "hint" in ctx:
                    error = PydanticCustomError(err["type"], "{message}; {hint}", ctx)
                else:  # without a context the message is kept verbatim, braces included
                    error = PydanticCustomError(err["type"], err["msg"])
                details.append({"type": error, "loc": err["loc"], "input": err["input"]})
            raise ValidationError.from_exception_data(e.title, details) from None


def _unnamed_key(err: Any) -> bool:
    """An unknown key of this very model (one-segment location) not yet given its hint.

    Nested models hint at their own keys; a model validated twice (a wrap validator that
    re-validates) hints once.
    """
    return bool(err["type"] == "extra_forbidden" and len(err["loc"]) == 1 and "hint" not in (err.get("ctx") or {}))


def did_you_mean(word: str, names: Collection[str]) -> str | None:
    """`did you mean 'x'?` for the name in `names` closest to a mistyped `word`, else None."""
    close = get_close_matches(word, list(names), n=1)
    return f"did you mean {close[0]!r}?" if close else None


def check_type(value: Any, known: Collection[str], what: str) -> None:
    """The one message for a config entry whose `type` names no `what` (fault, invariant, ...) in `known`.

    Raises PydanticCustomError (a `{what}_type` error) unless `value` is a mapping with a known `type`.
    """
    valid = ", ".join(sorted(known)) or "(none registered)"
    error = f"{what}_type"
    if not isinstance(value, Mapping):
        raise PydanticCustomError(
            error, f"{what} must be a mapping with a `type`; valid types: {{valid}}", {"valid": valid}
        )
    kind = value.get("type")
    if kind is None:
        raise PydanticCustomError(error, f"{what} needs a `type`; valid types: {{valid}}", {"valid": valid})
    if not isinstance(kind, str) or kind not in known:
        hint = did_you_mean(kind, known) if isinstance(kind, str) else None
        raise PydanticCustomError(
            error,
            f"unknown {what} type {{kind}}{{hint}}; valid types: {{valid}}",
            {"kind": repr(kind), "hint": f" ({hint})" if hint else "", "valid": valid},
        )


def context_value(info: ValidationInfo, key: str, default: Any) -> Any:
    """A value of the validation context (the catalogue of a config's plugins), else `default`.

    A config is validated with `context=` built from its own plugins, so two configs in one
    process can know different fault types; validating a section on its own knows the built-ins.
    """
    context = info.context
    if isinstance(context, Mapping) and key in context:
        return context[key]
    return default


def resolve_config_path(value: str, info: ValidationInfo) -> str:
    """`value` resolved against the directory of the config file being validated (the context's
    `base_dir`), as Prometheus and Docker Compose resolve theirs; as written when the config comes
    from no file (a dict, the command line: those are relative to the working directory)."""
    return resolve_against(value, context_value(info, BASE_DIR, None))


def resolve_against(value: str, base_dir: str | None) -> str:
    """`value` (`~` expanded) against `base_dir` unless absolute; as is when there is no `base_dir`."""
    if base_dir is None or not value:
        return value
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base_dir, path))


# A file or directory named in a config file.
ConfigPath = Annotated[str, AfterValidator(resolve_config_path)]


def parse_listen(spec: str, default_port: int | None = None) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT`, `:PORT` (loopback) or, with a default port, `HOST` -> (host, port);
    there a bare number is a port on loopback (`8090`: 127.0.0.1:8090), never a host.

    Raises ValueError naming the value.
    """
    host, port = spec, "" if default_port is None else str(default_port)
    if spec.startswith("["):
        inner, sep, rest = spec[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"listen address {spec!r}: expected [IPv6]:PORT")
        host, port = inner, rest[1:] or port
    elif spec.count(":") == 1:
        host, port = spec.split(":")
    elif ":" in spec:
        raise ValueError(f"listen address {spec!r}: write an IPv6 address as [addr]:PORT")
    elif default_port is not None and spec.isdigit():
        host, port = "", spec
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listen address {spec!r}: expected HOST:PORT with a port in 0..65535")
    return (host or "127.0.0.1", int(port))
