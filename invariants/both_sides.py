"""What the invariants that need both sides share: how a wire call is named, and
violations tied to a wire call (its exchange and span) or to an agent span (the agent's own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brownout.core.agent_spans import AgentSpan
from brownout.core.span_join import WireCall
from brownout.invariants.base import Invariant
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["describe", "on_agent_span", "on_call"]


def describe(call: WireCall) -> str:
    """ "tool call 'weather' (exchange x1)", "LLM call gpt-4o (exchange x2)"."""
    what = f"tool call {call.tool_name!r}" if call.kind == "tool" else f"LLM call {call.model or call.provider or ''}"
    return f"{what.rstrip()} (exchange {call.exchange_id})"


def on_call(
    invariant: Invariant[Any],
    message: str,
    session: Session,
    call: WireCall,
    *,
    agent: AgentSpan | None = None,
    details: Mapping[str, Any] | None = None,
) -> Violation:
    """A violation about a wire call: tied to its exchange and span, the agent span in its details."""
    extra = {"agent_span_id": agent.span_id, "agent_trace_id": agent.trace_id} if agent is not None else {}
    return invariant.record(
        message,
        session,
        details={**extra, **(details or {})},
        trace_id=call.trace_id,
        span_id=call.span_id,
        exchange_id=call.exchange_id,
        provider=call.provider,
        model=call.model,
        tool=call.tool_name,
        rule=",".join(call.rules) or None,
        fault=",".join(dict.fromkeys(call.faults)) or None,
    )


def on_agent_span(
    invariant: Invariant[Any], message: str, session: Session, span: AgentSpan, details: Mapping[str, Any] | None = None
) -> Violation:
    """A violation about one of the agent's own spans: tied to it (its trace and id), no exchange."""
    return invariant.record(
        message,
        session,
        details={"agent_span_name": span.name, **(details or {})},
        trace_id=span.trace_id,
        span_id=span.span_id,
        provider=span.provider,
        model=span.request_model or span.response_model,
        tool=span.tool_name,
    )
