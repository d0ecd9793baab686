"""Three real `brownout run` replicas with one config on one redis-server: the schedule counts once, fleet-wide.

The counts are chosen to tell a shared schedule from per-process ones: over 297 calls spread 99 per
replica, `every: 5` fires 59 times fleet-wide where three separate counters would give 3 x 19 = 57, and
`max_injections: 10` gives 10 where they would give 30; a quota of 12 requests a minute lets 12 of 30
calls through where three would let all 30 through.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.demo.upstream import MockUpstream
from tests.fleet.replicas import replica_set
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def fleet_config(server: RedisServer, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 1,
        "seed": 11,
        "proxy": {"announce_faults": True},
        # Generous budgets: on a test machine shared by many processes a 50 ms round trip (or a reconnect after
        # a Redis restart) can be late, and a late call is (rightly) a skipped decision, which would blur the
        # exact counts checked here.
        "state": {"backend": "redis", "url": server.url, "timeout_ms": 2000, "connect_timeout_ms": 5000},
        "rules": list(rules),
    }


def latency(name: str, model: str, **schedule: Any) -> dict[str, Any]:
    return {
        "name": name,
        "match": {"provider": "openai", "model": model},
        "fault": {"type": "latency", "delay_ms": 1},
        "schedule": schedule,
    }


def test_counters_are_shared_by_the_fleet(redis_server: RedisServer, tmp_path: Path) -> None:
    config = fleet_config(
        redis_server,
        latency("every-5", "gpt-4o-mini", every=5),
        latency("cap-10", "gpt-4o-mini", max_injections=10),
        {
            "name": "rpm-12",
            "match": {"provider": "openai", "model": "gpt-quota"},
            "schedule": {"quota": {"requests_per_min": 12}},
        },
    )
    with MockUpstream.run_in_thread() as upstream, replica_set(config, upstream.url, tmp_path) as fleet:
        calls = fleet.spread(297)
        assert {status for status, _ in calls} == {200}
        fired = Counter(f for _, faults in calls for f in faults)
        assert fired == {"every-5:latency": 59, "cap-10:latency": 10}
        # the 5th, 10th, ... call fleet-wide, whichever replica served it
        assert [i + 1 for i, (_, faults) in enumerate(calls) if "every-5:latency" in faults][:4] == [5, 10, 15, 20]

        more = fleet.spread(3)
        assert Counter(f for _, faults in more for f in faults)["cap-10:latency"] == 0  # 300 calls, still 10

        quota = fleet.spread(30, model="gpt-quota")
        assert [status for status, _ in quota] == [200] * 12 + [429] * 18
        assert all(faults == ["rpm-12:quota"] for status, faults in quota if status == 429)

        status = fleet.replicas[2].control("GET", "/status")["state"]
        assert status["up"] is True and len(status["replicas"]) == 3 and status["config_mismatch"] == []
        assert status["rules"]["cap-10"] == {"matches": 300, "injections": 10, "leases": 0}
        # each replica's own share of it, in its rules[]
        shares = [
            next(r for r in replica.control("GET", "/status")["rules"] if r["name"] == "cap-10")
            for replica in fleet.replicas
        ]
        assert [s["matches"] for s in shares] == [100, 100, 100] and sum(s["injections"] for s in shares) == 10
