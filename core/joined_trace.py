"""One trace's both sides: the agent's GenAI spans and the wire calls joined to them, as the invariants that
need both read them once the trace has settled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from brownout.core.agent_spans import AgentSpan
from brownout.core.span_join import BY_CONTEXT, BY_TIME, WireCall
from brownout.core.span_match import TimeIndex, join_by_context, join_by_time

__all__ = ["JoinedTrace"]

_END_SLACK_S = 0.01


@dataclass(slots=True)
class JoinedTrace:
    """One trace's both sides, handed to the invariants that need both once the trace has settled."""

    trace_id: str
    agent_spans: list[AgentSpan] = field(default_factory=list)  # its GenAI spans
    wire_calls: list[WireCall] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)  # span id -> parent span id, every span seen
    instrumented: bool = False  # the agent sent GenAI spans to brownout lately (any trace)
    # Whether an LLM call crossed the wire, in any trace, at a time this span could hold it (the join may
    # have given it to a concurrent agent's span); None: not known, no.
    wire_near: Callable[[AgentSpan], bool] | None = field(default=None, repr=False, compare=False)
    skew_s: float = 0.0  # how far the agent's clock may be off brownout's (agent_spans.skew_ms)
    _by_id: dict[str, AgentSpan] | None = field(default=None, init=False, repr=False, compare=False)
    _index: TimeIndex | None = field(default=None, init=False, repr=False, compare=False)
    _pairs: list[tuple[WireCall, AgentSpan | None]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def by_id(self) -> dict[str, AgentSpan]:
        if self._by_id is None:
            self._by_id = {s.span_id: s for s in self.agent_spans}
        return self._by_id

    def span(self, span_id: str | None) -> AgentSpan | None:
        return self.by_id.get(span_id) if span_id else None

    def agent_span_of(self, call: WireCall, *, skew_s: float | None = None) -> AgentSpan | None:
        """The GenAI span of the agent `call` belongs to: the one its trace context leads to, the one it
        was joined to by time, or (context leading to no GenAI span of its kind) the one time finds here."""
        if call.joined_by == BY_TIME:
            return self.span(call.agent_span_id)
        if call.joined_by == BY_CONTEXT and call.agent_span_id is not None:
            found = join_by_context(call.agent_span_id, self.by_id, self.parents, call.kind)
            if found is not None:
                return found
        if self._index is None:
            self._index = TimeIndex(self.agent_spans)
        skew = self.skew_s if skew_s is None else skew_s
        # The agent opens its span before the call starts; the proxy may mark the call's end a moment late.
        candidates = self._index.around(call.start_s, skew)
        return join_by_time(call, candidates, skew_s=skew + _END_SLACK_S, start_skew_s=skew)

    def pairs(self) -> list[tuple[WireCall, AgentSpan | None]]:
        """Every wire call with the agent span it belongs to (None: none found); worked out once."""
        if self._pairs is None:
            self._pairs = [(c, self.agent_span_of(c)) for c in self.wire_calls]
        return self._pairs

    def ancestors(self, span_id: str | None) -> Iterator[str]:
        """`span_id` and the ids above it, nearest first."""
        seen = 0
        while span_id is not None and seen < 256:  # a cycle in bad data must not hang the loop
            yield span_id
            span_id = self.parents.get(span_id)
            seen += 1

    def within(self, ancestor: AgentSpan) -> Callable[[str | None], bool]:
        """A test: is this span id `ancestor` or below it?"""
        return lambda span_id: ancestor.span_id in self.ancestors(span_id)
