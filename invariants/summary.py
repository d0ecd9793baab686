"""ExchangeSummary: the typed per-exchange view invariants read alongside the span.

Why a summary next to the span: spans are exported, so they carry no prompt text unless
`capture_content` is on, yet `no_pii`, `stream_complete` and `injection_followed` need the
raw text. The summary holds it in memory only; the session history keeps `light()` copies
without the large text fields, so memory per session stays small.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, fields, replace
from email.utils import parsedate_to_datetime
from operator import attrgetter
from typing import Any
from urllib.parse import parse_qsl

from brownout.core.exchange import DEFAULT_CAPTURE_MAX_BYTES, Exchange, FaultRecord, Message, ToolResult, ToolSpec
from brownout.core.span_attributes import LLM_OPERATIONS, operation_name
from brownout.core.spans import ExchangeSpan
from brownout.core.wire.mcp import TRANSIENT_ERROR_TYPES as MCP_TRANSIENT_ERRORS

__all__ = ["ExchangeSummary", "ToolCallView", "canonical_arguments", "parse_retry_after"]

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_LIGHT_ARGS_CHARS = 256  # tool-call arguments kept per history entry


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """A tool call with its raw argument text as it crossed the wire."""

    name: str
    arguments: str
    id: str | None = None
    # A GET-style tool API's query string, as a JSON object of strings: for telling calls apart,
    # not for schema checks (query values carry no JSON types).
    from_query: bool = False
    # The arguments crossed the wire as a JSON object: only the tool's schema can find them wrong.
    from_object: bool = False


@dataclass(frozen=True, slots=True)
class ExchangeSummary:
    """What invariants need to know about one exchange (no mitmproxy, no SDK objects)."""

    exchange_id: str
    session_id: str
    trace_id: str
    span_id: str
    provider: str
    operation: str | None  # gen_ai.operation.name, None for plain HTTP
    model: str | None
    method: str
    host: str
    url: str  # url.full, query secrets redacted
    endpoint: str  # "METHOD host/path" without query
    # What a retry of this request repeats: the endpoint, or for MCP (one endpoint for every method)
    # the JSON-RPC method and tool at that endpoint.
    retry_target: str
    status: int | None
    error_type: str | None
    start: float
    end: float
    ttfc_s: float | None
    stream: bool
    stream_complete: bool | None
    finish_reasons: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # at list prices; None when not priced (no usage, or a model the table lacks)
    retry_count: int | None  # x-stainless-retry-count
    retry_after_s: float | None  # from retry-after-ms / retry-after on the response
    tool_name: str | None
    requested_calls: tuple[ToolCallView, ...]  # tool calls the model asked for in its response
    executed_call: ToolCallView | None  # the call an execute_tool exchange carried out
    tools_declared: tuple[ToolSpec, ...]
    faults: tuple[FaultRecord, ...]
    mcp_method: str | None = None
    # MCP notifications the server sent: with this exchange's reply, and, each with the time it reached the
    # client, those on a subscription stream or (stdio) between requests.
    server_notifications: tuple[str, ...] = ()
    notifications_before: tuple[tuple[str, float], ...] = ()
    mcp_era: str | None = None  # "handshake" or "modern" (2026-07-28)
    mcp_session_id: str | None = None  # the handshake era's Mcp-Session-Id (stdio: one per server process)
    mcp_ttl_ms: int | None = None  # a 2026-07-28 result's ttlMs: how long the client may use it
    # Large text: present on the current exchange only, dropped by light().
    messages: tuple[Message, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    request_body: str = ""
    output_text: str = ""
    # Bodies as they crossed the wire; the text fields above hold at most capture_max_bytes of them.
    request_bytes: int = 0
    response_bytes: int = 0
    capture_max_bytes: int = DEFAULT_CAPTURE_MAX_BYTES

    @property
    def is_llm(self) -> bool:
        return self.operation in LLM_OPERATIONS

    @property
    def stream_cut(self) -> bool:
        """A stream that ended before its terminal event, the model not finished: the client has part of an answer."""
        return self.stream and self.stream_complete is False and not self.finish_reasons

    @property
    def is_failure(self) -> bool:
        """An answer a well-behaved client retries: 408/409/429, 5xx, no response, mid-stream error, cut stream.

        MCP carries answers in HTTP 200: a tool result with isError, or a JSON-RPC error such as
        invalid_params, is the server's answer and asking again changes nothing; only internal and
        server errors, and a dropped connection, are failures."""
        if self.status is None:
            return True
        if self.status in _RETRYABLE_STATUSES or self.status >= 500:
            return True
        if self.status < 400 and self.stream_cut:
            return True
        if self.status >= 400 or self.error_type is None:
            return False
        return self.provider != "mcp" or self.error_type in MCP_TRANSIENT_ERRORS

    @property
    def tool(self) -> str | None:
        if self.tool_name:
            return self.tool_name
        return self.requested_calls[0].name if self.requested_calls else None

    @property
    def rules(self) -> str | None:
        return ",".join(dict.fromkeys(f.rule for f in self.faults)) or None

    @property
    def fault_types(self) -> str | None:
        return ",".join(dict.fromkeys(f.fault for f in self.faults)) or None

    def light(self) -> ExchangeSummary:
        """A copy without the large text fields and declared tools, for the session history."""
        calls = tuple(_light_call(c) for c in self.requested_calls)
        executed = self.executed_call
        # Declared tools live once in Session.tools; every request repeats them.
        values = list(_all_values(self))
        for index, value in _LIGHT_BLANKS:
            values[index] = value
        values[_REQUESTED_CALLS] = calls
        values[_EXECUTED_CALL] = None if executed is None else _light_call(executed)
        # Every exchange makes one for its session: built from its values in field order, a copy costs a
        # fraction of dataclasses.replace(), which walks the fields' definitions each time.
        return ExchangeSummary(*values)

    @classmethod
    def from_exchange(cls, span: ExchangeSpan, exchange: Exchange) -> ExchangeSummary:
        """Derive the summary from a started span and its exchange."""
        op = operation_name(exchange)
        calls = tuple(ToolCallView(c.name, c.arguments, c.id, from_object=c.from_object) for c in exchange.tool_calls)
        executed: ToolCallView | None = None
        if op == "execute_tool":
            executed = _executed_call(exchange, calls)
            calls = ()
        start = exchange.timings.start or span.start_ns / 1e9
        endpoint = f"{exchange.method} {exchange.host}{exchange.path.partition('?')[0]}"
        end = exchange.timings.end if exchange.timings.end is not None else span.end_ns / 1e9
        return cls(
            exchange_id=exchange.id,
            session_id=exchange.session,
            trace_id=span.trace_id_hex,
            span_id=span.span_id_hex,
            provider=exchange.provider,
            operation=op,
            model=exchange.model,
            method=exchange.method,
            host=exchange.host,
            url=str(span.attributes.get("url.full", "")),
            endpoint=endpoint,
            retry_target=_retry_target(exchange, endpoint),
            status=exchange.status,
            error_type=exchange.error_type,
            start=start,
            end=end,
            ttfc_s=exchange.timings.ttfc_s,
            stream=exchange.stream or exchange.streamed,
            stream_complete=exchange.stream_complete,
            finish_reasons=tuple(exchange.finish_reasons),
            input_tokens=exchange.usage.input_tokens or 0,
            output_tokens=exchange.usage.output_tokens or 0,
            cost_usd=exchange.cost.total if exchange.cost is not None and exchange.cost.currency == "USD" else None,
            retry_count=exchange.retry_count,
            retry_after_s=parse_retry_after(exchange.response_headers, now=end),
            tool_name=exchange.tool_name or (executed.name if executed else None),
            requested_calls=calls,
            executed_call=executed,
            tools_declared=tuple(exchange.tools_declared),
            faults=tuple(exchange.faults),
            mcp_method=exchange.mcp_method,
            server_notifications=tuple(exchange.notes.get("server_notifications") or ()),
            notifications_before=_timed_notes(exchange.notes.get("notifications_before")),
            mcp_era=exchange.mcp_era,
            mcp_session_id=_str_or_none(exchange.notes.get("mcp_session_id")),
            mcp_ttl_ms=exchange.notes.get("mcp_ttl_ms"),
            messages=tuple(exchange.messages),
            tool_results=tuple(exchange.tool_results),
            request_body=exchange.request_body,
            output_text=exchange.output_text,
            request_bytes=exchange.request_bytes,
            response_bytes=exchange.response_bytes,
            capture_max_bytes=exchange.capture_max_bytes,
        )


_FIELD_NAMES = tuple(f.name for f in fields(ExchangeSummary))
_all_values = attrgetter(*_FIELD_NAMES)
# What light() empties, by position: the large text fields and the declared tools.
_LIGHT_BLANKS = tuple(
    (_FIELD_NAMES.index(name), blank)
    for name, blank in (
        ("messages", ()),
        ("tool_results", ()),
        ("request_body", ""),
        ("output_text", ""),
        ("tools_declared", ()),
    )
)
_REQUESTED_CALLS = _FIELD_NAMES.index("requested_calls")
_EXECUTED_CALL = _FIELD_NAMES.index("executed_call")


def _light_call(call: ToolCallView) -> ToolCallView:
    if len(call.arguments) <= _LIGHT_ARGS_CHARS:
        return call  # frozen: the history may share it
    return replace(call, arguments=call.arguments[:_LIGHT_ARGS_CHARS])


def _timed_notes(value: Any) -> tuple[tuple[str, float], ...]:
    """(method, time) pairs from a note; anything else in it is no notification."""
    pairs = value if isinstance(value, list | tuple) else ()
    return tuple(
        (p[0], float(p[1]))
        for p in pairs
        if isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int | float)
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _retry_target(exchange: Exchange, endpoint: str) -> str:
    if exchange.provider != "mcp":
        return endpoint
    what = exchange.mcp_method or exchange.operation
    if exchange.tool_name and what == "tools/call":
        what = f"{what} {exchange.tool_name}"
    return f"{what} ({endpoint})"


def _executed_call(exchange: Exchange, calls: tuple[ToolCallView, ...]) -> ToolCallView:
    if calls:
        call = calls[0]
        return ToolCallView(
            exchange.tool_name or call.name,
            call.arguments,
            exchange.tool_call_id or call.id,
            from_object=call.from_object,
        )
    arguments = exchange.request_body
    if not arguments.strip():
        # A GET-style tool API (/tools/weather?city=Paris): the query is the arguments, so calls
        # for different cities are different calls (no_loop), and a marker in it is seen.
        query = parse_qsl(exchange.path.partition("?")[2], keep_blank_values=True)
        if query:
            params: dict[str, Any] = {}
            for key, value in query:
                params.setdefault(key, []).append(value)
            args = {k: v[0] if len(v) == 1 else v for k, v in params.items()}
            return ToolCallView(
                exchange.tool_name or "", json.dumps(args, sort_keys=True), exchange.tool_call_id, from_query=True
            )
    try:
        body = json.loads(arguments)
    except ValueError:
        body = None
    # MCP tools/call: the arguments are params.arguments; the JSON-RPC id varies per call.
    if isinstance(body, dict) and isinstance(body.get("params"), dict) and "arguments" in body["params"]:
        arguments = json.dumps(body["params"]["arguments"])
    return ToolCallView(exchange.tool_name or "", arguments, exchange.tool_call_id)


def canonical_arguments(arguments: str) -> str:
    """Arguments as sorted, compact JSON when they parse, else the stripped raw text."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


def parse_retry_after(headers: dict[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: retry-after-ms, then retry-after (seconds or HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        with contextlib.suppress(ValueError):  # malformed: fall back to retry-after
            return max(0.0, float(raw_ms) / 1000)
    raw = headers.get("retry-after")
    if not raw:
        return None
    with contextlib.suppress(ValueError):  # not seconds: an HTTP date, tried next
        return max(0.0, float(raw))
    try:
        when: Any = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))
