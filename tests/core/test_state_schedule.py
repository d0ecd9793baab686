"""Schedule stores, memory and redis, through one suite: every schedule field decides the same on both.

The redis store runs against a real redis-server (tests/redisserver.py); the memory one needs none.
Each test states what the field means (which matches fire) and runs on both backends, so a backend
that drifts from the other fails here. The draw check pins the Lua draw to the Python one bit for bit.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.schedule import (
    FIRED,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    SKIPPED_STATE_UNAVAILABLE,
    Ask,
    ScheduleSpec,
    ScheduleStore,
    Ticket,
    draw,
)
from brownout.core.state.schedule_memory import MemoryCounters, MemorySchedules
from brownout.core.state.schedule_redis import RedisSchedules
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

T0 = 1_800_000_000.0  # a quota window starts here (the rules' base)
BACKENDS = ("memory", "redis")


@dataclass
class Rule:
    """One rule on one backend: its spec and its process-local counters."""

    store: ScheduleStore
    spec: ScheduleSpec
    name: str = "r"
    seed: int = 7
    counts_tokens: bool = False
    session_ttl_s: float = 300.0

    def __post_init__(self) -> None:
        self.local = MemoryCounters(self.spec, rule=self.name, seed=self.seed, quota_base=T0)
        self.n = 0

    def ask(self, session: str = "s", now: float = T0, start: float | None = T0) -> Ask:
        self.n += 1
        return Ask(
            rule=self.name,
            key=self.name,
            spec=self.spec,
            seed=self.seed,
            session=session,
            now=now,
            start=start,
            quota_base=T0,
            lease=f"x{self.n}",
            local=self.local,
            session_ttl_s=self.session_ttl_s,
            counts_tokens=self.counts_tokens,
        )

    async def decide(self, session: str = "s", now: float = T0, start: float | None = T0) -> Ticket:
        [ticket] = await self.store.decide([self.ask(session, now, start)])
        return ticket

    async def fired(self, n: int, session: str = "s", now: float = T0, release: bool = True) -> list[int]:
        """Match numbers (1-based) that fired among the next n matches."""
        out = []
        for i in range(1, n + 1):
            t = await self.decide(session, now)
            if t.outcome == FIRED:
                out.append(i)
            if release:
                await self.store.release([t], now, 0)
        return out


@asynccontextmanager
async def store_for(backend: str, server: RedisServer | None, **kw: Any) -> AsyncIterator[ScheduleStore]:
    if backend == "memory":
        yield MemorySchedules()
        return
    assert server is not None
    link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=2000))
    store = RedisSchedules(link, lease_ttl_s=kw.get("lease_ttl_s", 30.0), replica="t")
    store.epoch = "1"
    try:
        yield store
    finally:
        await link.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    yield str(request.param)


@pytest.fixture
def server(backend: str, request: pytest.FixtureRequest) -> RedisServer | None:
    return request.getfixturevalue("redis_server") if backend == "redis" else None


Body = Callable[[ScheduleStore], Awaitable[None]]


def run(backend: str, server: RedisServer | None, body: Body, **kw: Any) -> None:
    async def main() -> None:
        async with store_for(backend, server, **kw) as store:
            await body(store)

    asyncio.run(main())


def test_after_first_every(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        assert await Rule(store, ScheduleSpec(after=2), name="a").fired(5) == [3, 4, 5]
        assert await Rule(store, ScheduleSpec(first=2), name="b").fired(5) == [1, 2]
        assert await Rule(store, ScheduleSpec(every=3), name="c").fired(10) == [3, 6, 9]
        assert await Rule(store, ScheduleSpec(after=2, first=3), name="d").fired(10) == [3, 4, 5]
        assert await Rule(store, ScheduleSpec(after=1, every=2), name="e").fired(8) == [3, 5, 7]
        t = await Rule(store, ScheduleSpec(after=1), name="f").decide()
        assert (t.outcome, t.counter, t.reason) == (SKIPPED_SCHEDULE, 1, "after: match 1 of 1 skipped")
        rule = Rule(store, ScheduleSpec(first=2, every=2), name="g")
        reasons = [(await rule.decide()).reason for _ in range(3)]
        assert reasons == ["every: match 1 not a multiple of 2", "always", "first: match 3 > 2"]

    run(backend, server, body)


def test_max_injections_caps_the_scope(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(max_injections=3))
        assert await rule.fired(10) == [1, 2, 3]
        t = await rule.decide()
        assert (t.outcome, t.reason) == (SKIPPED_BLAST_RADIUS, "max_injections 3 reached")
        per = Rule(store, ScheduleSpec(max_injections=1, per_session=True), name="per")
        assert await per.fired(3, "a") == [1] and await per.fired(3, "b") == [1]

    run(backend, server, body)


def test_max_concurrent_counts_in_flight_until_release(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(max_concurrent=2))
        held = [await rule.decide() for _ in range(4)]
        assert [t.outcome for t in held] == [FIRED, FIRED, SKIPPED_BLAST_RADIUS, SKIPPED_BLAST_RADIUS]
        assert held[2].reason == "max_concurrent 2 in flight"
        await store.release([held[0]], T0, 0)
        await store.release([held[0]], T0, 0)  # a second release is a no-op
        assert (await rule.decide()).outcome == FIRED
        assert (await rule.decide()).outcome == SKIPPED_BLAST_RADIUS
        per = Rule(store, ScheduleSpec(max_concurrent=1, per_session=True), name="per")
        assert [(await per.decide(s)).outcome for s in ("a", "b", "a")] == [FIRED, FIRED, SKIPPED_BLAST_RADIUS]

    run(backend, server, body)


def test_a_closed_window_skips_and_still_counts(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(after=1))
        t = await rule.decide(start=None)
        assert (t.outcome, t.reason, t.counter, t.index) == (SKIPPED_SCHEDULE, "outside the time window", 1, 1)
        assert (await rule.decide()).outcome == FIRED  # the closed-window match was the one `after` skips

    run(backend, server, body)


def test_probability_draws_are_the_same_on_both_backends(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(probability=0.3, max_injections=10_000))
        tickets = [await rule.decide(f"s{i % 7}") for i in range(700)]
        expected = [draw(7, "r", f"s{i % 7}", i // 7 + 1) < 0.3 for i in range(700)]
        assert [t.outcome == FIRED for t in tickets] == expected
        assert 0.25 < sum(expected) / 700 < 0.35
        skipped = next(t for t in tickets if t.outcome == SKIPPED_PROBABILITY)
        assert (
            skipped.reason == f"draw {draw(7, 'r', skipped_session(tickets, skipped), skipped.index):.6f} >= p 0.300000"
        )
        assert next(t for t in tickets if t.outcome == FIRED).reason == "p 0.300000"

    run(backend, server, body)


def skipped_session(tickets: list[Ticket], ticket: Ticket) -> str:
    return f"s{tickets.index(ticket) % 7}"


def test_the_ramp_scales_the_probability_from_the_window_start(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(ramp_s=100, first=100_000))
        early = [(await rule.decide(f"e{i}", now=T0 + 5)).outcome for i in range(300)].count(FIRED)
        late = [(await rule.decide(f"l{i}", now=T0 + 90)).outcome for i in range(300)].count(FIRED)
        assert early < 40 and late > 230
        t = await rule.decide("x", now=T0 + 200)
        assert (t.outcome, t.reason) == (FIRED, "always")

    run(backend, server, body)


def test_the_match_index_is_per_session_even_for_a_global_rule(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(every=1))
        got = [(s, (await rule.decide(s)).index) for s in ("a", "b", "a", "a", "b")]
        assert got == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]
        counters = [(await rule.decide(s)).counter for s in ("a", "b")]
        assert counters == [6, 7]  # global scope: the rule's own count

    run(backend, server, body)


def test_quota_answers_after_the_request_limit_until_the_minute_ends(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(requests_per_min=3))
        outcomes = [await rule.decide(now=T0 + i) for i in range(5)]
        assert [t.outcome for t in outcomes] == [SKIPPED_SCHEDULE] * 3 + [FIRED, FIRED]
        assert outcomes[0].reason == "quota: 1 requests this minute"
        assert (outcomes[3].retry_after_s, outcomes[4].retry_after_s) == (57, 56)
        assert outcomes[3].reason == "quota exceeded"
        assert (await rule.decide(now=T0 + 60)).outcome == SKIPPED_SCHEDULE  # a new minute

    run(backend, server, body)


def test_a_request_the_schedule_lets_through_uses_the_quota(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        # over the quota, `every: 2` lets every other request through to upstream: those count
        rule = Rule(store, ScheduleSpec(requests_per_min=1, every=2))
        assert (await rule.decide(now=T0)).reason == "quota: 1 requests this minute"
        assert (await rule.decide(now=T0 + 1)).outcome == FIRED
        assert (await rule.decide(now=T0 + 2)).reason == "every: match 3 not a multiple of 2"
        assert (await rule.decide(now=T0 + 60)).reason == "quota: 1 requests this minute"

    run(backend, server, body)


def test_token_quota_counts_tokens_at_release(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(tokens_per_min=1000), counts_tokens=True)
        t = await rule.decide(now=T0)
        assert t.outcome == SKIPPED_SCHEDULE
        await store.release([t], T0 + 1, 1200)
        over = await rule.decide(now=T0 + 2)
        assert (over.outcome, over.retry_after_s) == (FIRED, 58)
        assert (await rule.decide(now=T0 + 61)).outcome == SKIPPED_SCHEDULE

    run(backend, server, body)


def test_quota_per_session(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(requests_per_min=1, per_session=True))
        assert [(await rule.decide(s)).outcome for s in ("a", "b", "a")] == [
            SKIPPED_SCHEDULE,
            SKIPPED_SCHEDULE,
            FIRED,
        ]

    run(backend, server, body)


def test_probability_only_rules_decide_in_the_process(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(probability=0.5))
        tickets = [await rule.decide() for _ in range(20)]
        assert rule.local.total.matches == 20  # counted by the process's own counters, on both backends
        assert [t.index for t in tickets] == list(range(1, 21))

    run(backend, server, body)


def test_one_call_decides_several_rules_in_order(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        a, b, c = Rule(store, ScheduleSpec(every=2), name="a"), Rule(store, ScheduleSpec(), name="b"), None
        c = Rule(store, ScheduleSpec(first=1), name="c")
        for expected in ([SKIPPED_SCHEDULE, FIRED, FIRED], [FIRED, FIRED, SKIPPED_SCHEDULE]):
            tickets = await store.decide([a.ask(), b.ask(), c.ask()])
            assert [t.outcome for t in tickets] == expected

    run(backend, server, body)


# --- redis only: what a shared store adds ---------------------------------------------------


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
