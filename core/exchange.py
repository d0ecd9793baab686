"""The exchange model: one agent request and its response, as brownout saw them on the wire.

Only `proxy.flowmodel` fills it from mitmproxy flows; wire-format parsers fill the
provider-specific parts; faults, spans and invariants read it and never touch mitmproxy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONNECTION_ERRORS",
    "DEFAULT_CAPTURE_MAX_BYTES",
    "PARSE_ERROR_REASONS",
    "SHUTDOWN",
    "UNINSPECTED_REASONS",
    "Cost",
    "Exchange",
    "FaultRecord",
    "Message",
    "RealtimeInfo",
    "Timings",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "cap_text",
]

DEFAULT_CAPTURE_MAX_BYTES = 1 << 20  # 1 MiB of captured text per exchange field
# error_type of an exchange still in flight when brownout shut down (drain deadline or a second
# signal): it is recorded with what arrived so far, then its connection is closed.
SHUTDOWN = "shutdown"
# error_type values of exchanges that ended with their connection, whatever status had arrived.
CONNECTION_ERRORS = frozenset({"connection", SHUTDOWN})


def cap_text(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes, never splitting a character."""
    # A character is at most 4 bytes, so short strings need no encoding at all.
    if len(text) * 4 <= max_bytes:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


# Why a body was not (fully) inspected: bounded, so they can label a metric.
UNINSPECTED_REASONS = (
    "event_too_large",  # an SSE event or NDJSON line longer than proxy.event_max_bytes
    "decoded_too_large",  # a compressed body decoding to more than proxy.buffer_max_bytes
    "undecodable",  # corrupt compressed bytes, or a content-encoding brownout cannot decode
    "fell_behind",  # compressed stream arriving faster than it could be parsed
)

# Why a body brownout read could not be parsed: the traffic's doing, never brownout's (a parser's
# own exception is an internal error, through the guard). Bounded, so they can label a metric.
PARSE_ERROR_REASONS = (
    "invalid_json",  # not JSON where the format says JSON: bad syntax, bad UTF-8, cut short
    "invalid_protobuf",  # not the protobuf message the format says (an OTLP export)
    "too_deep",  # JSON nested deeper than the parser goes
    "too_large",  # larger than proxy.capture_max_bytes: passed on, not parsed
    "undecodable",  # its content-encoding could not be decoded (corrupt or cut compressed bytes)
)


@dataclass(slots=True)
class ToolCall:
    """A tool call the model asked for in a response."""

    name: str
    # The raw arguments text as it crossed the wire: OpenAI `function.arguments`, the
    # concatenated Anthropic `input_json_delta.partial_json` (or json.dumps of `input`),
    # Gemini/Ollama `args`/`arguments` re-serialised, MCP `params.arguments`.
    arguments: str = ""
    id: str | None = None
    index: int = 0
    capped: bool = False  # `arguments` was cut at capture_max_bytes: not the whole text, not checkable
    # The arguments arrived as a JSON object (Anthropic `input`, Gemini `args`, Ollama and MCP
    # `arguments`) and were serialised here: they can be wrong for the tool's schema, never bad JSON.
    from_object: bool = False


@dataclass(slots=True)
class ToolResult:
    """A tool result the agent sent back to the model in a request."""

    call_id: str | None
    content: str
    name: str | None = None
    is_error: bool = False


@dataclass(slots=True)
class ToolSpec:
    """A tool declared in a request's `tools`, with its JSON Schema when given."""

    name: str
    schema: dict[str, Any] | None = None


@dataclass(slots=True)
class Message:
    """One conversation message of a request, reduced to role and text."""

    role: str
    text: str


@dataclass(slots=True)
class Usage:
    """Token usage reported by the provider."""

    input_tokens: int | None = None  # every prompt token, the cached ones included
    output_tokens: int | None = None
    cache_read_tokens: int | None = None  # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int | None = None  # of input_tokens: written to the provider's prompt cache
    cache_write_1h_tokens: int | None = None  # of cache_write_tokens: kept an hour (Anthropic), dearer


@dataclass(slots=True, frozen=True)
class Cost:
    """What an exchange cost at its provider's list prices, from a maintained price table."""

    total: float
    input: float
    output: float
    currency: str  # ISO 4217; the price table's prices are in US dollars
    model: str  # the price table's id of the model that was priced
    provider: str  # the price table's id of the provider


@dataclass(slots=True)
class Timings:
    """Wall-clock timestamps in seconds since the epoch (time.time())."""

    start: float = 0.0  # request received from the client
    first_upstream_byte: float | None = None  # response headers arrived from upstream
    first_client_byte: float | None = None  # first response body bytes handed to the client
    end: float | None = None  # exchange finished (response complete or error)

    @property
    def duration_s(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - self.start)

    @property
    def ttfc_s(self) -> float | None:
        """Time to first chunk: request start to the first body bytes sent to the client."""
        first = self.first_client_byte or self.first_upstream_byte
        return None if first is None else max(0.0, first - self.start)


@dataclass(slots=True)
class RealtimeInfo:
    """What a realtime WebSocket session (OpenAI Realtime, Gemini Live) adds to its exchanges.

    A session is one exchange (`kind` "session": the upgrade request, open until the socket closes) and
    each server-side generation in it another (`kind` "generation"); both carry the session id."""

    session_id: str  # gen_ai.live_session.id: the provider's, or minted by brownout when it gives none
    kind: str = "generation"  # "session" or "generation"
    minted: bool = False  # brownout made the session id up (the provider exposes none)
    status: str | None = None  # generation: the provider's status (completed, cancelled, incomplete, failed)
    # Session only: how it ended and what it offered and used.
    close_code: int | None = None
    closed_by: str | None = None  # client, server or brownout; None while open
    resumption_offered: bool = False  # the server handed out a handle to resume with (Gemini)
    resumption_used: bool = False  # the client resumed an earlier session with one
    generations: int = 0
    events_client: int = 0
    events_server: int = 0
    errors: int = 0  # error events the client received
    last_error: str | None = None  # the last error event's code or type


