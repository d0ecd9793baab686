"""proxy/fleet.py against a real redis-server: switches, fail-safe pause, the roll call, the origin, mismatches.

Several `Fleet`s in one event loop stand for replicas (each with its own engine and link); a poll is
one `await fleet.sync()`, so nothing here waits on the poll interval.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from brownout.exporters.metrics import Metrics
from brownout.faults.engine import FaultEngine
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.control import ControlServer
from brownout.proxy.control_target import EngineControl
from brownout.proxy.ctl import ctl
from brownout.proxy.fleet import Fleet, config_hash
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

RULES = [
    {"name": "slow", "match": {}, "fault": {"type": "latency", "delay_ms": 1}, "schedule": {"start_s": 30}},
    {"name": "capped", "match": {}, "fault": {"type": "latency", "delay_ms": 1}, "schedule": {"max_injections": 3}},
]


def config_for(server: RedisServer, seed: int = 1, **state: Any) -> BrownoutConfig:
    return BrownoutConfig(
        seed=seed, rules=RULES, state={"backend": "redis", "url": server.url, "timeout_ms": 2000, **state}
    )


@asynccontextmanager
async def replica(config: BrownoutConfig, name: str, errors: list[str] | None = None) -> AsyncIterator[Fleet]:
    engine = FaultEngine(config.ruleset)
    fleet = Fleet(config, engine, replica=name, on_error=None if errors is None else errors.append)
    await fleet.start()
    assert fleet._task is not None
    fleet._task.cancel()  # the tests poll by hand
    try:
        yield fleet
    finally:
        await fleet.stop()


def test_memory_holds_nothing_shared() -> None:
    async def main() -> None:
        config = BrownoutConfig(rules=RULES)
        engine = FaultEngine(config.ruleset)
        fleet = Fleet(config, engine)
        await fleet.start()
        assert fleet.link is None and not engine.shared and fleet.describe() == {"backend": "memory"}
        assert await fleet.publish({"paused": "1"}) == {} and fleet.up() is None
        await fleet.stop()

    asyncio.run(main())


def test_a_switch_published_on_one_replica_applies_on_the_others(redis_server: RedisServer) -> None:
    async def main() -> None:
        config = config_for(redis_server)
        async with replica(config, "a") as a, replica(config, "b") as b:
            a.engine.pause()
            assert await a.publish({"paused": "1"}) == {"fleet": True}
            assert not b.engine.paused
            await b.sync()
            assert b.engine.paused
            await b.publish({"rule:slow": "0"})
            await a.sync()
            assert [r.enabled for r in a.engine.rules] == [False, True]
            await b.publish({"rule:no-such-rule": "0"})  # another config's rule: ignored here
            await a.sync()
            assert a.version == b.version and a.version.endswith(":3")

    asyncio.run(main())


def test_a_replica_that_cannot_read_the_store_stays_paused(redis_server: RedisServer) -> None:
    async def main() -> None:
        config = config_for(redis_server)
        async with replica(config, "a") as a, replica(config, "b") as b:
            a.engine.pause()
            await a.publish({"paused": "1"})
            await b.sync()
            redis_server.stop()
            a.engine.resume()  # the operator resumes replica a while the store is away
            answer = await a.publish({"paused": "0"})
            assert answer["fleet"] is False and "this replica only" in answer["warning"]
            assert "redis://127.0.0.1" in answer["warning"] and a.describe()["pending_switches"] == {"paused": "0"}
            for _ in range(3):
                await b.sync()
            assert b.engine.paused  # never un-paused by a store it cannot read
            redis_server.start()  # empty: the fleet's switches are gone with it
            await wait_up(b)
            await b.sync()
            assert b.engine.paused  # an empty store does not un-pause either ...
            await wait_up(a)  # ... but the switch set on a while it was away is written once a is back
            assert a.describe()["pending_switches"] == {}
            await b.sync()
            assert not b.engine.paused

    asyncio.run(main())


async def wait_up(*fleets: Fleet) -> None:
    for _ in range(50):
        for f in fleets:
            await f.sync()
        if all(f.up() for f in fleets):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the links did not come back")


def test_a_store_restarted_empty_gets_the_fleets_pause_back(redis_server: RedisServer) -> None:
    async def main() -> None:
        config = config_for(redis_server)
        async with replica(config, "a") as a:
            a.engine.pause()
            await a.publish({"paused": "1"})
            redis_server.stop()
            redis_server.start()
            await wait_up(a)
            await a.sync()
            assert a.engine.paused
            # the schedule script is in the new server before any exchange needs it
            assert redis_server.command("SCRIPT", "EXISTS", a._redis._script.sha) == b"*1\r\n:1\r\n"
            async with replica(config, "late") as late:
                assert late.engine.paused  # a replica started after the restart joins a paused fleet

    asyncio.run(main())


def test_replicas_share_the_fleet_origin_and_a_reload_keeps_it(redis_server: RedisServer) -> None:
    async def main() -> None:
        config = config_for(redis_server)
        async with replica(config, "a") as a:
            await asyncio.sleep(0.05)
            async with replica(config, "b") as b:
                assert a.origin_ms is not None and b.origin_ms == a.origin_ms
                assert b.engine.origin == a.engine.origin == int(a.origin_ms) / 1000
                # start_s windows open together, whenever each replica started
                assert b.engine.rules[0].schedule.base == a.engine.rules[0].schedule.base == b.engine.origin + 30
                assert {r.id for r in b.replicas} == {"a", "b"}
                reloaded = config_for(redis_server, seed=2)
                b.on_config(reloaded)
                await b.sync()
                assert b.config_hash == config_hash(reloaded) != a.config_hash and b.origin_ms == a.origin_ms

    asyncio.run(main())


def test_a_config_mismatch_is_logged_once_and_counted(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        metrics = Metrics(registry=CollectorRegistry())
        async with replica(config_for(redis_server), "a") as a, replica(config_for(redis_server, seed=9), "b") as b:
            metrics.state.watch(up=a.up, config_mismatch=lambda: len(a.mismatched), replicas=lambda: len(a.replicas))
            with caplog.at_level(logging.WARNING, logger="brownout.proxy.fleet"):
                for _ in range(3):
                    a._next_heartbeat = 0.0
                    await a.sync()
            assert a.mismatched == {b.config_hash}
            warnings = [r.getMessage() for r in caplog.records if "this one (a)" in r.getMessage()]
            assert len(warnings) == 1 and "replica(s) b run config " + b.config_hash in warnings[0]
            assert a.origin_ms != b.origin_ms  # their schedules count apart ...
            assert a.describe()["config_mismatch"] == [b.config_hash]
            registry = metrics.registry
            assert registry.get_sample_value("brownout_state_config_mismatch") == 1
            assert registry.get_sample_value("brownout_state_replicas") == 2
            assert registry.get_sample_value("brownout_state_store_up") == 1

    asyncio.run(main())


def test_the_store_gauges_have_no_series_with_the_memory_backend() -> None:
    metrics = Metrics(registry=CollectorRegistry())
    assert metrics.registry.get_sample_value("brownout_state_store_up") is None
    metrics.state.watch(up=lambda: None)  # a fleet whose store was never asked yet
    assert metrics.registry.get_sample_value("brownout_state_store_up") is None
    metrics.state.error("schedule")
    assert metrics.registry.get_sample_value("brownout_state_errors_total", {"op": "schedule"}) == 1


def test_errors_are_counted_by_operation(redis_server: RedisServer) -> None:
    async def main() -> None:
        errors: list[str] = []
        async with replica(config_for(redis_server), "a", errors) as a:
            redis_server.stop()
            await a.sync()
            await a.publish({"paused": "1"})
            assert errors == ["switches", "switch"]

    asyncio.run(main())


def test_ctl_says_when_the_fleet_was_not_reached() -> None:
    answer = {"fleet": False, "warning": "the state store redis://cache:6379/0 could not be reached"}

    class Engine:
        def pause(self) -> None: ...

        def status(self) -> dict[str, Any]:
            return {}

    target = EngineControl(Engine(), reload=lambda: (True, ""), publish=lambda switches: answer)
    server = ControlServer(target, listen="127.0.0.1:0", token="t").start()
    try:
        result = CliRunner().invoke(ctl, ["--url", server.url, "--token", "t", "pause"])
    finally:
        server.stop()
    assert result.exit_code == 0
    assert "faults paused on this replica only" in result.stdout
    assert "warning: the state store redis://cache:6379/0 could not be reached" in result.stderr


def test_after_a_reload_the_fleets_toggles_apply_again(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        config = config_for(redis_server)
        async with replica(config, "a") as a, replica(config, "b") as b:
            await a.publish({"rule:slow": "0"})
            await b.sync()
            assert not b.engine.rules[0].enabled
            b.engine.reload(config.ruleset)  # the file says enabled: true
            assert b.engine.rules[0].enabled
            with caplog.at_level(logging.WARNING, logger="brownout.proxy.fleet"):
                b.on_config(config_for(redis_server, key_prefix="other:"))
            assert "takes a restart" in caplog.text
            await b.sync()
            assert not b.engine.rules[0].enabled  # every replica agrees with the fleet again

    asyncio.run(main())


def test_a_switch_from_the_control_thread_never_waits_on_a_stuck_loop(redis_server: RedisServer) -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    config = config_for(redis_server)
    fleet = Fleet(config, FaultEngine(config.ruleset), replica="a")
    try:
        asyncio.run_coroutine_threadsafe(fleet.start(), loop).result(10)
        assert fleet.publish_from_thread({"paused": "1"}) == {"fleet": True}
        loop.call_soon_threadsafe(time.sleep, 1.0)  # the proxy's loop, busy
        answer = fleet.publish_from_thread({"paused": "0"}, timeout_s=0.2)
        assert answer["fleet"] is False and "did not finish within 0.2 s" in answer["warning"]
    finally:
        asyncio.run_coroutine_threadsafe(fleet.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
