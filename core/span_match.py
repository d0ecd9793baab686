"""Matching a wire call to the agent span it belongs to (see `brownout.core.span_join`): up the tree from the
propagated parent, or by time, provider, model and tool; `TimeIndex` keeps the candidates by start time."""

from __future__ import annotations

import bisect
import re
from collections.abc import Container, Iterable, Iterator

from brownout.core.agent_spans import AgentSpan
from brownout.core.exchange import Exchange
from brownout.core.span_join import WireCall, call_kind

__all__ = ["TimeIndex", "join_by_context", "join_by_time"]

_NAME_CHARS = re.compile(r"[^a-z0-9]")


class TimeIndex:
    """LLM and tool spans by start time, for matching calls by time without scanning every span: the
    candidates for a call are those that started at most the longest such span's duration before it."""

    __slots__ = ("_longest", "_spans", "_starts", "max_spans")

    def __init__(self, spans: Iterable[AgentSpan] = (), *, max_spans: int | None = None) -> None:
        self.max_spans = max_spans
        self._starts: list[int] = []
        self._spans: list[AgentSpan] = []
        self._longest = 0  # ns
        for span in spans:
            self.add(span)

    def __len__(self) -> int:
        return len(self._spans)

    def add(self, span: AgentSpan) -> None:
        if call_kind(span.operation) is None:
            return
        i = bisect.bisect_right(self._starts, span.start_ns)
        self._starts.insert(i, span.start_ns)
        self._spans.insert(i, span)
        self._longest = max(self._longest, span.end_ns - span.start_ns)
        if self.max_spans is not None and len(self._spans) > self.max_spans:
            del self._starts[0], self._spans[0]  # the one that started first goes

    def around(self, start_s: float, skew_s: float) -> Iterator[AgentSpan]:
        """The spans that may hold a call starting at `start_s` (newest start first)."""
        hi = bisect.bisect_right(self._starts, int((start_s + skew_s) * 1e9))
        lo = bisect.bisect_left(self._starts, int((start_s - skew_s) * 1e9) - self._longest)
        return reversed(self._spans[lo:hi])


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
    call: WireCall | Exchange,
    candidates: Iterable[AgentSpan],
    *,
    skew_s: float = 0.25,
    taken: Container[str] = (),
    trace_id: str | None = None,
    start_skew_s: float | None = None,
) -> AgentSpan | None:
    """The agent span a call without trace context belongs to, by time, provider, model and tool; among
    equals, one of `trace_id` (the trace the same client connection's last call joined: concurrent agents'
    spans overlap), then one no call was joined to yet (`taken`: span ids; one call per span is the rule,
    retries the exception), then the tightest. `start_skew_s` (default: `skew_s`) bounds how late the span
    may start after the call; `skew_s` how early it may end before it."""
    if isinstance(call, Exchange):
        kind = call_kind(call.operation if call.mcp_method != "tools/call" else "tools/call")
        start = call.timings.start
        end = call.timings.end if call.timings.end is not None else start
        provider, model, tool = call.gen_ai_provider, call.model, call.tool_name
    else:
        kind, start, end = call.kind, call.start_s, call.end_s
        provider, model, tool = call.provider, call.model, call.tool_name
    best: tuple[int, bool, bool, int, AgentSpan] | None = None
    for span in candidates:
        if call_kind(span.operation) != kind:
            continue
        if span.start_s > start + (skew_s if start_skew_s is None else start_skew_s) or span.end_s < end - skew_s:
            continue
        if _related(span.provider, provider) is False:
            continue
        score = 0
        if kind == "llm" and _related(span.request_model or span.response_model, model):
            score += 2
        if kind == "tool" and _related(span.tool_name, tool):
            score += 2
        rank = (score, span.trace_id == trace_id, span.span_id not in taken, -(span.end_ns - span.start_ns))
        if best is None or rank > best[:4]:
            best = (*rank, span)
    return best[4] if best is not None else None
