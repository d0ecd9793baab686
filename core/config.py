"""The config base every section's model shares, and the value parsers more than one section needs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo

__all__ = ["BASE_DIR", "ConfigPath", "Model", "context_value", "parse_listen", "resolve_against", "resolve_config_path"]

# The validation context key holding the directory of the config file being loaded.
BASE_DIR = "base_dir"


class Model(BaseModel):
    """Base for every config model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
