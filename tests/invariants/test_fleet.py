"""Session invariants over a shared store: replicas in one test, on the in-process store and on a real Redis.

Each `Replica` is a runner of its own (as each brownout process has) on one shared store.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.redis_sessions import RedisSessions
from brownout.core.state.sessions import Committed, MemorySessions, SessionChange, SessionRecord, SessionStates, Status
from brownout.invariants.fleet import RETRIES, FleetChecks
from brownout.invariants.records import Violation
from tests.invariants.builders import T0, Clock, Harness, llm, tool, weather_tool
from tests.invariants.test_mcp_tools import listing
from tests.redisserver import running_redis
from tests.statestores import Factory, Runner, Wrapped, stores

__all__ = ["stores"]

BUDGETS = [{"type": "call_budget", "max_calls": 3}, {"type": "no_loop", "max_repeats": 2}]


class Replica:
    """One process: its own runner and span builder, checks on the shared store."""

    def __init__(self, invariants: list[dict[str, Any]], states: SessionStates, clock: Clock, **kw: Any) -> None:
        # The process's own bounds are the store's, as the proxy builds both from one config.
        bounds = {"idle_s": states.idle_s, "max_sessions": states.max_sessions}
        self.harness = Harness(invariants, clock=clock, guard=Guard(strict=True), **bounds)
        self.clock = clock
        self.fleet = FleetChecks(self.harness.runner, states, **kw)

    async def run(self, exchange: Exchange) -> list[Violation]:
        self.clock.now = max(self.clock.now, exchange.timings.end or 0.0)
        span = self.harness.builder.start(exchange)
        found = await self.fleet.check(span, exchange)
        self.harness.builder.finish(span, found)
        return found

    @property
    def emitted(self) -> list[Violation]:
        return self.harness.emitted


def _agent_that_loops() -> list[Exchange]:
    """Six LLM calls, each asking for the same tool call: over call_budget (3) and no_loop (2 repeats)."""
    return [llm(i, calls=[("search", '{"q": "same"}')]) for i in range(6)]


def test_one_session_spread_over_three_replicas_trips_each_budget_once(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        clock = Clock()
        replicas = [Replica(BUDGETS, states(), clock) for _ in range(3)]
        for i, exchange in enumerate(_agent_that_loops()):
            await replicas[i % 3].run(exchange)  # round robin
        found = [v for r in replicas for v in r.emitted]
        assert sorted(v.invariant for v in found) == ["call_budget", "no_loop"]
        assert {v.invariant: v.message for v in found} == {
            "call_budget": "session made 4 LLM calls, budget 3",
            "no_loop": "model tool call 'search' repeated 3 times with identical arguments in the last 3 calls (max 2)",
        }
        assert all("state" not in v.details for v in found)

    stores(scenario)


def test_without_a_shared_store_each_replica_judges_its_own_part() -> None:
    """The same traffic with a store per replica: what the shared store prevents."""

    async def scenario() -> None:
        clock = Clock()
        replicas = [Replica(BUDGETS, MemorySessions(), clock) for _ in range(2)]
        for i, exchange in enumerate([llm(i, calls=[("search", '{"q": "same"}')]) for i in range(8)]):
            await replicas[i % 2].run(exchange)
        assert sorted(v.invariant for r in replicas for v in r.emitted) == ["call_budget"] * 2 + ["no_loop"] * 2

    asyncio.run(scenario())


class Paused(Wrapped):
    """A store whose first commit waits until released: another replica commits in between."""

    def __init__(self, states: SessionStates) -> None:
        super().__init__(states)
        self.at_commit = asyncio.Event()
        self.release = asyncio.Event()
        self.commits = 0

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        self.commits += 1
        if self.commits == 1:
            self.at_commit.set()
            await self.release.wait()
        return await super().commit(record, change, now)


def test_two_replicas_judging_one_session_at_once_report_once(stores: Runner) -> None:
    """A judges exchange 4 while B commits exchange 5: A's commit is refused, A judges again on B's state."""

    async def scenario(states: Factory) -> None:
        clock = Clock()
        budget = [{"type": "call_budget", "max_calls": 3}]
        a_store = Paused(states())
        a, b = Replica(budget, a_store, clock), Replica(budget, states(), clock)
        for t in range(3):
            await b.run(llm(t))
        judging = asyncio.create_task(a.run(llm(3)))
        await a_store.at_commit.wait()  # A has read 3 calls and judged its 4th: over budget, not committed
        (v,) = await b.run(llm(4))  # B reads 3 calls too, judges and commits first
        assert v.message == "session made 4 LLM calls, budget 3"
        a_store.release.set()
        assert await judging == []  # refused; judged again on B's state, where it is reported already
        assert (a.fleet.conflicts, b.fleet.conflicts) == (1, 0)
        assert a.emitted == [] and b.emitted == [v]
        record = await states().load("s1")
        assert isinstance(record, SessionRecord) and '"calls":5' in record.fields["totals"]

    stores(scenario)


class Counting(Wrapped):
    """A store that counts the loads and commits made to it."""

    def __init__(self, states: SessionStates) -> None:
        super().__init__(states)
        self.calls: list[str] = []

    async def load(self, session_id: str) -> SessionRecord | Status:
        self.calls.append("load")
        return await super().load(session_id)

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        self.calls.append("commit")
        return await super().commit(record, change, now)


def test_a_replica_holding_the_latest_version_commits_in_one_round_trip(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        clock = Clock()
        seen_a, seen_b = Counting(states()), Counting(states())
        a, b = Replica(BUDGETS, seen_a, clock), Replica(BUDGETS, seen_b, clock)
        for t in range(2):
            await a.run(llm(t))
        assert seen_a.calls == ["load", "commit", "commit"]  # it wrote the latest: no read
        await b.run(llm(2))
        seen_a.calls.clear()
        (v,) = await a.run(llm(3))  # its copy is one behind: refused, answered with b's, judged again
        assert seen_a.calls == ["commit", "commit"] and a.fleet.conflicts == 1
        assert v.message == "session made 4 LLM calls, budget 3" and b.emitted == []

    stores(scenario)


class AlwaysConflicting(MemorySessions):
    """Another replica commits before every commit of this one."""

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        await super().commit(SessionRecord(record.id, record.version), SessionChange(), now)
        return await super().commit(record, change, now)


def test_a_session_that_keeps_changing_is_judged_here_after_the_retries(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        replica = Replica([{"type": "token_budget", "max_tokens": 10}], AlwaysConflicting(), Clock())
        with caplog.at_level(logging.WARNING, logger="brownout.invariants.fleet"):
            (v,) = await replica.run(llm(0))
        assert replica.fleet.conflicts == RETRIES and replica.fleet.exhausted == 1
        assert v.details["state"] == "local" and v.invariant == "token_budget"
        assert "still changing on other replicas" in caplog.text

    asyncio.run(scenario())


def test_a_check_judged_again_leaves_its_span_events_once() -> None:
    async def scenario() -> None:
        replica = Replica([{"type": "no_pii"}], AlwaysConflicting(), Clock())
        exchange = llm(0)
        exchange.request_bytes, exchange.capture_max_bytes = 2048, 1024  # scanned in part: said on the span
        span = replica.harness.builder.start(exchange)
        await replica.fleet.check(span, exchange)
        assert replica.fleet.conflicts == RETRIES
        assert [e.name for e in span.events if e.name == "brownout.no_pii.partial"] == ["brownout.no_pii.partial"]
        replica.harness.builder.finish(span, [])
        (finished,) = replica.harness.exporter.get_finished_spans()
        assert [e.name for e in finished.events].count("brownout.no_pii.partial") == 1

    asyncio.run(scenario())


def test_idle_sessions_close_once_on_whichever_replica_sweeps(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        clock = Clock()
        replicas = [Replica([{"type": "mcp_tools"}], states(idle_s=60), clock) for _ in range(3)]
        await replicas[0].run(listing([weather_tool()], 0))
        await replicas[1].run(tool("get_forecast", {"city": "Oslo"}, 1))  # not listed: judged at the end
        assert await replicas[2].fleet.sweep(T0 + 60) == []  # not idle yet
        ends = await asyncio.gather(*(r.fleet.sweep(T0 + 62) for r in replicas))
        (v,) = [v for found in ends for v in found]
        assert v.details["check"] == "unknown" and v.timestamp == T0 + 62 and "state" not in v.details
        assert [v for r in replicas for v in r.emitted] == [v]
        assert all(r.harness.runner.sessions_active == 0 for r in replicas)
        assert [v for r in replicas for v in await r.fleet.sweep(T0 + 500)] == []

    stores(scenario)


def test_over_max_sessions_the_committer_closes_the_oldest(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        clock = Clock()
        a, b = (Replica([{"type": "mcp_tools"}], states(max_sessions=2), clock) for _ in range(2))
        await a.run(listing([weather_tool()], 0, session="old"))
        await a.run(tool("get_forecast", {}, 1, session="old"))
        await b.run(llm(2, session="s2"))
        assert b.emitted == []
        await b.run(llm(3, session="s3"))  # a third session: "old" is evicted, and closed by b
        (v,) = b.emitted
        assert v.session_id == "old" and v.details["check"] == "unknown" and a.emitted == []

    stores(scenario)


def test_shutdown_leaves_shared_sessions_to_the_fleet(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        clock = Clock()
        a, b = (Replica([{"type": "mcp_tools"}], states(idle_s=60), clock) for _ in range(2))
        await a.run(listing([weather_tool()], 0))
        await a.run(tool("get_forecast", {}, 1))
        assert a.fleet.close_all() == []  # a stops; the session is not over
        (v,) = await b.fleet.sweep(T0 + 100)
        assert v.details["check"] == "unknown" and "state" not in v.details

    stores(scenario)


def test_the_store_going_away_falls_back_to_local_state_and_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis killed mid-session: judged on the process's own state (said in the log and each violation);
    once Redis is back (empty: no persistence), the replicas share the session there again."""
    with running_redis(tmp_path) as server:

        async def scenario() -> None:
            links = [RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=500)) for _ in range(2)]
            clock = Clock()
            budget = [{"type": "call_budget", "max_calls": 2}, {"type": "no_loop", "max_repeats": 2}]
            a, b = (Replica(budget, RedisSessions(link), clock) for link in links)
            for t in range(2):
                assert await a.run(llm(t, calls=[("search", "{}")])) == []
            server.stop()
            with caplog.at_level(logging.WARNING):
                found = await a.run(llm(2, calls=[("search", "{}")]))  # the third: over both, judged here
                assert sorted(v.invariant for v in found) == ["call_budget", "no_loop"]
                assert all(v.details["state"] == "local" for v in found)
                assert "judged on this process's own state" in caplog.text
                assert await a.run(llm(3, calls=[("search", "{}")])) == []  # reported here already
                server.start()
                for link in links:
                    await _until_up(link)
                assert await a.run(llm(4)) == [] and await b.run(llm(5)) == []
                (again,) = await a.run(llm(6))  # a's and b's calls add up in the store
                assert again.invariant == "call_budget" and "state" not in again.details
                assert again.message == "session made 3 LLM calls, budget 2"
                assert "sessions are judged on the shared state again" in caplog.text
            for link in links:
                await link.close()

        asyncio.run(scenario())


def test_a_store_that_answers_again_is_read_afresh(tmp_path: Path) -> None:
    """A store too slow for a while (its data kept): what was judged here alone is left for the shared state."""
    with running_redis(tmp_path) as server:

        async def scenario() -> None:
            link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=100))
            replica = Replica([{"type": "call_budget", "max_calls": 3}], RedisSessions(link), Clock())
            for t in range(3):
                await replica.run(llm(t))
            server.command("CLIENT", "PAUSE", "600", "ALL")
            assert [v.details for v in await replica.run(llm(3))] == [{"calls": 4, "max_calls": 3, "state": "local"}]
            await asyncio.sleep(0.7)
            await _until_up(link)
            (shared,) = await replica.run(llm(4))  # the store held 3 calls: this is its 4th
            assert shared.message == "session made 4 LLM calls, budget 3" and "state" not in shared.details
            await link.close()

        asyncio.run(scenario())


async def _until_up(link: RedisLink) -> None:
    for _ in range(200):
        if await link.call("ping", lambda r: r.ping(), False):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the link did not come back")
