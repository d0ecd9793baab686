"""The shape of a JSON value: its structure with type names in place of values.

Tool arguments can hold secrets and personal data, so logs and inventories keep only their shape:
`{"city": "Paris", "days": 3}` becomes `{"city": "string", "days": "integer"}`. Object keys are
structure and stay, unless they do not look like identifiers (an e-mail address or a phone number
used as a key is data): those fold into one `"*"` key. Depth, keys and list variants are bounded,
so a hostile argument cannot make a log line large.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["CAPPED", "INVALID", "arguments_shape", "json_shape", "query_shape", "shape_key"]

INVALID = "invalid-json"  # the text did not parse: the shape of broken arguments
CAPPED = "truncated"  # the text was cut at capture_max_bytes: its shape is unknown
_MAX_DEPTH = 6
_MAX_KEYS = 40
_MAX_VARIANTS = 4  # distinct item shapes kept for one list
_IDENTIFIER = re.compile(r"^[A-Za-z_$@][A-Za-z0-9_.$-]{0,63}$")
_DATA_KEY = "*"


def shape_key(shape: Any) -> str:
    """A canonical text of a shape, for counting and sorting shapes."""
    return json.dumps(shape, sort_keys=True, separators=(",", ":"))


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) and "@" not in name[1:] else _DATA_KEY


def json_shape(value: Any, depth: int = 0) -> Any:
    """The shape of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if depth >= _MAX_DEPTH:
        return "object" if isinstance(value, dict) else "array"
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name in sorted(value, key=str)[:_MAX_KEYS]:
            key, shape = _key(str(name)), json_shape(value[name], depth + 1)
            # Data keys fold into one entry: keep the first shape, mark a mix as "any".
            out[key] = shape if key not in out or out[key] == shape else "any"
        if len(value) > _MAX_KEYS:
            out["..."] = f"{len(value) - _MAX_KEYS} more keys"
        return out
    if isinstance(value, list):
        variants: dict[str, Any] = {}
        for item in value:
            shape = json_shape(item, depth + 1)
            variants.setdefault(shape_key(shape), shape)
            if len(variants) > _MAX_VARIANTS:
                break
        return [variants[k] for k in sorted(variants)][:_MAX_VARIANTS]
    return type(value).__name__


def arguments_shape(text: str, *, capped: bool = False) -> Any:
    """The shape of tool-call arguments as they crossed the wire (JSON text)."""
    if capped:
        return CAPPED
    if not text.strip():
        return {}
    try:
        return json_shape(json.loads(text))
    except (ValueError, RecursionError):
        return INVALID


def query_shape(query: str) -> dict[str, Any]:
    """The shape of a URL query string: its parameter names, each a string (values dropped)."""
    names = sorted({_key(k) for k, _ in parse_qsl(query, keep_blank_values=True)})
    return dict.fromkeys(names[:_MAX_KEYS], "string")
