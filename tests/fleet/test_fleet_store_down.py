"""Redis killed under a running fleet: traffic never fails, failures are counted, the fleet reconnects by itself."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from brownout.proxy.demo.upstream import MockUpstream
from tests.fleet.replicas import Replica, replica_set
from tests.fleet.test_fleet_schedules import fleet_config, latency
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def sample(replica: Replica, name: str) -> float | None:
    """The value of one series in the replica's /metrics (summed over its labels), None when absent."""
    values = [float(m[1]) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", replica.metrics(), re.M)]
    return sum(values) if values else None


def skipped(replica: Replica, rule: str) -> float:
    """The rule's decisions this replica skipped because the store did not answer."""
    line = f'brownout_fault_decisions_total{{outcome="skipped_state_unavailable",rule="{rule}"}} '
    return sum(float(x.split()[-1]) for x in replica.metrics().splitlines() if x.startswith(line))


def test_redis_killed_mid_run(redis_server: RedisServer, tmp_path: Path) -> None:
    config = fleet_config(redis_server, latency("every-2", "gpt-*", every=2), latency("free", "gpt-*"))
    with MockUpstream.run_in_thread() as upstream, replica_set(config, upstream.url, tmp_path) as fleet:
        before = fleet.spread(30)
        assert Counter(f for _, faults in before for f in faults) == {"every-2:latency": 15, "free:latency": 30}
        assert all(sample(r, "brownout_state_store_up") == 1 for r in fleet.replicas)

        redis_server.stop()
        down = fleet.spread(30)
        # No request fails because of it; probability-only rules keep injecting, counted ones skip.
        assert {status for status, _ in down} == {200}
        assert Counter(f for _, faults in down for f in faults) == {"free:latency": 30}
        time.sleep(0.5)  # a scrape after the polls have noticed too
        for r in fleet.replicas:
            assert sample(r, "brownout_state_store_up") == 0
            assert (sample(r, "brownout_state_errors_total") or 0) >= 10
            assert 'brownout_fault_decisions_total{outcome="skipped_state_unavailable",rule="every-2"}' in r.metrics()
        paused_view = fleet.replicas[0].control("GET", "/status")["state"]
        assert paused_view["up"] is False and paused_view["rules"] is None

        redis_server.start()  # the same port, empty: counting starts over from what the store holds now
        deadline = time.monotonic() + 10
        while not all(sample(r, "brownout_state_store_up") == 1 for r in fleet.replicas):
            assert time.monotonic() < deadline, "the fleet did not reconnect"
            time.sleep(0.2)
        skipped_before = sum(skipped(r, "every-2") for r in fleet.replicas)
        after = fleet.spread(30)
        # A replica's pooled connections reconnect on their first use: on a loaded machine one such call can
        # outlast its budget, and its decision is then (as documented) skipped and not counted. The shared
        # counter must account for every other match exactly.
        late = sum(skipped(r, "every-2") for r in fleet.replicas) - skipped_before
        assert late <= 2
        counted = Counter(f for _, faults in after for f in faults)
        assert counted == {"every-2:latency": (30 - late) // 2, "free:latency": 30}
        assert all(r.control("GET", "/status")["state"]["origin"] is not None for r in fleet.replicas)
    # Each replica says it when it stops: the decisions it skipped, the calls that failed.
    summaries = [json.loads(r.summary.read_text())["state"] for r in fleet.replicas]
    # Every match of every-2 while Redis was down, and any late call after it came back.
    assert sum(s["skipped_decisions"] for s in summaries) == 30 + late
    assert all(s["failed_calls"] >= 10 for s in summaries)
