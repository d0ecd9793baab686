"""Schedule stores, memory and redis, through one suite: every schedule field decides the same on both.

The redis store runs against a real redis-server (tests/redisserver.py); the memory one needs none.
Each test states what the field means (which matches fire) and runs on both backends, so a backend
that drifts from the other fails here. The draw check pins the Lua draw to the Python one bit for bit.
"""

from __future__ import annotations

import asyncio
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


def test_a_long_session_and_an_odd_rule_name_release_the_slot_they_took(
    backend: str, server: RedisServer | None
) -> None:
    """The script keys a long session by its sha1 and reads the rule from JSON; the release, built in
    Python, must name the same keys, or the slot stays taken."""

    async def body(store: ScheduleStore) -> None:
        name, session = 'règle ☃ "q" a|b:c', "séance-" + "y" * 120
        rule = Rule(store, ScheduleSpec(max_concurrent=1, per_session=True), name=name)
        held = await rule.decide(session)
        assert (held.outcome, (await rule.decide(session)).outcome) == (FIRED, SKIPPED_BLAST_RADIUS)
        await store.release([held], T0, 0)
        assert (await rule.decide(session)).outcome == FIRED
        quota = Rule(store, ScheduleSpec(tokens_per_min=10, per_session=True), name=name + "q", counts_tokens=True)
        admitted = await quota.decide(session)
        assert admitted.outcome == SKIPPED_SCHEDULE
        await store.release([admitted], T0, 10)  # its tokens use the quota up
        again = await quota.decide(session)
        assert (again.outcome, again.reason) == (FIRED, "quota exceeded")

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


def test_probability_only_rules_draw_on_the_session_index(backend: str, server: RedisServer | None) -> None:
    async def body(store: ScheduleStore) -> None:
        rule = Rule(store, ScheduleSpec(probability=0.5))
        tickets = [await rule.decide() for _ in range(20)]
        assert rule.local.total.matches == 20  # this process's share, for its /status, on both backends
        assert [t.index for t in tickets] == list(range(1, 21))
        expected = [FIRED if draw(7, "r", "s", i) < 0.5 else SKIPPED_PROBABILITY for i in range(1, 21)]
        assert [t.outcome for t in tickets] == expected

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
