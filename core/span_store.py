"""The agent's spans and the wire's calls, per trace, bounded in memory and in time.

Each trace holds its GenAI spans (whole), the place in the tree of its other spans (a parent id each),
and the wire calls joined to it. Bounds, each eviction counted by reason through `on_evicted`:

- `max_traces`: the oldest trace goes when one more would exceed it ("max_traces");
- `max_spans`: spans held in all traces together; the oldest traces go until under it ("max_spans"),
  and one trace never holds more than a quarter of it (its oldest spans go: a trace that never ends);
- `ttl_s`: a trace is judged and dropped this long after it was first seen, however busy ("ttl").

A trace *settles* when nothing new arrived for `settle_s`: `take_settled` hands it over (a
`JoinedTrace`) for the invariants that need both sides, and forgets it. Spans that arrive later start
the trace afresh.
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator

from brownout.core.agent_spans import AgentSpan
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import WireCall
from brownout.core.span_match import TimeIndex

__all__ = ["SpanStore"]

_RECENT_MAX = 4096  # GenAI spans searched by time for calls without trace context
_WIRE_MAX_PER_TRACE = 1024


class _WireTimes:
    """When recent LLM calls crossed the wire, in any trace: an agent LLM span that a call *could* belong to
    was not gone around brownout, even when the join gave that call to another agent's span at once."""

    def __init__(self, max_calls: int = _RECENT_MAX * 4) -> None:
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._max = max_calls

    def add(self, call: WireCall) -> None:
        i = bisect.bisect_right(self._starts, call.start_s)
        self._starts.insert(i, call.start_s)
        self._ends.insert(i, call.end_s)
        if len(self._starts) > self._max:
            del self._starts[0], self._ends[0]

    def near(self, span: AgentSpan, skew_s: float = 0.25) -> bool:
        lo = bisect.bisect_left(self._starts, span.start_s - skew_s)
        hi = bisect.bisect_right(self._starts, span.end_s + skew_s)
        return any(end <= span.end_s + skew_s for end in self._ends[lo:hi])


class _Trace:
    __slots__ = ("created", "last_end_ns", "parents", "spans", "trace_id", "updated", "wire")

    def __init__(self, trace_id: str, now: float) -> None:
        self.trace_id = trace_id
        self.created = self.updated = now
        self.spans: OrderedDict[str, AgentSpan] = OrderedDict()  # GenAI spans
        self.parents: OrderedDict[str, str | None] = OrderedDict()  # every span id -> parent id
        self.wire: deque[WireCall] = deque(maxlen=_WIRE_MAX_PER_TRACE)
        self.last_end_ns = 0  # the latest end of its GenAI spans: a call waiting from before then may be its

    @property
    def size(self) -> int:
        return len(self.parents) + len(self.wire)


