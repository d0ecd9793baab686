"""The config base every section's model shares, and the value parsers more than one section needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo

__all__ = ["Model", "context_value", "parse_listen"]


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


def parse_listen(spec: str, default_port: int | None = None) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT`, `:PORT` (loopback) or, with a default port, `HOST` -> (host, port).

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
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listen address {spec!r}: expected HOST:PORT with a port in 0..65535")
    return (host or "127.0.0.1", int(port))
