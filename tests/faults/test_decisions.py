"""The decision log: bounded ring, sinks that may fail (contained by the guard)."""

from __future__ import annotations

import logging

import pytest

from brownout.core.guard import Guard
from brownout.faults.decisions import Decision, DecisionLog


def decision(i: int, outcome: str = "fired") -> Decision:
    return Decision(f"ex-{i}", "s", "r", outcome, "why", i, 100.0 + i, "latency")


def test_ring_keeps_the_last_decisions() -> None:
    log = DecisionLog(ring_size=3)
    for i in range(5):
        log.record(decision(i))
    assert [d.exchange_id for d in log.recent()] == ["ex-2", "ex-3", "ex-4"]
    assert len(log) == 3 and log.counts["fired"] == 5
    log.clear()
    assert log.recent() == []


def test_ring_can_be_off() -> None:
    log = DecisionLog(ring_size=None)
    log.record(decision(1))
    assert log.recent() == [] and log.counts["fired"] == 1
    with pytest.raises(ValueError, match="ring_size"):
        DecisionLog(ring_size=-1)


def test_sinks_get_every_decision_and_a_failing_one_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Decision] = []

    def broken(d: Decision) -> None:
        raise RuntimeError("disk full")

    guard = Guard()
    log = DecisionLog(guard=guard)
    log.add_sink(broken)
    log.add_sink(seen.append)
    with caplog.at_level(logging.DEBUG, logger="brownout.core.guard"):
        for i in range(3):
            log.record(decision(i))
    assert [d.counter for d in seen] == [0, 1, 2]  # the sink after the broken one still runs
    assert guard.snapshot() == {"decisions": 3}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "broken" in errors[0].getMessage()  # logged once, naming the sink
    log.remove_sink(broken)
    log.record(decision(9))
    assert guard.snapshot() == {"decisions": 3}


def test_a_strict_guard_raises_the_sink_error() -> None:
    def broken(d: Decision) -> None:
        raise RuntimeError("disk full")

    log = DecisionLog(guard=Guard(strict=True))
    log.add_sink(broken)
    with pytest.raises(RuntimeError, match="disk full"):
        log.record(decision(1))


def test_decision_record() -> None:
    d = decision(4)
    assert d.fired and not decision(4, "skipped_schedule").fired
    assert set(d.to_dict()) == {
        "exchange_id",
        "session",
        "rule",
        "outcome",
        "reason",
        "counter",
        "at",
        "fault",
        "index",
    }
