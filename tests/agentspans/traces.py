"""Joined traces built by hand for the invariants that need both sides: agent spans and wire calls."""

from __future__ import annotations

from typing import Any

from brownout.core.agent_spans import STATUS_UNSET, AgentSpan
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import BY_TIME, ToolCallRecord, WireCall
from brownout.invariants import REGISTRY
from brownout.invariants.base import Invariant
from brownout.invariants.config import parse_invariants
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["T", "agent", "invariant", "judge", "tool_call", "trace", "wire"]

T = "ab" * 16


def agent(
    n: int, op: str, start: float, end: float, *, parent: int | None = None, status: str = STATUS_UNSET, **kw: Any
) -> AgentSpan:
    return AgentSpan(
        trace_id=T,
        span_id=f"{n:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=f"{op} {n}",
        start_ns=int(start * 1e9),
        end_ns=int(end * 1e9),
        status=status,
        genai=True,
        operation=op,
        **kw,
    )


def wire(n: int, kind: str, start: float, end: float, *, joined: AgentSpan | None = None, **kw: Any) -> WireCall:
    return WireCall(
        exchange_id=f"x{n}",
        session="sess",
        kind=kind,
        trace_id=T,
        span_id=f"{0xF000 + n:016x}",
        start_s=start,
        end_s=end,
        agent_span_id=joined.span_id if joined else None,
        joined_by=BY_TIME if joined else None,
        **kw,
    )


def tool_call(call_id: str, name: str, arguments: str) -> ToolCallRecord:
    return ToolCallRecord(call_id, name, arguments)


def trace(spans: list[AgentSpan], calls: list[WireCall], *, instrumented: bool = True) -> JoinedTrace:
    return JoinedTrace(T, spans, calls, parents={s.span_id: s.parent_span_id for s in spans}, instrumented=instrumented)


def invariant(**config: Any) -> Invariant[Any]:
    (parsed,) = parse_invariants([config])
    return REGISTRY[parsed.type](parsed)


def judge(inv: Invariant[Any], joined: JoinedTrace) -> list[Violation]:
    session = Session(id="sess", created=0.0, last_seen=0.0, now=100.0)
    return inv.check_trace(joined, session)
