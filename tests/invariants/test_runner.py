from __future__ import annotations

import logging

import pytest

from brownout.core.guard import Guard
from brownout.invariants.base import Invariant
from brownout.invariants.config import parse_invariants
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner
from tests.invariants.builders import T0, Clock, Harness, llm


def test_an_invariant_that_raises_is_logged_once_counted_and_skipped(monkeypatch, caplog) -> None:
    h = Harness([{"type": "token_budget", "max_tokens": 1}, {"type": "no_loop"}], guard=Guard())
    broken = h.runner.invariants[1]

    def boom(*args: object, **kwargs: object) -> list[Violation]:
        raise KeyError("bug")

    monkeypatch.setattr(broken, "check_span", boom)
    with caplog.at_level(logging.ERROR, logger="brownout.core.guard"):
        found = h.run(llm(0))
        h.run(llm(1, session="s2"))
    assert [v.invariant for v in found] == ["token_budget"]
    assert h.runner.guard.snapshot() == {"invariant:no_loop": 2}
    assert len([r for r in caplog.records if "no_loop" in r.getMessage()]) == 1
    assert len(h.exporter.get_finished_spans()) == 2


def test_a_non_list_result_counts_as_an_error(monkeypatch) -> None:
    h = Harness([{"type": "no_loop"}], guard=Guard())
    monkeypatch.setattr(h.runner.invariants[0], "check_span", lambda *a: None)
    assert h.run(llm(0)) == [] and h.runner.guard.snapshot() == {"invariant:no_loop": 1}


def test_a_strict_guard_raises_an_invariants_error(monkeypatch) -> None:
    h = Harness([{"type": "no_loop"}])  # strict, as every test harness is unless told otherwise
    monkeypatch.setattr(h.runner.invariants[0], "check_span", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        h.run(llm(0))


def test_violation_record_and_span_event() -> None:
    h = Harness([{"type": "token_budget", "max_tokens": 1}])
    (v,) = h.run(llm(0, faults=[]))
    (span,) = h.exporter.get_finished_spans()
    assert v.trace_id == f"{span.context.trace_id:032x}" and v.span_id == f"{span.context.span_id:016x}"
    assert (v.provider, v.model, v.rule, v.fault) == ("openai", "gpt-4o", None, None)
    assert span.events[-1].name == "brownout.violation"
    assert span.events[-1].attributes["brownout.violation.invariant"] == "token_budget"
    assert set(v.to_dict()) >= {
        "invariant",
        "severity",
        "message",
        "session_id",
        "trace_id",
        "span_id",
        "exchange_id",
        "provider",
        "model",
        "tool",
        "rule",
        "fault",
        "timestamp",
    }
    assert h.emitted == [v]


class _AtEnd(Invariant):
    """Reports at session end, to check sweep() runs final checks."""

    type = "token_budget"

    def check_session(self, session, *, final):
        return [self.violation(f"closed after {session.calls} calls", session)] if final else []


def test_sweep_runs_session_end_checks_then_drops_state() -> None:
    clock = Clock()
    runner = InvariantRunner(parse_invariants([{"type": "token_budget", "max_tokens": 10**9}]), clock=clock, idle_s=60)
    runner.invariants = (_AtEnd(runner.invariants[0].config),)
    h = Harness([], clock=clock)
    h.runner = runner
    h.run(llm(0, session="a"))
    clock.now = T0 + 30
    h.run(llm(30, session="b"))
    assert runner.sweep(now=T0 + 62) and runner.sessions_active == 1  # only "a" idled
    assert runner.sweep(now=T0 + 63) == []
    (v,) = runner.sweep(now=T0 + 200)
    assert v.session_id == "b" and v.message == "closed after 1 calls" and runner.sessions_active == 0


def test_ten_thousand_sessions_stay_bounded() -> None:
    clock = Clock()
    h = Harness(
        [
            {"type": "no_loop"},
            {"type": "retry_discipline"},
            {"type": "token_budget", "max_tokens": 10**6},
            {"type": "stream_complete"},
            {"type": "injection_followed"},
        ],
        clock=clock,
        max_sessions=1000,
        idle_s=60,
    )
    for i in range(10_000):
        h.run(llm(i * 0.01, session=f"s{i}", calls=[("t", "{}")]))
        assert h.runner.sessions_active <= 1000
    assert h.runner.guard.snapshot() == {}
    h.runner.sweep(now=clock.now + 61)
    assert h.runner.sessions_active == 0
    assert len(h.runner.sweep(now=clock.now + 62)) == 0


def test_reload_keeps_the_old_set_on_error() -> None:
    h = Harness([{"type": "no_loop"}])
    with pytest.raises(ValueError):
        h.runner.reload(parse_invariants([{"type": "custom", "callable": "no.such.module:f"}]))
    assert [i.name for i in h.runner.invariants] == ["no_loop"]
    h.runner.reload(parse_invariants([{"type": "token_budget", "max_tokens": 1, "enabled": False}]))
    assert h.runner.invariants == ()
    assert h.run(llm(0)) == []


def test_on_violation_errors_are_contained() -> None:
    def bad(v: Violation) -> None:
        raise RuntimeError("exporter down")

    runner = InvariantRunner(parse_invariants([{"type": "token_budget", "max_tokens": 1}]), on_violation=bad)
    h = Harness([])
    h.runner = runner
    assert len(h.run(llm(0))) == 1
    assert runner.guard.snapshot() == {"on_violation": 1}


def test_reload_drops_state_of_changed_invariants_only() -> None:
    h = Harness([{"type": "no_loop"}, {"type": "stream_complete"}])
    h.run(llm(0, calls=[("t", "{}")]))
    session = h.runner.sessions.get("s1")
    assert set(session.state) == {"no_loop", "stream_complete"}
    h.runner.reload(parse_invariants([{"type": "no_loop", "window": 5}, {"type": "stream_complete"}]))
    assert set(session.state) == {"stream_complete"}
    assert h.run(llm(1, calls=[("t", "{}")])) == []


def test_the_guards_listeners_hear_contained_failures(monkeypatch) -> None:
    seen: list[str] = []
    guard = Guard()
    guard.listeners.append(seen.append)  # how the Prometheus counter hears them
    h = Harness([{"type": "no_loop"}], guard=guard)
    monkeypatch.setattr(h.runner.invariants[0], "check_span", lambda *a: 1 / 0)
    h.run(llm(0))
    assert seen == ["invariant:no_loop"] and guard.snapshot() == {"invariant:no_loop": 1}


def test_without_invariants_sessions_are_still_tracked() -> None:
    h = Harness([])
    assert h.run(llm(0)) == [] and h.runner.sessions_active == 1