@dataclass(slots=True)
class FaultRecord:
    """A fault brownout injected into this exchange."""

    rule: str
    fault: str
    params: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0


@dataclass
class Exchange:
    """One request/response pair with everything faults, spans and invariants need."""

    id: str
    session: str
    method: str = "GET"
    scheme: str = "http"
    host: str = ""
    port: int = 0
    path: str = "/"  # path and query, secrets in the query redacted
    client: str = ""  # client address "ip:port"
    transport: str = "http"  # how the agent reached the server: "http", or "stdio" (brownout mcp-stdio)

    # How much text of each field below is kept (request body, messages, tool arguments and
    # results, output text): set from the config when the exchange is created.
    capture_max_bytes: int = DEFAULT_CAPTURE_MAX_BYTES

    # What the request was, as recognised by a wire format.
    provider: str = "http"  # the wire format's id: openai, anthropic, gemini, ollama, mcp, a plugin's, http
    gen_ai_provider: str | None = None  # gen_ai.provider.name, stamped by the wire format
    operation: str = (
        "http"  # chat, responses, embeddings, text_completion, generate_content, tools/call, execute_tool, ...
    )
    model: str | None = None
    stream: bool = False  # the client asked for a streamed response
    tools_declared: list[ToolSpec] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    tool_name: str | None = None  # execute_tool exchanges (MCP tools/call, plain tool APIs)
    tool_call_id: str | None = None
    mcp_method: str | None = None
    # The MCP era the request speaks: "handshake" (initialize, sessions) or "modern" (2026-07-28, a
    # per-request envelope); None when nothing in it tells (see brownout.core.wire.mcp_eras).
    mcp_era: str | None = None
    request_body: str = ""  # decoded request body, capped at capture_max_bytes
    request_headers: dict[str, str] = field(default_factory=dict)  # lower-case names, secrets redacted

    # Trace context and client retry signals.
    traceparent: str | None = None
    tracestate: str | None = None
    retry_count: int | None = None  # x-stainless-retry-count
    # The agent's own span this exchange belongs to (brownout.core.span_join), once joined: its id, trace,
    # and how it was found ("trace_context" or "time").
    agent_span_id: str | None = None
    agent_trace_id: str | None = None
    agent_join: str | None = None

    # What came back.
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    content_type: str = ""
    response_id: str | None = None
    response_model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: Cost | None = None  # priced when the exchange finishes; None: no usage, or a model the table lacks
    output_text: str = ""  # assistant text (or the tool API's body), capped at capture_max_bytes
    tool_calls: list[ToolCall] = field(default_factory=list)
    streamed: bool = False  # the response was passed through as a stream
    replayed: bool = False  # answered from a recorded cassette, not by the upstream
    stream_events: int = 0
    stream_complete: bool | None = None  # saw the terminal event; None when not a stream
    error_type: str | None = None  # provider error type, or the transport error
    error_message: str | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    parse_error: str | None = None  # why a body could not be parsed (detail); the exchange itself is unaffected
    parse_error_reason: str | None = None  # its code, one of PARSE_ERROR_REASONS
    # Why brownout stopped reading a body (it passed through untouched from there on): one of
    # UNINSPECTED_REASONS; the detail goes to notes["uninspected"].
    uninspected: str | None = None

    faults: list[FaultRecord] = field(default_factory=list)
    # Faults that fired but could not act on this exchange; the reason is in params["skipped"].
    faults_skipped: list[FaultRecord] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    realtime: RealtimeInfo | None = None  # a realtime WebSocket session or one of its generations
    # Free-form per-component notes (decisions, relay info); never exported as-is.
    notes: dict[str, Any] = field(default_factory=dict)

    def cap_captured(self) -> None:
        """Cut every kept text field to capture_max_bytes (the wire formats call this after parsing)."""
        limit = self.capture_max_bytes
        self.request_body = cap_text(self.request_body, limit)
        self.output_text = cap_text(self.output_text, limit)
        for message in self.messages:
            message.text = cap_text(message.text, limit)
        for result in self.tool_results:
            result.content = cap_text(result.content, limit)
        for call in self.tool_calls:
            capped = cap_text(call.arguments, limit)
            if capped is not call.arguments and capped != call.arguments:
                call.arguments, call.capped = capped, True

    def note_parse_error(self, reason: str, detail: str) -> None:
        """Record why a body could not be parsed (the first wins: later failures are its consequences)."""
        if self.parse_error is None:
            self.parse_error, self.parse_error_reason = detail[:300], reason

    def mark_uninspected(self, reason: str, detail: str) -> None:
        """Record that parsing stopped (the first reason wins: later ones are its consequences)."""
        if self.uninspected is None:
            self.uninspected = reason
            self.notes["uninspected"] = detail

    @property
    def fault_injected(self) -> bool:
        return bool(self.faults)

    @property
    def status_class(self) -> str:
        if self.status is None or self.error_type in CONNECTION_ERRORS:
            return "error"
        return f"{self.status // 100}xx"

    @property
    def upstream(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"
