"""MCP JSON-RPC messages as both transports carry them: the error codes, the operations of requests with no
method, what a server's reply or notification tells about an exchange, and SSE replies event by event."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from brownout.core.exchange import Exchange, ToolSpec
from brownout.core.wire.base import StreamEvent
from brownout.core.wire.common import BaseStreamParser
from brownout.core.wire.jsonutil import TextBuffer, as_list, loads
from brownout.core.wire.mcp_eras import SUBSCRIPTION_ID_KEY
from brownout.core.wire.replaykey import without

__all__ = [
    "JSONRPC_ERROR_TYPES",
    "JSONRPC_INVALID",
    "JSONRPC_RESPONSE",
    "LISTEN",
    "LIST_METHODS",
    "MODERN_ERROR_STATUS",
    "SERVER_STREAM",
    "SESSION_END",
    "SUBSCRIPTION_STREAMS",
    "TRANSIENT_ERROR_TYPES",
    "McpStreamParser",
    "error_type_of",
    "jsonrpc_messages",
    "listen_notification",
    "remember",
    "replay_message",
    "reply",
    "request_identity",
    "server_notification",
]

JSONRPC_ERROR_TYPES: dict[int, str] = {
    -32700: "parse_error",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal_error",
    -32002: "resource_not_found",  # MCP's own code (handshake era)
    # The 2026-07-28 revision's codes, allocated from -32020.
    -32020: "header_mismatch",
    -32021: "missing_capability",
    -32022: "unsupported_version",
}
# The HTTP status a 2026-07-28 server sends with a JSON-RPC error (the SDKs' table); other codes travel in 200.
MODERN_ERROR_STATUS = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}
# Error types a client may meet again on a retry (the server or the network failed). The others
# (tool_error, invalid_params, method_not_found, ...) are answers: asking again changes nothing.
TRANSIENT_ERROR_TYPES = frozenset({"internal_error", "server_error", "connection"})

# Operations of streamable-HTTP requests that carry no JSON-RPC method.
SERVER_STREAM = "server_stream"  # GET: the stream of server-to-client requests and notifications
SESSION_END = "session_end"  # DELETE: the client ends its session
JSONRPC_RESPONSE = "jsonrpc_response"  # POST of JSON-RPC responses only (the client answering the server)
JSONRPC_INVALID = "jsonrpc_invalid"  # POST from an MCP session whose body is no JSON-RPC message
LISTEN = "subscriptions/listen"  # 2026-07-28: the long-lived stream of change notifications
# Streams that carry the server's notifications for as long as they are open.
SUBSCRIPTION_STREAMS = frozenset({SERVER_STREAM, LISTEN})
# The listing methods whose replies a server can change under the agent (rug pulls), by what they list.
LIST_METHODS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources"}
_NOTIFICATIONS_KEPT = 16  # server notifications remembered per exchange (a progress stream can be long)


def error_type_of(code: Any) -> str:
    if isinstance(code, int):
        if code in JSONRPC_ERROR_TYPES:
            return JSONRPC_ERROR_TYPES[code]
        if -32099 <= code <= -32000:
            return "server_error"
        return f"jsonrpc_{code}"
    return "jsonrpc_error"


def replay_message(msg: dict[str, Any]) -> dict[str, Any]:
    out = without(msg, ("id",))
    if isinstance(out.get("params"), dict):
        out["params"] = without(out["params"], ("_meta",))
    return out


def request_identity(body: str) -> str:
    """What asking again repeats: the request's JSON-RPC messages without their ids and `_meta`
    (progress tokens, trace context, the 2026-07-28 envelope), as a short digest."""
    try:
        data = loads(body) if body.strip() else None
    except (ValueError, RecursionError):
        data = body  # not JSON: the text itself
    msgs = data if isinstance(data, list) else [data]
    messages = [replay_message(m) if isinstance(m, dict) else m for m in msgs]
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def jsonrpc_messages(data: Any) -> list[dict[str, Any]]:
    items = data if isinstance(data, list) else [data]
    return [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]


def remember(notes: list[tuple[str, float]], method: str, at: float, *, keep: int = _NOTIFICATIONS_KEPT) -> None:
    """Add a server notification and the time it reached the client; at most `keep`, and a chatty
    server's progress or log messages push out the oldest of their kind, never a list_changed."""
    notes.append((method, at))
    if len(notes) > keep:
        chatter = next((i for i, (m, _) in enumerate(notes) if not m.endswith("/list_changed")), 0)
        del notes[chatter]


