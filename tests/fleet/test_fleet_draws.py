"""Probability-only rules in a fleet: a session gets the same faults whichever replica serves each request.

The draw is keyed by (seed, rule, session, the session's match number for the rule). Three replicas on
one redis-server take that number from the store, so a session whose requests are spread round-robin
over them gets exactly the fault sequence one brownout with the memory backend gives it. Replicas that
counted it themselves would each draw on their own third of the session (1, 2, 3, ... on each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.demo.upstream import MockUpstream
from tests.fleet.replicas import replica_set
from tests.fleet.test_fleet_schedules import fleet_config, latency
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SESSIONS = ("agent-a", "agent-b")
CALLS = 90  # the sessions take turns, so each visits every replica of three in turn


def rules() -> tuple[dict[str, Any], ...]:
    return (
        latency("p-global", "gpt-*", probability=0.3),  # scope global: still drawn per session
        {
            "name": "p-session",
            "match": {"provider": "openai", "model": "gpt-*"},
            "fault": {"type": "http_error", "status": 503},
            "schedule": {"probability": 0.4, "scope": "session"},
        },
        latency("every-4", "gpt-*", every=4),  # a counted rule in the same round trip
    )


def calls(fleet: Any) -> list[tuple[str, int, list[str]]]:
    """CALLS calls through the replicas in turn, the sessions taking turns: (session, status, faults)."""
    out = []
    for i in range(CALLS):
        session = SESSIONS[i % len(SESSIONS)]
        status, faults = fleet.chat(session=session)
        out.append((session, status, faults))
    return out


def test_a_session_spread_over_replicas_gets_the_faults_of_one_process(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    shared = fleet_config(redis_server, *rules())
    single = {k: v for k, v in shared.items() if k != "state"}  # the memory backend, one process
    with MockUpstream.run_in_thread() as upstream:
        with replica_set(single, upstream.url, tmp_path / "one", n=1) as one:
            expected = calls(one)
        with replica_set(shared, upstream.url, tmp_path / "fleet", n=3) as fleet:
            got = calls(fleet)
            statuses = [r.control("GET", "/status")["state"] for r in fleet.replicas]
    assert all(s["up"] is True and s["errors"] == 0 for s in statuses)  # every decision came from the store
    assert got == expected
    fired = [f for _, _, faults in expected for f in faults]
    # not a trivial sequence: both probability rules fire on some calls of each session and skip others
    for rule in ("p-global:latency", "p-session:http_error"):
        for session in SESSIONS:
            hits = [rule in faults for s, _, faults in expected if s == session]
            assert 0 < sum(hits) < len(hits), (rule, session)
    assert fired.count("every-4:latency") == CALLS // 4
