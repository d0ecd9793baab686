"""Deterministic content shared by the mock providers: ids, answer text, tool arguments, knobs."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from brownout.proxy.demo.httpserver import Request

__all__ = [
    "CREATED",
    "WEATHER",
    "Knobs",
    "answer_pieces",
    "dumps",
    "mock_arguments",
    "mock_id",
    "pad_json",
    "split_text",
    "tool_answer",
]

# A fixed timestamp keeps whole responses byte-for-byte reproducible.
CREATED = 1735689600
WEATHER = {"city": "Paris", "temp_c": 18, "conditions": "cloudy"}
_PLAIN_ANSWER = "Hello! This is a deterministic answer from the brownout mock upstream."
_counter = itertools.count(1)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def mock_id(prefix: str, length: int = 24) -> str:
    """A real-looking id (chatcmpl-..., msg_..., call_...) that follows a fixed sequence."""
    n = next(_counter)
    return prefix + hashlib.sha256(f"{prefix}{n}".encode()).hexdigest()[:length]


@dataclass(slots=True, frozen=True)
class Knobs:
    """Per-request behaviour chosen by `x-mock-*` headers."""

    chunks: int | None = None  # number of content chunks (stream pieces)
    chunk_delay_s: float = 0.0
    status: int | None = None  # force an error status
    body_bytes: int | None = None  # pad a JSON body to this size
    sse: bool = False  # MCP: answer as text/event-stream

    @classmethod
    def from_request(cls, req: Request) -> Knobs:
        h = req.headers
        if not any(k.startswith("x-mock-") for k in h):
            return _NO_KNOBS

        def num(name: str) -> int | None:
            v = h.get(name)
            return int(v) if v and v.strip().lstrip("-").isdigit() else None

        return cls(
            chunks=num("x-mock-chunks"),
            chunk_delay_s=(num("x-mock-chunk-delay-ms") or 0) / 1000.0,
            status=num("x-mock-status"),
            body_bytes=num("x-mock-body-bytes"),
            sse=h.get("x-mock-sse", "") in ("1", "true", "yes"),
        )


_NO_KNOBS = Knobs()


def split_text(text: str, n: int) -> list[str]:
    """Split `text` into exactly `n` non-empty pieces (n is clamped to 1..len(text))."""
    n = max(1, min(n, len(text)))
    size, rem = divmod(len(text), n)
    out, pos = [], 0
    for i in range(n):
        step = size + (1 if i < rem else 0)
        out.append(text[pos : pos + step])
        pos += step
    return out


def answer_pieces(text: str | None, knobs: Knobs, default_chunks: int = 6) -> list[str]:
    """The answer split into stream pieces; many chunks get a longer text, never empty ones."""
    text = text or _PLAIN_ANSWER
    n = knobs.chunks or default_chunks
    if n > len(text):
        words = itertools.cycle(text.split())
        return [next(words) + " " for _ in range(n)]
    return split_text(text, n)


def tool_answer(tool_output: str) -> str:
    """The final answer after a tool result, quoting it so an agent can check it arrived."""
    try:
        data = json.loads(tool_output)
    except (ValueError, TypeError):
        data = None
    if isinstance(data, dict) and {"city", "temp_c", "conditions"} <= data.keys():
        return f"It is {data['temp_c']}°C and {data['conditions']} in {data['city']}."
    return f"The tool returned: {str(tool_output)[:200]}"


_DEFAULTS_BY_TYPE: dict[str, Any] = {
    "string": "Paris",
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "array": [],
    "object": {},
}


def mock_arguments(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Arguments satisfying the tool's JSON Schema (required properties), city=Paris by default."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {"city": "Paris"}
    props: dict[str, Any] = schema["properties"]
    if "city" in props:
        return {"city": "Paris"}
    wanted = schema.get("required") or list(props)[:1]
    args: dict[str, Any] = {}
    for name in wanted:
        spec = props.get(name) or {}
        if spec.get("enum"):
            args[name] = spec["enum"][0]
        else:
            typ = spec.get("type", "string")
            args[name] = _DEFAULTS_BY_TYPE.get(typ if isinstance(typ, str) else "string", "Paris")
    return args


def pad_json(obj: Any, size: int | None) -> bytes:
    """Serialise `obj`; when it is a dict and `size` is set, pad it to exactly `size` bytes."""
    body = dumps(obj)
    if size is None or not isinstance(obj, dict) or size <= len(body):
        return body
    filler = size - len(body) - len(',"x_mock_padding":""')
    if filler < 0:
        return body
    sep = b"," if obj else b""
    return body[:-1] + sep + b'"x_mock_padding":"' + b"x" * (filler + (0 if obj else 1)) + b'"}'
