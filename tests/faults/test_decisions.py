"""The decision log: bounded ring, sinks that may fail, JSONL written line by line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

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

    log = DecisionLog()
    log.add_sink(broken)
    log.add_sink(seen.append)
    with caplog.at_level(logging.DEBUG, logger="brownout.faults.decisions"):
        for i in range(3):
            log.record(decision(i))
    assert [d.counter for d in seen] == [0, 1, 2]  # the sink after the broken one still runs
    [(name, count)] = log.sink_errors.items()
    assert "broken" in name and count == 3
    assert sum(r.levelno == logging.ERROR for r in caplog.records) == 1  # logged once
    log.remove_sink(broken)
    log.record(decision(9))
    assert sum(log.sink_errors.values()) == 3


def test_jsonl_file_is_flushed_per_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "decisions.jsonl"
    log = DecisionLog(path=path)
    log.record(decision(1))
    log.record(decision(2, "skipped_probability"))
    lines = path.read_text().splitlines()  # readable before close
    assert [json.loads(line)["outcome"] for line in lines] == ["fired", "skipped_probability"]
    assert json.loads(lines[0]) == decision(1).to_dict()
    log.close()
    log.close()
    log.record(decision(3))  # after close: kept in memory, not written
    assert len(path.read_text().splitlines()) == 2


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
