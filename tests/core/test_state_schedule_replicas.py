"""The schedule store shared by replicas on one Redis: counters, leases, the store going away, Lua draws."""

from __future__ import annotations

import asyncio
import math

from brownout.core.state.schedule import (
    FIRED,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PROBABILITY,
    SKIPPED_STATE_UNAVAILABLE,
    Ask,
    ScheduleSpec,
    draw,
)
from brownout.core.state.schedule_redis import RedisSchedules
from tests.core.test_state_schedule import Rule, store_for
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

T0 = 1_800_000_000.0  # a quota window starts here (the rules' base)


def test_two_replicas_share_the_counters(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server) as one, store_for("redis", redis_server) as two:
            spec = ScheduleSpec(every=5, max_injections=10)
            rules = [Rule(one, spec), Rule(two, spec)]
            fired = [(await rules[i % 2].decide(f"s{i % 3}")).outcome == FIRED for i in range(99)]
            assert sum(fired) == 10 and [i + 1 for i, f in enumerate(fired) if f][:3] == [5, 10, 15]

    asyncio.run(main())


def test_a_lease_a_dead_replica_held_expires(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server, lease_ttl_s=2.0) as store:
            rule = Rule(store, ScheduleSpec(max_concurrent=1))
            assert (await rule.decide(now=T0)).outcome == FIRED  # never released: its replica died
            assert (await rule.decide(now=T0 + 1.9)).outcome == SKIPPED_BLAST_RADIUS
            assert (await rule.decide(now=T0 + 2.1)).outcome == FIRED

    asyncio.run(main())


def test_a_lease_in_flight_is_renewed(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server, lease_ttl_s=2.0) as store:
            rule = Rule(store, ScheduleSpec(max_concurrent=1))
            held = await rule.decide(now=T0)
            assert isinstance(store, RedisSchedules)
            await store.renew(T0 + 1.5)  # the exchange is still streaming
            assert (await rule.decide(now=T0 + 3)).outcome == SKIPPED_BLAST_RADIUS
            await store.release([held], T0 + 3, 0)
            assert (await rule.decide(now=T0 + 3)).outcome == FIRED
            assert store.describe()["leases_held"] == 1

    asyncio.run(main())


def test_counted_rules_skip_while_the_store_is_away_and_others_go_on(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server) as store:
            counted, free = Rule(store, ScheduleSpec(max_injections=5)), Rule(store, ScheduleSpec(), name="free")
            redis_server.stop()
            tickets = await store.decide([counted.ask(), free.ask()])
            assert [t.outcome for t in tickets] == [SKIPPED_STATE_UNAVAILABLE, FIRED]
            assert tickets[0].reason == "the shared store is unreachable"
            assert isinstance(store, RedisSchedules) and store.link.errors >= 1
            store.epoch = None
            [t] = await store.decide([counted.ask()])
            assert (t.outcome, t.reason) == (SKIPPED_STATE_UNAVAILABLE, "the fleet's origin is not known yet")

    asyncio.run(main())


def test_replicas_share_the_session_index_of_probability_only_rules(redis_server: RedisServer) -> None:
    """One session spread over two replicas draws as one process would: index 1, 2, 3, ... fleet-wide."""

    async def main() -> None:
        async with store_for("redis", redis_server) as one, store_for("redis", redis_server) as two:
            spec = ScheduleSpec(probability=0.5)
            rules = [Rule(one, spec), Rule(two, spec)]  # each replica its own process-local counters
            tickets = [await rules[i % 2].decide("s") for i in range(30)]
            assert [t.index for t in tickets] == list(range(1, 31))
            expected = [FIRED if draw(7, "r", "s", i) < 0.5 else SKIPPED_PROBABILITY for i in range(1, 31)]
            assert [t.outcome for t in tickets] == expected
            # a global counter (the decision log's `counter`) is the fleet's as well
            assert [t.counter for t in tickets] == list(range(1, 31))

    asyncio.run(main())


def test_probability_only_rules_go_on_from_the_last_shared_index_while_the_store_is_away(
    redis_server: RedisServer,
) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server) as store:
            rule = Rule(store, ScheduleSpec(probability=0.5))
            for _ in range(5):
                await rule.decide("s")
            redis_server.stop()
            tickets = [await rule.decide("s") for _ in range(3)]
            assert [t.index for t in tickets] == [6, 7, 8]  # the sequence one process would have gone on with
            expected = [FIRED if draw(7, "r", "s", i) < 0.5 else SKIPPED_PROBABILITY for i in (6, 7, 8)]
            assert [t.outcome for t in tickets] == expected
            assert isinstance(store, RedisSchedules) and store.link.errors == 3

    asyncio.run(main())


def test_lua_and_python_draws_agree_bit_for_bit(redis_server: RedisServer) -> None:
    """Through the real script: for each input, a probability equal to the Python draw must skip (u >= p)
    and the next double above it must fire; one ulp of disagreement flips one of the two."""
    seeds = [0, 1, -5, 42, 2**63, 10**30]
    rules = ["r", "openai-429", "règle ü", "a|b:c", "x" * 80]
    sessions = ["s", "client:127.0.0.1", "4bf92f3577b34da6a3ce929d0e0e4736", "séance-☃", "y" * 200, ""]
    inputs = [
        (seed, rule, f"{session}{k}") for seed in seeds for rule in rules for session in sessions for k in range(17)
    ]
    assert len(inputs) > 3000

    async def main() -> None:
        async with store_for("redis", redis_server) as store:
            for i in range(0, len(inputs), 200):
                batch = inputs[i : i + 200]
                asks: list[Ask] = []
                expected: list[str] = []
                for j, (seed, rule, session) in enumerate(batch):
                    u = draw(seed, rule, session, 1)
                    above = math.nextafter(u, 2.0)
                    for p, outcome in ((u, SKIPPED_PROBABILITY), (above, FIRED)):
                        spec = ScheduleSpec(probability=p, max_injections=10**9)
                        r = Rule(store, spec, name=rule, seed=seed)
                        ask = r.ask(session)
                        ask.key = f"{rule}#{i + j}#{p!r}"  # fresh counters: the match index is 1
                        asks.append(ask)
                        expected.append(outcome)
                tickets = await store.decide(asks)
                assert [(t.outcome, t.index) for t in tickets] == [(o, 1) for o in expected]

    asyncio.run(main())
