"""An experiment phase in a real redis-server: one run holds the fleet, leases expire, acks never outlive it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.overlay import EMPTY, OverlayRecord, OverlayWrite, RedisOverlay
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]


def run(server: RedisServer, scenario: Callable[[RedisOverlay], Awaitable[None]]) -> None:
    async def main() -> None:
        link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=2000, key_prefix="fleet-a:"))
        try:
            await scenario(RedisOverlay(link))
        finally:
            await link.close()

    asyncio.run(main())


def test_a_phase_is_read_whole_once_then_by_id_and_acknowledged(redis_server: RedisServer) -> None:
    async def scenario(store: RedisOverlay) -> None:
        assert await store.read("") == EMPTY
        assert await store.put("run-1", "run-1.0", '{"phase": "chaos"}', 5_000) == OverlayWrite(True)
        first = await store.read("", replica="r1", ack="")
        assert first is not None and first.id == "run-1.0" and first.body == '{"phase": "chaos"}'
        assert 4_000 < first.ttl_ms <= 5_000
        again = await store.read("run-1.0", replica="r1", ack="run-1.0 ok")
        assert again == OverlayRecord("run-1.0", again.ttl_ms if again else 0)  # known: no body
        await store.read("run-1.0", replica="r2", ack="run-0.9 ok")  # an ack of another phase is not kept
        roll = await store.roll_call()
        assert roll is not None and roll.acks == {"r1": "run-1.0 ok"}

    run(redis_server, scenario)


def test_one_run_holds_the_fleet_until_its_phase_is_cleared_or_expires(redis_server: RedisServer) -> None:
    async def scenario(store: RedisOverlay) -> None:
        assert (await store.put("run-1", "run-1.0", "{}", 300)).ok  # type: ignore[union-attr]
        refused = await store.put("run-2", "run-2.0", '{"phase": "other"}', 5_000)
        assert refused == OverlayWrite(False, "run-1", "{}")
        assert await store.clear("run-2") == -1  # not its phase to remove
        assert await store.renew("run-2", 5_000) is False
        # The same phase written again is a renewal: its acks stay.
        await store.read("", replica="r1", ack="run-1.0 ok")
        assert (await store.put("run-1", "run-1.0", "{}", 300)).ok  # type: ignore[union-attr]
        assert (await store.roll_call()).acks == {"r1": "run-1.0 ok"}  # type: ignore[union-attr]
        # The next phase of the same run replaces the first, and the acks of the first go with it.
        assert (await store.put("run-1", "run-1.1", '{"phase": "second"}', 300)).ok  # type: ignore[union-attr]
        roll = await store.roll_call()
        assert roll is not None and roll.acks == {}
        await asyncio.sleep(0.45)  # the lease was not renewed: gone
        assert await store.read("run-1.1") == EMPTY
        assert await store.renew("run-1", 5_000) is False
        # An ack arriving after the expiry does not bring the key back (without a TTL it would live forever).
        await store.read("", replica="r1", ack="run-1.1 ok")
        assert await store.link.client.exists(store.key) == 0
        assert (await store.put("run-2", "run-2.0", "{}", 5_000)).ok  # type: ignore[union-attr]
        assert await store.renew("run-2", 5_000) is True
        assert await store.clear("run-2") == 1
        assert await store.clear("run-2") == 0

    run(redis_server, scenario)


def test_the_roll_call_reads_the_replicas_heartbeats(redis_server: RedisServer) -> None:
    async def scenario(store: RedisOverlay) -> None:
        now = float((await store.link.client.time())[0])
        await store.link.client.hset(
            store.link.key("replicas"), mapping={"pod-a": f"abc 0 {now - 1:.3f}", "pod-b": f"abc 1 {now:.3f}"}
        )
        roll = await store.roll_call()
        assert roll is not None and set(roll.seen_s_ago) == {"pod-a", "pod-b"}
        assert 0.5 < roll.seen_s_ago["pod-a"] < 3 and roll.paused == {"pod-a": False, "pod-b": True}

    run(redis_server, scenario)


def test_the_store_away_reads_as_none(redis_server: RedisServer) -> None:
    redis_server.stop()

    async def scenario(store: RedisOverlay) -> None:
        assert await store.read("") is None
        assert await store.put("run-1", "run-1.0", "{}", 1_000) is None
        assert await store.roll_call() is None

    run(redis_server, scenario)
