"""MCP streamable HTTP: JSON-RPC 2.0 POSTs answered as application/json or as SSE, plus the transport's
own requests (the GET that opens the server-to-client stream, the DELETE that ends a session)."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from brownout.core.exchange import Exchange, ToolCall
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import JSON_HEADERS, ProviderFormat, default_message
from brownout.core.wire.framing import SSEFramer
from brownout.core.wire.jsonutil import TextBuffer, dumps, loads
from brownout.core.wire.mcp_eras import (
    MODERN,
    PROTOCOL_VERSION_KEY,
    SUBSCRIPTION_ID_KEY,
    decode_header_value,
    envelope_version,
    era_of,
    listened_lists,
)
from brownout.core.wire.mcp_messages import (
    JSONRPC_ERROR_TYPES,
    JSONRPC_INVALID,
    JSONRPC_RESPONSE,
    LIST_METHODS,
    LISTEN,
    MODERN_ERROR_STATUS,
    SERVER_STREAM,
    SESSION_END,
    TRANSIENT_ERROR_TYPES,
    McpStreamParser,
    jsonrpc_messages,
    replay_message,
    reply,
    server_notification,
)

# The names modules imported from here before the JSON-RPC messages moved to mcp_messages, kept for them.
__all__ = [
    "JSONRPC_ERROR_TYPES",
    "JSONRPC_INVALID",
    "JSONRPC_RESPONSE",
    "LIST_METHODS",
    "SERVER_STREAM",
    "SESSION_END",
    "TRANSIENT_ERROR_TYPES",
    "McpFormat",
    "McpStreamParser",
    "server_notification",
]

log = logging.getLogger(__name__)

_CODES = {name: code for code, name in JSONRPC_ERROR_TYPES.items()}
_BY_HTTP_METHOD = {"GET": SERVER_STREAM, "DELETE": SESSION_END}
_NO_REQUEST = frozenset({SERVER_STREAM, SESSION_END, JSONRPC_RESPONSE, JSONRPC_INVALID})
# Every request after initialize carries one of them (the spec's Mcp-Session-Id, MCP-Protocol-Version), and
# every 2026-07-28 request the last and Mcp-Method.
_TRANSPORT_HEADERS = ("mcp-session-id", "mcp-protocol-version", "mcp-method")
# The params field 2026-07-28 clients repeat in Mcp-Name, by method.
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_SSE = {"content-type": "text/event-stream", "cache-control": "no-cache"}
_SNIFF = b'"jsonrpc"'
# recognise() and parse_request() see the same body back to back, in one request's task: decode it once. A
# context variable, not a module global: the value stays with that task, never shared by two proxies or two requests.
_last: ContextVar[tuple[bytes, Any] | None] = ContextVar("brownout_mcp_last_body", default=None)


def _decode(body: bytes) -> Any:
    last = _last.get()
    if last is not None and (last[0] is body or (len(last[0]) == len(body) and last[0] == body)):
        return last[1]
    data = loads(body)
    _last.set((body, data))
    return data


class McpFormat(ProviderFormat):
    """Model Context Protocol over streamable HTTP: operation = the JSON-RPC method."""

    provider = "mcp"
    gen_ai_provider = "mcp"
    parses_live = True  # notifications are stamped as they arrive; subscription streams are read while open

    def recognise(self, req: RequestInfo) -> str | None:
        in_session = any(h in req.headers for h in _TRANSPORT_HEADERS)
        if req.method != "POST":
            return _BY_HTTP_METHOD.get(req.method) if in_session else None
        if method := req.headers.get("mcp-method"):
            return method  # a 2026-07-28 client names the method in a header: no body to decode
        body = req.body
        # Cheap sniff first: "jsonrpc" near the start, or anywhere for /mcp-like paths.
        if not in_session and _SNIFF not in body[:256] and ("mcp" not in req.path.lower() or _SNIFF not in body):
            return None
        try:
            msgs = jsonrpc_messages(_decode(body))
        except (ValueError, RecursionError):
            msgs = []
        for msg in msgs:
            if isinstance(msg.get("method"), str):
                return msg["method"]
        if msgs:
            return JSONRPC_RESPONSE
        return JSONRPC_INVALID if in_session else None

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        # The GET stream and the DELETE have no body: their headers alone name the session.
        _transport_notes(exchange)
        super().parse_request(exchange, body)
        _route_by_headers(exchange)
        notes = exchange.notes
        exchange.mcp_era = era_of(
            notes.get("mcp_protocol_version"),
            exchange.mcp_method,
            envelope="mcp_envelope" in notes,
            in_session="mcp_session_id" in notes,
        )

    def _load_request(self, body: bytes) -> Any:
        return _decode(body)

    def replay_key(self, req: RequestInfo) -> Any:
        # JSON-RPC ids count the client's requests and `_meta` carries progress tokens: neither decides
        # the answer, and a retried call would shift every later id.
        try:
            data = loads(req.body) if req.body.strip() else None
        except (ValueError, RecursionError):
            return super().replay_key(req)
        msgs = data if isinstance(data, list) else [data]
        return [replay_message(m) if isinstance(m, dict) else m for m in msgs]

    def _request(self, exchange: Exchange, data: Any) -> None:
        exchange.stream = False  # every client accepts SSE; the server picks, so it is not a request flag
        methods: dict[str, str] = {}  # str(id) -> method, to interpret the replies
        ids: list[Any] = []
        for msg in jsonrpc_messages(data):
            method = msg.get("method")
            if not isinstance(method, str):
                continue
            params = msg.get("params")
            if exchange.mcp_method is None:
                exchange.mcp_method = exchange.operation = method
                if "id" in msg:
                    exchange.notes["jsonrpc_id"] = msg["id"]
                if isinstance(params, dict):
                    _first_request_notes(exchange, method, params)
            if "id" in msg:
                ids.append(msg["id"])
                methods[str(msg["id"])] = method
            if method == "tools/call" and isinstance(params, dict):
                name = str(params.get("name") or "")
                call_id = str(msg["id"]) if "id" in msg else None
                if exchange.tool_name is None:
                    exchange.tool_name, exchange.tool_call_id = name, call_id
                args = params.get("arguments")
                exchange.tool_calls.append(
                    ToolCall(
                        name,
                        dumps(args if args is not None else {}),
                        call_id,
                        len(exchange.tool_calls),
                        from_object=args is None or isinstance(args, dict),
                    )
                )
        exchange.notes["jsonrpc_methods"] = methods
        if isinstance(data, list):
            exchange.notes["jsonrpc_ids"] = ids

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        """A JSON reply, or a whole SSE reply (buffered, or one a fault turned into a stream)."""
        if body.lstrip()[:6].startswith((b"event:", b"data:", b"id:", b":")):
            parser = self.stream_parser(exchange)
            framer = SSEFramer()
            for event in framer.feed(body) + framer.flush():
                parser.feed(event)
            parser.finish()
            return
        super().parse_response(exchange, body)

    def _response(self, exchange: Exchange, data: Any) -> None:
        text = TextBuffer(exchange.capture_max_bytes)
        for msg in jsonrpc_messages(data):
            reply(exchange, msg, text)
        if text:
            exchange.output_text = text.value()

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return McpStreamParser(exchange)

    def drift_field(self, doc: Any) -> str | None:
        """A JSON-RPC reply's `result` (or `error`): what the client reads the answer from."""
        if not isinstance(doc, dict):
            return None
        return next((key for key in ("result", "error") if key in doc), None)

    def is_terminal(self, event: StreamEvent) -> bool:
        data = event.data
        if '"id"' not in data:
            return False
        try:
            msg = loads(data)
        except ValueError:
            return False
        return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """JSON-RPC errors travel in HTTP 200 (a 2026-07-28 server sends its table's 400 or 404 with some:
        `MODERN_ERROR_STATUS`); error_type "http" gives a transport-level `status`.

        A request with no JSON-RPC request to answer (the GET stream, the DELETE) always gets the
        transport-level error: there is no id to put a JSON-RPC error under."""
        headers = dict(JSON_HEADERS)
        if retry_after_s is not None:
            headers["retry-after"] = str(max(0, round(retry_after_s)))
        if error_type == "http" or (exchange is not None and exchange.operation in _NO_REQUEST):
            # What the MCP SDK servers send when they reject at the transport (bad session, overload).
            err = {"code": -32000, "message": message or default_message(status)}
            body = {"jsonrpc": "2.0", "id": None, "error": err}
            return status, headers, dumps(body).encode()
        payload = self._error_payload(error_type, message, exchange)
        code = payload.get("error", {}).get("code") if isinstance(payload, dict) else None
        status = 200
        if exchange is not None and exchange.mcp_era == MODERN and isinstance(code, int):
            status = MODERN_ERROR_STATUS.get(code, 200)
        return status, headers, dumps(payload).encode()

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return b"event: message\ndata: " + dumps(self._error_payload(error_type, message, exchange)).encode() + b"\n\n"

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        if exchange.operation == SERVER_STREAM:
            return dict(_SSE), b""  # a stream on which the server never says anything
        if exchange.operation in _NO_REQUEST:
            return {}, b""
        method = exchange.mcp_method or ""
        result: dict[str, Any]
        if method == "tools/call":
            result = {"content": [], "isError": False}
        elif method.endswith("/list"):
            result = {method.split("/", 1)[0]: []}  # tools/list -> {"tools": []}
            if exchange.mcp_era == MODERN:  # what a 2026-07-28 listing must carry (ttlMs 0: do not cache it)
                result.update(cacheScope="private", ttlMs=0)
        elif method == "server/discover":  # a server that offers nothing, at the version asked for
            version = exchange.notes.get("mcp_protocol_version")
            result = {"capabilities": {}, "supportedVersions": [version] if version else [], "ttlMs": 0}
            result["cacheScope"] = "private"
        elif method == LISTEN:  # the subscription ended at once, gracefully
            result = {"_meta": {SUBSCRIPTION_ID_KEY: exchange.notes.get("jsonrpc_id")}}
        else:
            result = {}
        if exchange.mcp_era == MODERN:
            result["resultType"] = "complete"  # 2026-07-28 servers must say what a result is
        body = dumps({"jsonrpc": "2.0", "id": exchange.notes.get("jsonrpc_id"), "result": result}).encode()
        if exchange.content_type.startswith("text/event-stream"):
            return dict(_SSE), b"event: message\ndata: " + body + b"\n\n"
        return dict(JSON_HEADERS), body

    @staticmethod
    def _error_payload(error_type: str | None, message: str | None, exchange: Exchange | None) -> Any:
        notes = exchange.notes if exchange is not None else {}
        ids = notes.get("jsonrpc_ids")
        one_id = notes.get("jsonrpc_id")
        if error_type == "tool_error":
            text = message or "Tool execution failed"
            result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
            if exchange is not None and exchange.mcp_era == MODERN:
                result["resultType"] = "complete"
            payload: dict[str, Any] = {"result": result}
        else:
            code = _CODES.get(error_type or "internal_error")
            if code is None:
                try:
                    code = int(error_type or "")  # a raw JSON-RPC code given as the error type
                except ValueError:
                    code = -32603
            payload = {"error": {"code": code, "message": message or "Internal error"}}
        if isinstance(ids, list):
            return [{"jsonrpc": "2.0", "id": i, **payload} for i in ids]
        return {"jsonrpc": "2.0", "id": one_id, **payload}