class SpanStore:
    """Agent spans and wire calls by trace; see the module docstring for its bounds."""

    def __init__(
        self,
        *,
        max_traces: int = 10_000,
        max_spans: int = 100_000,
        ttl_s: float = 600.0,
        settle_s: float = 10.0,
        skew_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        on_evicted: Callable[[str, int], None] | None = None,
    ) -> None:
        for name, value in (("max_traces", max_traces), ("max_spans", max_spans)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        for name, seconds in (("ttl_s", ttl_s), ("settle_s", settle_s)):
            if seconds <= 0:
                raise ValueError(f"{name} must be > 0, got {seconds}")
        self.max_traces, self.max_spans, self.ttl_s, self.settle_s = max_traces, max_spans, ttl_s, settle_s
        self.skew_s = skew_s  # the agent's clock against brownout's, for matching calls by time
        self._per_trace = max(1, max_spans // 4)
        self._clock = clock
        self._on_evicted = on_evicted
        self._traces: OrderedDict[str, _Trace] = OrderedDict()  # oldest first (creation order)
        self._recent = TimeIndex(max_spans=_RECENT_MAX)
        self._wire_times = _WireTimes()
        self.held = 0  # spans and wire calls held, all traces
        self.last_genai: float | None = None  # when the last GenAI span arrived (clock time)

    def __len__(self) -> int:
        return len(self._traces)

    # -- what arrives ----------------------------------------------------------------------

    def add_spans(self, spans: Iterable[AgentSpan]) -> int:
        """Keep a batch of the agent's spans; returns how many were GenAI spans."""
        now = self._clock()
        genai = 0
        for span in spans:
            trace = self._trace(span.trace_id, now)
            if span.span_id not in trace.parents:
                self.held += 1
            trace.parents[span.span_id] = span.parent_span_id
            if span.genai:
                genai += 1
                trace.spans[span.span_id] = span
                trace.last_end_ns = max(trace.last_end_ns, span.end_ns)
                self._recent.add(span)
            self._trim(trace)
        if genai:
            self.last_genai = now
        self._bound()
        return genai

    def add_wire(self, call: WireCall, trace_id: str) -> None:
        """Keep a wire call under `trace_id` (its agent span's trace, else its own)."""
        trace = self._trace(trace_id, self._clock())
        if len(trace.wire) == trace.wire.maxlen:
            self._evicted("max_spans", 1)
            self.held -= 1
        trace.wire.append(call)
        if call.kind == "llm":
            self._wire_times.add(call)
        self.held += 1
        self._trim(trace)
        self._bound()

    def _trace(self, trace_id: str, now: float) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace(trace_id, now)
        trace.updated = now
        return trace

    # -- lookups for the join ----------------------------------------------------------------

    def spans_of(self, trace_id: str) -> tuple[dict[str, AgentSpan], dict[str, str | None]]:
        """A trace's GenAI spans by id and its parent links (empty when unknown)."""
        trace = self._traces.get(trace_id)
        return ({}, {}) if trace is None else (trace.spans, trace.parents)

    def around(self, start_s: float, skew_s: float) -> Iterator[AgentSpan]:
        """Recently arrived LLM and tool spans that may hold a call starting at `start_s` (calls without
        trace context are matched against these)."""
        return self._recent.around(start_s, skew_s)

    def instrumented(self, now: float | None = None) -> bool:
        """A GenAI span arrived within ttl_s: the agent is instrumented and sends its spans here."""
        now = self._clock() if now is None else now
        return self.last_genai is not None and now - self.last_genai < self.ttl_s

    # -- settling and bounds ----------------------------------------------------------------

    def take_settled(self, *, force: bool = False, waiting_since: float | None = None) -> list[JoinedTrace]:
        """Traces quiet for settle_s, or older than ttl_s (all of them with `force`), handed over and forgotten.

        `waiting_since`: the start (epoch seconds) of the oldest call still waiting for its agent span; a
        trace whose spans end after it may yet get that call, and is not settled until it is placed."""
        now = self._clock()
        instrumented = self.instrumented(now)
        hold_ns = None if waiting_since is None else int(waiting_since * 1e9)
        done = [
            t
            for t in self._traces.values()
            if force
            or now - t.created >= self.ttl_s
            or (now - t.updated >= self.settle_s and (hold_ns is None or t.last_end_ns < hold_ns))
        ]
        out: list[JoinedTrace] = []
        for trace in done:
            del self._traces[trace.trace_id]
            self.held -= trace.size
            if now - trace.updated < self.settle_s and not force:
                self._evicted("ttl", trace.size)
            out.append(
                JoinedTrace(
                    trace_id=trace.trace_id,
                    agent_spans=list(trace.spans.values()),
                    wire_calls=list(trace.wire),
                    parents=dict(trace.parents),
                    instrumented=instrumented,
                    wire_near=self._wire_times.near,
                    skew_s=self.skew_s,
                )
            )
        return out

    def _trim(self, trace: _Trace) -> None:
        """One trace holds at most a quarter of max_spans: its oldest spans go first."""
        over = trace.size - self._per_trace
        if over <= 0:
            return
        dropped = 0
        while over > 0 and trace.parents:
            span_id, _ = trace.parents.popitem(last=False)
            trace.spans.pop(span_id, None)
            over -= 1
            dropped += 1
        while over > 0 and trace.wire:
            trace.wire.popleft()
            over -= 1
            dropped += 1
        self.held -= dropped
        self._evicted("max_spans", dropped)

    def _bound(self) -> None:
        while len(self._traces) > self.max_traces:
            self._drop_oldest("max_traces")
        while self.held > self.max_spans and self._traces:
            self._drop_oldest("max_spans")

    def _drop_oldest(self, reason: str) -> None:
        _, trace = self._traces.popitem(last=False)
        self.held -= trace.size
        self._evicted(reason, trace.size)

    def _evicted(self, reason: str, n: int) -> None:
        if n and self._on_evicted is not None:
            self._on_evicted(reason, n)
