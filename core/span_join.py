"""The join of the agent's spans with the wire: which agent span a wire call belongs to.

A wire call (an LLM or tool exchange brownout saw) belongs to the agent's GenAI span that made it:

1. **by trace context**, when the client propagated `traceparent`: the span it names, or the nearest
   GenAI span above it (an HTTP client span sits between a `chat` span and the request when the agent's
   HTTP library is instrumented too);
2. **by time**, otherwise: an agent span of the same kind (LLM or tool) whose time contains the call's
   (give or take `skew_s`), of a compatible provider; the model and the tool name break ties, then the
   tightest span wins.

This module holds the wire side's record (`WireCall`); the matching is `brownout.core.span_match`, a
trace's both sides `brownout.core.joined_trace`, the store `brownout.core.span_store`; the proxy
decides when to look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opentelemetry.trace import SpanContext, TraceFlags

from brownout.core.exchange import Exchange

__all__ = [
    "BENIGN_FAULTS",
    "BY_CONTEXT",
    "BY_TIME",
    "WireCall",
    "agent_fields",
    "agent_parent",
    "call_kind",
    "parse_traceparent",
    "wire_call",
]

BY_CONTEXT, BY_TIME = "trace_context", "time"
# Faults that only slow a call down: the call still succeeds, so nothing depending on it failed.
BENIGN_FAULTS = frozenset({"latency", "stall", "throttle"})
_LLM = frozenset({"chat", "responses", "text_completion", "generate_content", "embeddings", "messages"})
_TOOL = frozenset({"execute_tool", "tools/call"})
_ARGUMENTS_MAX_CHARS = 16_384
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
    rules: tuple[str, ...] = ()  # the rules that injected them
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
        rules=tuple(dict.fromkeys(f.rule for f in exchange.faults)),
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