def _transport_notes(exchange: Exchange) -> None:
    headers = exchange.request_headers
    if session := headers.get("mcp-session-id"):
        exchange.notes["mcp_session_id"] = session
    if version := headers.get("mcp-protocol-version"):
        exchange.notes["mcp_protocol_version"] = version


def _route_by_headers(exchange: Exchange) -> None:
    """2026-07-28 clients repeat the method and what it acts on in `Mcp-Method` / `Mcp-Name`: where they
    are, they decide, as they do for any intermediary routing on them (a body that disagrees is refused by
    the server as a header mismatch, and a body too large to read still gets its rules)."""
    headers = exchange.request_headers
    method = headers.get("mcp-method")
    if not method:
        return
    exchange.mcp_method = exchange.operation = method
    raw = headers.get("mcp-name")
    name = decode_header_value(raw) if raw else None
    if name is None or method not in _NAMED_BY:
        return
    if method == "tools/call":
        exchange.tool_name = name
    elif method == "prompts/get":
        exchange.notes["mcp_prompt_name"] = name
    else:
        exchange.notes.setdefault("mcp_resource_uri", name)


def _first_request_notes(exchange: Exchange, method: str, params: dict[str, Any]) -> None:
    """What the MCP semantic conventions name for the request: its target and the caller's trace."""
    meta = params.get("_meta")
    if exchange.traceparent is None and isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
        # The conventions propagate trace context in params._meta: stdio has no headers at all.
        exchange.traceparent = meta["traceparent"]
        if isinstance(meta.get("tracestate"), str):
            exchange.tracestate = meta["tracestate"]
    if (version := envelope_version(params)) is not None:
        # The 2026-07-28 envelope names the request's own version; it wins over a header that disagrees.
        exchange.notes["mcp_protocol_version"] = version
        exchange.notes["mcp_envelope"] = True
    elif isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
        exchange.notes["mcp_envelope"] = True
    if method == LISTEN:
        exchange.notes["mcp_listen"] = listened_lists(params)
    if method == "prompts/get" and isinstance(params.get("name"), str):
        exchange.notes["mcp_prompt_name"] = params["name"]
    elif method.startswith("resources/") and isinstance(params.get("uri"), str):
        exchange.notes["mcp_resource_uri"] = params["uri"]
    elif method == "initialize" and isinstance(params.get("protocolVersion"), str):
        exchange.notes.setdefault("mcp_protocol_version", params["protocolVersion"])
