"""The join of the agent's spans with the wire: which agent span a wire call belongs to.

A wire call (an LLM or tool exchange brownout saw) belongs to the agent's GenAI span that made it:

1. **by trace context**, when the client propagated `traceparent`: the span it names, or the nearest
   GenAI span above it (an HTTP client span sits between a `chat` span and the request when the agent's
   HTTP library is instrumented too);
2. **by time**, otherwise: an agent span of the same kind (LLM or tool) whose time contains the call's
   (give or take `skew_s`), of a compatible provider; the model and the tool name break ties, then the
   tightest span wins.

Pure functions over `AgentSpan`s and `WireCall`s: the store (`brownout.core.span_store`) finds the
candidates, the proxy decides when to look.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opentelemetry.trace import SpanContext, TraceFlags

from brownout.core.agent_spans import AgentSpan
from brownout.core.exchange import Exchange

__all__ = [
    "BENIGN_FAULTS",
    "BY_CONTEXT",
    "BY_TIME",
    "JoinedTrace",
    "WireCall",
    "agent_fields",
    "agent_parent",
    "call_kind",
    "join_by_context",
    "join_by_time",
    "parse_traceparent",
    "wire_call",
]

BY_CONTEXT, BY_TIME = "trace_context", "time"
# Faults that only slow a call down: the call still succeeds, so nothing depending on it failed.
BENIGN_FAULTS = frozenset({"latency", "stall", "throttle"})
_LLM = frozenset({"chat", "responses", "text_completion", "generate_content", "embeddings", "messages"})
_TOOL = frozenset({"execute_tool", "tools/call"})
_ARGUMENTS_MAX_CHARS = 16_384
_NAME_CHARS = re.compile(r"[^a-z0-9]")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace id, parent span id) of a valid W3C traceparent, else None."""
    match = _TRACEPARENT.fullmatch(value.strip().lower()) if value else None
    if match is None or not int(match[1], 16) or not int(match[2], 16):
        return None
    return match[1], match[2]


def call_kind(operation: str | None) -> str | None:
    """ "llm", "tool" or None: the kind of call a wire exchange or an agent span is."""
    if operation in _LLM:
        return "llm"
    if operation in _TOOL:
        return "tool"
    return None


@dataclass(slots=True, frozen=True)
class ToolCallRecord:
    """A tool call the model asked for on the wire, by id (what span_mismatch compares arguments with)."""

    id: str | None
    name: str
    arguments: str


@dataclass(slots=True)
class WireCall:
    """One LLM or tool exchange as the join keeps it: ids, target, outcome, usage. No bodies."""

    exchange_id: str
    session: str
    kind: str  # "llm" | "tool"
    trace_id: str  # the wire span's, 32 hex digits
    span_id: str  # the wire span's, 16 hex digits
    start_s: float
    end_s: float
    provider: str | None = None  # gen_ai.provider.name
    model: str | None = None
    tool_name: str | None = None
    failed: bool = False  # an error status, a connection error, a provider error
    faults: tuple[str, ...] = ()  # the fault types injected into it
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: tuple[ToolCallRecord, ...] = ()  # what the model asked for (LLM calls)
    arguments: str | None = None  # what a tool call carried out (tool calls)
    agent_span_id: str | None = None  # the agent span it belongs to, once joined
    joined_by: str | None = None  # BY_CONTEXT | BY_TIME

    def broken(self, benign: frozenset[str] = BENIGN_FAULTS) -> bool:
        """It failed, or a fault other than a benign one touched it."""
        return self.failed or any(f not in benign for f in self.faults)

    @property
    def target(self) -> tuple[str, str | None, str | None]:
        """What a retry of this call calls again."""
        return (self.kind, self.tool_name, None) if self.kind == "tool" else (self.kind, self.provider, self.model)


@dataclass(slots=True)
class JoinedTrace:
    """One trace's both sides, handed to the invariants that need both once the trace has settled."""

    trace_id: str
    agent_spans: list[AgentSpan] = field(default_factory=list)  # its GenAI spans
    wire_calls: list[WireCall] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)  # span id -> parent span id, every span seen
    instrumented: bool = False  # the agent sent GenAI spans to brownout lately (any trace)

    def span(self, span_id: str | None) -> AgentSpan | None:
        return next((s for s in self.agent_spans if s.span_id == span_id), None) if span_id else None

    def agent_span_of(self, call: WireCall, *, skew_s: float = 0.25) -> AgentSpan | None:
        """The GenAI span of the agent `call` belongs to: the one its trace context leads to, the one it
        was joined to by time, or (context leading to no GenAI span of its kind) the one time finds here."""
        if call.joined_by == BY_TIME:
            return self.span(call.agent_span_id)
        if call.joined_by == BY_CONTEXT and call.agent_span_id is not None:
            by_id = {s.span_id: s for s in self.agent_spans}
            found = join_by_context(call.agent_span_id, by_id, self.parents, call.kind)
            if found is not None:
                return found
        return join_by_time(call, self.agent_spans, skew_s=skew_s)

    def within(self, ancestor: AgentSpan) -> Callable[[str | None], bool]:
        """A test: is this span id `ancestor` or below it?"""

        def test(span_id: str | None) -> bool:
            seen = 0
            while span_id is not None and seen < 256:  # a cycle in bad data must not hang the loop
                if span_id == ancestor.span_id:
                    return True
                span_id = self.parents.get(span_id)
                seen += 1
            return False

        return test


