"""The kill switch and rule toggles of a fleet: `brownout ctl` on one replica, every replica within 1 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brownout.proxy.demo.upstream import MockUpstream
from tests.fleet.replicas import ReplicaSet, replica_set
from tests.fleet.test_fleet_schedules import fleet_config, latency
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def faults_per_replica(fleet: ReplicaSet, rounds: int = 3) -> list[set[str]]:
    """The faults each replica announced over `rounds` calls to each."""
    seen: list[set[str]] = [set() for _ in fleet.replicas]
    for _ in range(rounds):
        for i in range(len(fleet.replicas)):
            seen[i].update(fleet.chat(i)[1])
    return seen


def test_pause_on_one_replica_stops_the_fleet_and_resume_restarts_it(redis_server: RedisServer, tmp_path: Path) -> None:
    config = fleet_config(redis_server, latency("always", "gpt-*"), latency("counted", "gpt-*", max_injections=1000))
    with MockUpstream.run_in_thread() as upstream, replica_set(config, upstream.url, tmp_path) as fleet:
        both = {"always:latency", "counted:latency"}
        assert faults_per_replica(fleet) == [both] * 3

        result = fleet.replicas[1].ctl("pause")
        assert result.returncode == 0 and result.stdout.strip() == "faults paused on every replica of the fleet"
        paused_at = time.monotonic()
        time.sleep(1.0)  # the switch takes effect everywhere within 1 s ...
        assert faults_per_replica(fleet) == [set()] * 3  # ... so nothing is injected anywhere from here on
        assert all(r.control("GET", "/status")["paused"] for r in fleet.replicas)
        assert time.monotonic() - paused_at < 5  # the checks above ran promptly after the second

        fleet.replicas[2].ctl("resume")
        time.sleep(1.0)
        assert faults_per_replica(fleet) == [both] * 3

        result = fleet.replicas[0].ctl("rule", "always", "--disable")
        assert result.stdout.strip() == "rule always disabled on every replica of the fleet"
        time.sleep(1.0)
        assert faults_per_replica(fleet) == [{"counted:latency"}] * 3
        states = [r.control("GET", "/status")["state"] for r in fleet.replicas]
        assert all(not s["pending_switches"] and s["switches_version"].endswith(":3") for s in states)
        assert all(all(not r["paused"] for r in s["replicas"]) for s in states)


def test_a_replica_joining_a_paused_fleet_starts_paused(redis_server: RedisServer, tmp_path: Path) -> None:
    config = fleet_config(redis_server, latency("always", "gpt-*"))
    with MockUpstream.run_in_thread() as upstream:
        with replica_set(config, upstream.url, tmp_path / "first", n=1) as first:
            first.replicas[0].ctl("pause")
        with replica_set(config, upstream.url, tmp_path / "late", n=1) as late:
            assert late.replicas[0].control("GET", "/status")["paused"] is True
            assert faults_per_replica(late) == [set()]
