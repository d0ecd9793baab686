"""Small, allocation-light helpers shared by the wire formats: JSON, capped text, ids."""

from __future__ import annotations

import codecs
import json
import math
import uuid
from typing import Any

from brownout.core.exchange import DEFAULT_CAPTURE_MAX_BYTES, cap_text

__all__ = [
    "DEFAULT_CAPTURE_MAX_BYTES",
    "TextBuffer",
    "as_int",
    "as_list",
    "cap_text",
    "decode_capped",
    "dumps",
    "go_duration",
    "loads",
    "new_id",
    "retry_after_header",
    "text_of",
]


_utf8_decoder = codecs.getincrementaldecoder("utf-8")
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
loads = json.loads  # raises ValueError (including UnicodeDecodeError) on bad input


def dumps(obj: Any) -> str:
    """Compact JSON, as providers put it on the wire."""
    return _dumps(obj)


def decode_capped(body: bytes, max_bytes: int) -> str:
    """A body decoded for capture: at most `max_bytes`, invalid UTF-8 replaced."""
    if len(body) <= max_bytes:
        return body.decode("utf-8", "replace")
    # Not final: a character cut by the cap is dropped rather than turned into U+FFFD.
    return _utf8_decoder("replace").decode(body[:max_bytes], final=False)


class TextBuffer:
    """Collects streamed text fragments up to a cap; joined once, at the end."""

    __slots__ = ("_max", "_parts", "_size")

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._parts: list[str] = []
        self._size = 0  # characters, a cheap lower bound of the byte size

    def add(self, text: str) -> None:
        if text and self._size < self._max:
            self._parts.append(text)
            self._size += len(text)

    def __bool__(self) -> bool:
        return self._size > 0

    def value(self) -> str:
        return cap_text("".join(self._parts), self._max)


def text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with `text` fields."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
        return "".join(out)
    return ""


def as_int(value: Any) -> int | None:
    """An integer token count, or None for anything else (bool is not a count)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def as_list(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty list: wrong-typed fields are skipped, not fatal."""
    return value if isinstance(value, list) else []


def new_id(prefix: str, n_hex: int = 24) -> str:
    """A provider-looking random id such as `req_9f2c...`."""
    return prefix + uuid.uuid4().hex[:n_hex]


def retry_after_header(seconds: float) -> str:
    """`retry-after` as integer seconds (RFC 9110), rounded up so clients never retry early."""
    return str(max(0, math.ceil(seconds)))


def go_duration(seconds: float) -> str:
    """A Go-style duration (`20ms`, `1s`, `6m0s`), the format of OpenAI's x-ratelimit-reset-*."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{round(rest, 3):g}s"
