"""Schedules: seeded draws, counters, blast radius, time windows, ramps, scopes, quotas."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from brownout.faults.config import ScheduleConfig
from brownout.faults.schedule import (
    FIRED,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    Schedule,
    draw,
    rng_for,
)

T0 = 1_000_000.0


def sched(seed: int = 7, **cfg: Any) -> Schedule:
    return Schedule(ScheduleConfig.model_validate(cfg), rule="r", seed=seed, origin=T0)


def fired(s: Schedule, n: int, session: str = "s", now: float = T0, release: bool = True) -> list[int]:
    """Match numbers (1-based) that fired among the next n matches."""
    out = []
    for i in range(1, n + 1):
        t = s.decide(session, now)
        if t.outcome == FIRED:
            out.append(i)
        if release:
            Schedule.release(t, now)
    return out


def test_draws_are_pure_functions_of_their_key() -> None:
    assert draw(1, "r", "s", 3) == draw(1, "r", "s", 3)
    assert len({draw(1, "r", "s", i) for i in range(100)}) == 100
    assert draw(1, "r", "s", 3) != draw(2, "r", "s", 3) != draw(1, "q", "s", 3)
    assert all(0.0 <= draw(5, "r", "s", i) < 1.0 for i in range(1000))
    assert rng_for(1, "r", "s", 3).random() == rng_for(1, "r", "s", 3).random()
    assert rng_for(1, "r", "s", 3).random() != rng_for(1, "r", "s", 4).random()


def test_probability_is_reproducible_and_roughly_right() -> None:
    a, b = fired(sched(probability=0.3), 4000), fired(sched(probability=0.3), 4000)
    assert a == b
    assert 0.27 < len(a) / 4000 < 0.33
    assert fired(sched(seed=8, probability=0.3), 4000) != a
    assert fired(sched(probability=0.0), 100) == []


def test_probability_skip_says_why() -> None:
    s = sched(probability=0.5)
    tickets = [s.decide("s", T0) for _ in range(20)]
    skipped = [t for t in tickets if t.outcome == SKIPPED_PROBABILITY]
    assert skipped and skipped[0].reason.startswith("draw ") and ">= p 0.5" in skipped[0].reason


def test_after_first_every() -> None:
    assert fired(sched(after=2), 5) == [3, 4, 5]
    assert fired(sched(first=2), 5) == [1, 2]
    assert fired(sched(every=3), 10) == [3, 6, 9]
    # first and every count from the end of `after`
    assert fired(sched(after=2, first=3), 10) == [3, 4, 5]
    assert fired(sched(after=1, every=2), 8) == [3, 5, 7]
    t = sched(after=1).decide("s", T0)
    assert (t.outcome, t.counter) == (SKIPPED_SCHEDULE, 1) and "after" in t.reason


def test_max_injections_caps_the_total() -> None:
    s = sched(max_injections=3)
    assert fired(s, 10) == [1, 2, 3]
    t = s.decide("s", T0)
    assert t.outcome == SKIPPED_BLAST_RADIUS and "max_injections 3" in t.reason


def test_max_concurrent_counts_in_flight_until_release() -> None:
    s = sched(max_concurrent=2)
    held = [s.decide("s", T0) for _ in range(4)]
    assert [t.outcome for t in held] == [FIRED, FIRED, SKIPPED_BLAST_RADIUS, SKIPPED_BLAST_RADIUS]
    assert s.total.in_flight == 2
    Schedule.release(held[0], T0)
    Schedule.release(held[0], T0)  # a second release is a no-op
    assert s.total.in_flight == 1
    assert s.decide("s", T0).outcome == FIRED


def test_relative_window() -> None:
    s = sched(start_s=10, duration_s=5)
    assert [s.is_active(T0 + dt) for dt in (0, 9.9, 10, 14.9, 15, 100)] == [False, False, True, True, False, False]
    t = s.decide("s", T0 + 1)
    assert t.outcome == SKIPPED_SCHEDULE and t.reason == "outside the time window"
    assert s.decide("s", T0 + 12).outcome == FIRED


def test_absolute_window_ignores_proxy_start() -> None:
    at = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    a = Schedule(ScheduleConfig(starts_at=at, duration_s=60), rule="r", seed=1, origin=T0)
    b = Schedule(ScheduleConfig(starts_at=at, duration_s=60), rule="r", seed=1, origin=T0 + 12345)
    ts = at.timestamp()
    for now in (ts - 1, ts, ts + 59, ts + 60):
        assert a.is_active(now) == b.is_active(now) == (ts <= now < ts + 60)


def test_periodic_outage() -> None:
    s = sched(start_s=100, period_s=60, active_s=10)
    active = [dt for dt in range(0, 400, 5) if s.is_active(T0 + dt)]
    assert active == [100, 105, 160, 165, 220, 225, 280, 285, 340, 345]
    d = sched(period_s=60, active_s=10, duration_s=90)  # a window bounds the cycles
    assert d.is_active(T0 + 65) and not d.is_active(T0 + 125)


def test_ramp_raises_probability_from_zero() -> None:
    s = sched(ramp_s=100, start_s=50)
    start = s.window_start(T0 + 50)
    assert start == T0 + 50
    assert [s.probability(T0 + 50 + dt, T0 + 50) for dt in (0, 25, 100, 500)] == [0.0, 0.25, 1.0, 1.0]
    early = sum(s.decide("s", T0 + 55).outcome == FIRED for _ in range(400))
    late = sum(s.decide("s", T0 + 140).outcome == FIRED for _ in range(400))
    assert early < 60 and late > 300


def test_ramp_restarts_each_period() -> None:
    s = sched(period_s=100, active_s=50, ramp_s=50)
    start = s.window_start(T0 + 210)
    assert start == T0 + 200 and s.probability(T0 + 210, start) == pytest.approx(0.2)


def test_scope_session_keeps_counters_per_session() -> None:
    g = sched(first=2)
    assert fired(g, 2, "a") == [1, 2] and fired(g, 2, "b") == []
    s = sched(first=2, scope="session")
    assert fired(s, 3, "a") == [1, 2] and fired(s, 3, "b") == [1, 2]
    assert s.total.matches == 6 and s.total.injections == 4
    m = sched(max_injections=1, scope="session")
    assert fired(m, 3, "a") == [1] and fired(m, 3, "b") == [1]


def test_draws_follow_the_session_order_even_with_global_scope() -> None:
    a, b = sched(probability=0.5), sched(probability=0.5)
    seq_a = {"x": [], "y": []}  # type: dict[str, list[str]]
    seq_b = {"x": [], "y": []}  # type: dict[str, list[str]]
    for _i in range(50):
        seq_a["x"].append(a.decide("x", T0).outcome)
        seq_a["y"].append(a.decide("y", T0).outcome)
    for _i in range(50):
        seq_b["y"].append(b.decide("y", T0).outcome)
    for _i in range(50):
        seq_b["x"].append(b.decide("x", T0).outcome)
    assert seq_a == seq_b


def test_session_state_is_bounded() -> None:
    s = Schedule(ScheduleConfig(), rule="r", seed=1, origin=T0, session_ttl_s=60, max_sessions=3)
    for i in range(10):
        s.decide(f"s{i}", T0)
    assert list(s.sessions) == ["s7", "s8", "s9"]
    s.decide("late", T0 + 61)  # everyone else idled out
    assert list(s.sessions) == ["late"]


def test_idle_sessions_with_faults_in_flight_are_kept() -> None:
    # (with scope: session, a session's in-flight slots are its max_concurrent state)
    s = Schedule(ScheduleConfig(scope="session"), rule="r", seed=1, origin=T0, session_ttl_s=60)
    held = s.decide("busy", T0)
    s.decide("other", T0 + 100)
    assert "busy" in s.sessions
    Schedule.release(held, T0 + 100)


def test_adopt_keeps_counters_unless_their_shape_changed() -> None:
    old = sched(after=1)
    fired(old, 3)
    new = sched(after=1, probability=0.9)
    new.adopt(old)
    assert new.total.matches == 3
    other = sched(scope="session")
    other.adopt(old)
    assert other.total.matches == 0


def test_quota_answers_after_the_request_limit_until_the_minute_ends() -> None:
    s = sched(quota={"requests_per_min": 3})
    outcomes = [s.decide("s", T0 + i) for i in range(5)]
    assert [t.outcome for t in outcomes] == [SKIPPED_SCHEDULE] * 3 + [FIRED, FIRED]
    assert outcomes[3].retry_after_s == 57 and outcomes[4].retry_after_s == 56
    assert outcomes[0].reason == "quota: 1 requests this minute"
    t = s.decide("s", T0 + 60)  # a new minute
    assert t.outcome == SKIPPED_SCHEDULE


def test_token_quota_counts_tokens_at_release() -> None:
    s = sched(quota={"tokens_per_min": 1000})
    t = s.decide("s", T0)
    assert t.outcome == SKIPPED_SCHEDULE and t.quota is not None
    Schedule.release(t, T0 + 1, tokens=1200)
    over = s.decide("s", T0 + 2)
    assert over.outcome == FIRED and over.retry_after_s == 58


def test_quota_per_session_scope() -> None:
    s = sched(quota={"requests_per_min": 1}, scope="session")
    assert s.decide("a", T0).outcome == SKIPPED_SCHEDULE
    assert s.decide("b", T0).outcome == SKIPPED_SCHEDULE
    assert s.decide("a", T0).outcome == FIRED


def test_status() -> None:
    s = sched(quota={"requests_per_min": 1})
    s.decide("a", T0)
    st = s.status(T0)
    assert st["active"] and st["matches"] == 1 and st["sessions"] == 1
    assert st["quota"] == {"window_start": T0, "requests": 1, "tokens": 0}