def wire_call(exchange: Exchange, *, trace_id: str, span_id: str, failed: bool) -> WireCall | None:
    """The join's record of a finished exchange, or None when it is neither an LLM nor a tool call."""
    kind = call_kind(exchange.operation if exchange.mcp_method != "tools/call" else "tools/call")
    if kind is None:
        return None
    start = exchange.timings.start
    calls = tuple(ToolCallRecord(c.id, c.name, c.arguments[:_ARGUMENTS_MAX_CHARS]) for c in exchange.tool_calls[:64])
    executed = calls[0].arguments if kind == "tool" and calls else None
    return WireCall(
        exchange_id=exchange.id,
        session=exchange.session,
        kind=kind,
        trace_id=trace_id,
        span_id=span_id,
        start_s=start,
        end_s=exchange.timings.end if exchange.timings.end is not None else start,
        provider=exchange.gen_ai_provider,
        model=exchange.model,
        tool_name=exchange.tool_name,
        failed=failed,
        faults=tuple(f.fault for f in exchange.faults),
        input_tokens=exchange.usage.input_tokens,
        output_tokens=exchange.usage.output_tokens,
        tool_calls=calls if kind == "llm" else (),
        arguments=executed,
        agent_span_id=exchange.agent_span_id,
        joined_by=exchange.agent_join,
    )


def agent_parent(exchange: Exchange) -> SpanContext | None:
    """The agent span an exchange without trace context was matched to by time: its span's parent."""
    if exchange.agent_join != BY_TIME or not exchange.agent_trace_id or not exchange.agent_span_id:
        return None
    trace_id, span_id = int(exchange.agent_trace_id, 16), int(exchange.agent_span_id, 16)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def agent_fields(exchange: Exchange, prefix: str = "brownout.agent.") -> dict[str, str]:
    """The agent span a joined exchange belongs to, as span attributes (`brownout.agent.span_id`,
    `brownout.agent.trace_id`, `brownout.agent.join`) or, with another prefix, log fields; {}: not joined."""
    if exchange.agent_span_id is None:
        return {}
    return {
        f"{prefix}span_id": exchange.agent_span_id,
        f"{prefix}trace_id": exchange.agent_trace_id or "",
        f"{prefix}join": exchange.agent_join or "",
    }


# -- matching ------------------------------------------------------------------------------


def _norm(name: str) -> str:
    return _NAME_CHARS.sub("", name.lower())


def _related(a: str | None, b: str | None) -> bool | None:
    """None when either is unknown; else whether one name holds the other (gcp.gemini ~ gemini)."""
    if not a or not b:
        return None
    x, y = _norm(a), _norm(b)
    return bool(x and y) and (x in y or y in x)


def join_by_context(
    parent_span_id: str, spans: dict[str, AgentSpan], parents: dict[str, str | None], kind: str
) -> AgentSpan | None:
    """The agent span of `kind` that is, or is the nearest GenAI span above, the propagated parent."""
    span_id: str | None = parent_span_id
    for _ in range(256):  # a cycle in bad data must not hang the loop
        if span_id is None:
            return None
        span = spans.get(span_id)
        if span is not None:
            return span if call_kind(span.operation) == kind else None
        span_id = parents.get(span_id)
    return None


def join_by_time(
    call: WireCall | Exchange, candidates: Iterable[AgentSpan], *, skew_s: float = 0.25
) -> AgentSpan | None:
    """The agent span a call without trace context belongs to, by time, provider, model and tool."""
    if isinstance(call, Exchange):
        kind = call_kind(call.operation if call.mcp_method != "tools/call" else "tools/call")
        start = call.timings.start
        end = call.timings.end if call.timings.end is not None else start
        provider, model, tool = call.gen_ai_provider, call.model, call.tool_name
    else:
        kind, start, end = call.kind, call.start_s, call.end_s
        provider, model, tool = call.provider, call.model, call.tool_name
    best: tuple[int, int, AgentSpan] | None = None
    for span in candidates:
        if call_kind(span.operation) != kind:
            continue
        if span.start_s > start + skew_s or span.end_s < end - skew_s:
            continue
        if _related(span.provider, provider) is False:
            continue
        score = 0
        if kind == "llm" and _related(span.request_model or span.response_model, model):
            score += 2
        if kind == "tool" and _related(span.tool_name, tool):
            score += 2
        rank = (score, -(span.end_ns - span.start_ns))
        if best is None or rank > best[:2]:
            best = (*rank, span)
    return best[2] if best is not None else None
