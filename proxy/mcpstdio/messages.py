"""JSON-RPC lines as the stdio relay reads and writes them."""

from __future__ import annotations

import json
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.framing import SSEFramer
from brownout.core.wire.mcp_messages import remember

__all__ = ["decode", "key_of", "remember", "reply_lines", "rule_of", "with_id"]


def decode(data: bytes) -> Any:
    """The JSON value of a line, or None when it is not JSON."""
    try:
        return json.loads(data)
    except ValueError:
        return None


def key_of(request_id: Any) -> str:
    """A dict key for a JSON-RPC id."""
    return json.dumps(request_id)  # 1 and "1" are different ids


def rule_of(exchange: Exchange, fault_types: tuple[str, ...]) -> str:
    """The rule whose fault ends the server (for its exit report): the first of these types that fired."""
    named = [f.rule for f in exchange.faults if f.fault in fault_types] or [f.rule for f in exchange.faults]
    return named[0] if named else "?"


def reply_lines(body: bytes, headers: dict[str, str]) -> list[bytes]:
    """The messages of a reply body: one line, or one per event of an SSE body."""
    if not headers.get("content-type", "").startswith("text/event-stream"):
        return [body.replace(b"\n", b"")] if body.strip() else []
    framer = SSEFramer()
    return [e.data.encode() for e in framer.feed(body) + framer.flush() if e.data.strip()]


def with_id(line: bytes, request_id: Any) -> bytes:
    """The line answering `request_id` when it answers none (a transport-level error has id null)."""
    msg = decode(line)
    if isinstance(msg, dict) and msg.get("id", 0) is None and request_id is not None:
        msg["id"] = request_id
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()
    return line
