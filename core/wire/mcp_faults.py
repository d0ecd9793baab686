"""The answers MCP servers send when a session or a request's transport is wrong, in their exact shapes.

- An expired (or unknown) handshake-era session: HTTP 404 with a JSON-RPC error and `id: null`. The
  TypeScript SDK's servers use code -32001, the Python SDK's -32600; both say "Session not found".
- A 2026-07-28 request whose `Mcp-Method`, `Mcp-Name` or `MCP-Protocol-Version` header disagrees with
  its body: HTTP 400, code -32020 (HEADER_MISMATCH), the SDK servers' message for that header.
- A 2026-07-28 request at a protocol version the server does not serve: HTTP 400, code -32022
  (UNSUPPORTED_PROTOCOL_VERSION), `data: {"supported": [...], "requested": "..."}`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.common import JSON_HEADERS
from brownout.core.wire.jsonutil import dumps

__all__ = [
    "HEADER_MISMATCH",
    "MISMATCH_MESSAGES",
    "SESSION_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "header_mismatch",
    "session_not_found",
    "unsupported_version",
]

HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
SESSION_NOT_FOUND = "Session not found"

# What the SDK servers say for each header that disagrees with the body.
MISMATCH_MESSAGES = {
    "mcp-method": "mcp-method header does not match the request body's method",
    "mcp-protocol-version": "mcp-protocol-version header does not match the request envelope's protocol version",
    "mcp-name": "mcp-name header does not match the request body's {field!r} parameter",
}
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _answer(status: int, request_id: Any, error: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, dict(JSON_HEADERS), dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def session_not_found(code: int, message: str) -> tuple[int, dict[str, str], bytes]:
    """The 404 a server sends for a session it no longer knows (the request id is not read: `id: null`)."""
    return _answer(404, None, {"code": code, "message": message})


def header_mismatch(exchange: Exchange, header: str) -> tuple[int, dict[str, str], bytes] | None:
    """The 400 for a routing header that disagrees with the body; None when the method names nothing (Mcp-Name)."""
    message = MISMATCH_MESSAGES[header]
    if header == "mcp-name":
        field = _NAMED_BY.get(exchange.mcp_method or "")
        if field is None:
            return None
        message = message.format(field=field)
    return _answer(400, exchange.notes.get("jsonrpc_id"), {"code": HEADER_MISMATCH, "message": message})


def unsupported_version(exchange: Exchange, supported: list[str]) -> tuple[int, dict[str, str], bytes]:
    """The 400 for a protocol version the server does not serve, naming those it does."""
    requested = exchange.notes.get("mcp_protocol_version")
    error = {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": "Unsupported protocol version",
        "data": {"supported": list(supported), "requested": requested},
    }
    return _answer(400, exchange.notes.get("jsonrpc_id"), error)