def listen_notification(method: str, subscription_id: Any) -> dict[str, Any]:
    """A notification on a 2026-07-28 listen stream, stamped with its subscription as servers send it."""
    return {"jsonrpc": "2.0", "method": method, "params": {"_meta": {SUBSCRIPTION_ID_KEY: subscription_id}}}


def server_notification(exchange: Exchange, method: str) -> None:
    """Remember a notification or request the server sent while this exchange was open."""
    seen = exchange.notes.setdefault("server_notifications", [])
    if len(seen) < _NOTIFICATIONS_KEPT:
        seen.append(method)


def reply(exchange: Exchange, msg: dict[str, Any], text: TextBuffer) -> bool:
    """Account for one JSON-RPC message from the server; True when it answers a request."""
    if "method" in msg:  # a server request or notification (progress, logging): not the reply
        if isinstance(msg["method"], str):
            server_notification(exchange, msg["method"])
        return False
    err = msg.get("error")
    if isinstance(err, dict):
        exchange.notes["jsonrpc_error_code"] = err.get("code")
        exchange.error_type = error_type_of(err.get("code"))
        exchange.error_message = err.get("message") if isinstance(err.get("message"), str) else None
        return True
    result = msg.get("result")
    if not isinstance(result, dict):
        return "result" in msg
    methods = exchange.notes.get("jsonrpc_methods") or {}
    method = methods.get(str(msg.get("id")), exchange.mcp_method)
    if method == "initialize" and isinstance(result.get("protocolVersion"), str):
        exchange.notes["mcp_protocol_version"] = result["protocolVersion"]  # the negotiated one
    ttl = result.get("ttlMs")
    if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0:
        exchange.notes["mcp_ttl_ms"] = ttl  # 2026-07-28: how long the client may treat the answer as fresh
    if method == "tools/list":
        for tool in as_list(result.get("tools")):
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                schema = tool.get("inputSchema")
                exchange.tools_declared.append(ToolSpec(tool["name"], schema if isinstance(schema, dict) else None))
    content = result.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict):
                if isinstance(item.get("text"), str):
                    text.add(item["text"])
                res = item.get("resource")
                if isinstance(res, dict) and isinstance(res.get("text"), str):
                    text.add(res["text"])
    if result.get("isError") is True:
        exchange.error_type = "tool_error"
        exchange.error_message = (
            " ".join(i["text"] for i in as_list(content) if isinstance(i, dict) and isinstance(i.get("text"), str))[
                :1000
            ]
            or None
        )
    return True


class McpStreamParser(BaseStreamParser):
    """SSE `event: message` frames, each one JSON-RPC message; complete once every request is answered.

    A subscription stream (the handshake era's GET stream, a 2026-07-28 `subscriptions/listen`) lasts until
    either side closes it: its completeness is unknown (None) unless the server ends a listen with its
    result, and the notifications on it are timed as they pass (`notifications_before`), since they come
    long after the stream opened."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self._pending = max(1, len(exchange.notes.get("jsonrpc_methods") or ()))
        self._subscription = exchange.operation in SUBSCRIPTION_STREAMS
        if self._subscription:
            exchange.stream_complete = None

    def _feed(self, event: StreamEvent) -> None:
        decoded = self._json(event.data)
        if decoded is None:
            return
        exchange = self.exchange
        for msg in jsonrpc_messages(decoded):
            if self._subscription and isinstance(msg.get("method"), str):
                remember(exchange.notes.setdefault("notifications_before", []), msg["method"], time.time())
            elif reply(exchange, msg, self.text):
                self._pending -= 1
                if self._pending <= 0:
                    exchange.stream_complete = True  # a listen's result: the server ended it gracefully
