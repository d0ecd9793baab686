"""reconnect_discipline on hand-built sessions (end to end with the openai SDK's reconnection:
tests/proxy/test_realtime_invariants.py)."""

from __future__ import annotations

import pytest

from tests.invariants.builders import Harness, llm, realtime_generation, realtime_session

INV = [{"type": "reconnect_discipline", "min_backoff_ms": 500, "max_per_min": 3}]


def test_a_reconnect_without_backoff_after_a_close_is_flagged() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 10, close_code=1011, closed_by="server")) == []
    (v,) = h.run(realtime_session(10.05, 5))
    assert "reconnected 50 ms after the session closed with 1011" in v.message and "500 ms" in v.message
    assert v.details["gap_ms"] == pytest.approx(50, abs=1) and v.details["close_code"] == 1011


def test_a_reset_is_a_drop_and_backoff_passes() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 10, close_code=1006, closed_by="brownout")) == []
    assert h.run(realtime_session(11, 5)) == []  # a second later: backed off
    assert h.run(realtime_session(17, 1, close_code=1006, closed_by="brownout")) == []
    (v,) = h.run(realtime_session(18.1, 1))
    assert "after the session dropped" in v.message


def test_a_session_the_agent_closed_itself_is_no_reconnect() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 1, close_code=1000, closed_by="client")) == []
    assert h.run(realtime_session(1.001, 1)) == []  # a new conversation at once is fine


def test_more_reconnects_a_minute_than_allowed_is_a_storm_reported_once() -> None:
    h = Harness(INV)
    found = []
    t = 0.0
    for _ in range(7):  # each session closed by the server after 1 s, the agent back 1 s later
        found += h.run(realtime_session(t, 1, close_code=1011, closed_by="server"))
        t += 2
    storms = [v for v in found if "reconnects within a minute" in v.message]
    assert len(storms) == 1 and "4 reconnects within a minute, at most 3" in storms[0].message


def test_resumption_offered_must_be_used() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 10, close_code=1011, closed_by="server", offered=True)) == []
    (v,) = h.run(realtime_session(12, 5, used=False))
    assert "offered resumption" in v.message
    assert h.run(realtime_session(20, 5, close_code=1011, closed_by="server", offered=True)) == []
    assert h.run(realtime_session(22, 5, used=True)) == []
    assert (
        Harness([{**INV[0], "resumption": False}]).run_all(
            realtime_session(0, 1, close_code=1011, closed_by="server", offered=True), realtime_session(2, 1)
        )
        == []
    )


def test_refused_upgrades_are_left_to_retry_discipline_and_other_traffic_is_ignored() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 0.01, status=429)) == []
    assert h.run(realtime_session(0.02, 1)) == []  # after a refusal: an HTTP retry, not a reconnect
    assert h.run(llm(2)) == [] and h.run(realtime_generation(3)) == []


def test_sessions_of_different_agents_are_judged_apart() -> None:
    h = Harness(INV)
    assert h.run(realtime_session(0, 1, session="a", close_code=1011, closed_by="server")) == []
    assert h.run(realtime_session(1.01, 1, session="b")) == []
