"""The span store's bounds: traces, spans (a trace that never ends included) and time, every eviction counted."""

from __future__ import annotations

from collections import Counter

import pytest

from brownout.core.agent_spans import AgentSpan
from brownout.core.span_join import WireCall
from brownout.core.span_store import SpanStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def span(trace: int, n: int, *, genai: bool = True, parent: int | None = None) -> AgentSpan:
    return AgentSpan(
        trace_id=f"{trace:032x}",
        span_id=f"{n + 1:016x}",
        parent_span_id=None if parent is None else f"{parent + 1:016x}",
        name=f"s{n}",
        start_ns=n,
        end_ns=n + 1,
        genai=genai,
        operation="chat" if genai else None,
    )


def store(**kw: object) -> tuple[SpanStore, Clock, Counter[str]]:
    clock, evicted = Clock(), Counter[str]()
    kw.setdefault("settle_s", 5.0)
    s = SpanStore(clock=clock, on_evicted=lambda reason, n: evicted.update({reason: n}), **kw)  # type: ignore[arg-type]
    return s, clock, evicted


def test_the_oldest_trace_goes_past_max_traces() -> None:
    s, _, evicted = store(max_traces=2)
    s.add_spans([span(1, 0), span(1, 1)])
    s.add_spans([span(2, 0)])
    s.add_spans([span(3, 0)])
    assert len(s) == 2 and s.spans_of(f"{1:032x}") == ({}, {})
    assert evicted == {"max_traces": 2} and s.held == 2


def test_a_trace_that_never_ends_holds_a_quarter_of_max_spans() -> None:
    s, _, evicted = store(max_spans=40)
    for n in range(1000):
        s.add_spans([span(7, n)])
    spans, parents = s.spans_of(f"{7:032x}")
    assert len(parents) == 10 and len(spans) == 10 and s.held == 10
    assert sorted(sp.name for sp in spans.values())[0] == "s990"  # the newest kept
    assert evicted == {"max_spans": 990}


def test_spans_of_every_trace_together_stay_under_max_spans() -> None:
    s, _, evicted = store(max_spans=40, max_traces=1000)
    for trace in range(100):
        s.add_spans([span(trace, n) for n in range(5)])
    assert s.held <= 40 and sum(evicted.values()) == 500 - s.held


def test_a_trace_settles_when_quiet_and_is_judged_then_forgotten() -> None:
    s, clock, evicted = store(settle_s=5.0, ttl_s=60.0)
    s.add_spans([span(1, 0), span(1, 1, genai=False, parent=0)])
    call = WireCall("x1", "sess", "llm", f"{1:032x}", f"{9:016x}", 1.0, 2.0)
    s.add_wire(call, f"{1:032x}")
    clock.now += 4.9
    assert s.take_settled() == []
    clock.now += 0.2
    (trace,) = s.take_settled()
    assert [sp.name for sp in trace.agent_spans] == ["s0"] and trace.wire_calls == [call]
    assert trace.parents == {f"{1:016x}": None, f"{2:016x}": f"{1:016x}"} and trace.instrumented
    assert len(s) == 0 and s.held == 0 and not evicted  # judged, not evicted


def test_a_busy_trace_is_judged_at_its_ttl_and_counted() -> None:
    s, clock, evicted = store(settle_s=5.0, ttl_s=30.0)
    judged = []
    for n in range(40):  # a span a second, and the join's tick
        s.add_spans([span(1, n)])
        clock.now += 1.0
        judged += s.take_settled()
    assert [len(t.agent_spans) for t in judged] == [30]  # its first 30 s, judged as one trace
    assert evicted == {"ttl": 30} and s.held == 10 and len(s) == 1


@pytest.mark.parametrize("field", ["max_traces", "max_spans", "ttl_s", "settle_s"])
def test_bad_bounds_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SpanStore(**{field: 0})  # type: ignore[arg-type]


def test_settling_waits_for_a_call_that_may_still_join_the_trace() -> None:
    s, clock, _ = store(settle_s=5.0)
    s.add_spans([span(1, 5_000_000_000)])
    clock.now += 10
    assert s.take_settled(waiting_since=4.0) == []  # a call from 4 s on still waits: it may be this trace's
    (joined,) = s.take_settled(waiting_since=6.0)
    assert joined.wire_near is not None and not joined.wire_near(joined.agent_spans[0])
    s.add_spans([span(3, 5_000_000_000)])
    s.add_wire(WireCall("x1", "s", "llm", f"{2:032x}", f"{9:016x}", 5.0, 5.0), f"{2:032x}")
    clock.now += 10
    by_id = {t.trace_id: t for t in s.take_settled()}
    three = by_id[f"{3:032x}"]
    assert three.wire_near is not None and three.wire_near(three.agent_spans[0])  # the other trace's call
