"""The session store, the same suite on both backends: memory (in process) and Redis (a real redis-server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.redis_sessions import RedisSessions
from brownout.core.state.sessions import Committed, MemorySessions, SessionChange, SessionRecord, Status
from tests.redisserver import running_redis
from tests.statestores import Factory, Runner, stores

__all__ = ["stores"]

T = 1_750_000_000.0


def test_a_new_session_loads_empty_and_commits_fields_and_history(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        store = states()
        record = await store.load("s1")
        assert record == SessionRecord("s1", 0, {}, [])
        change = SessionChange({"totals": '{"calls": 1}', "inv:no_loop": "[1]"}, (), ('{"e": 1}',))
        done = await store.commit(record, change, T)
        assert done == Committed(1, None, [])
        again = await store.load("s1")
        assert again == SessionRecord("s1", 1, {"totals": '{"calls": 1}', "inv:no_loop": "[1]"}, ['{"e": 1}'])
        assert isinstance(again, SessionRecord)
        await store.commit(again, SessionChange({"totals": '{"calls": 2}'}, ("inv:no_loop",), ('{"e": 2}',)), T + 1)
        third = await store.load("s1")
        assert third == SessionRecord("s1", 2, {"totals": '{"calls": 2}'}, ['{"e": 1}', '{"e": 2}'])

    stores(scenario)


def test_history_keeps_the_latest_entries_in_order(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        store = states(history_max=3)
        record = await store.load("s1")
        assert isinstance(record, SessionRecord)
        for i in range(7):
            done = await store.commit(record, SessionChange(appended=(f"{i}a", f"{i}b") if i == 6 else (str(i),)), T)
            assert isinstance(done, Committed) and done.version is not None
            record.version = done.version
        loaded = await store.load("s1")
        assert isinstance(loaded, SessionRecord) and loaded.history == ["5", "6a", "6b"]

    stores(scenario)


def test_a_commit_against_an_old_version_is_refused_with_the_current_record(stores: Runner) -> None:
    """Two replicas read version 1; the first commit wins, the second gets what is there now and applies on top."""

    async def scenario(states: Factory) -> None:
        a, b = states(), states()
        first = await a.load("s1")
        assert isinstance(first, SessionRecord)
        await a.commit(first, SessionChange({"calls": "1"}), T)
        seen_a, seen_b = await a.load("s1"), await b.load("s1")
        assert isinstance(seen_a, SessionRecord) and isinstance(seen_b, SessionRecord)
        assert (await a.commit(seen_a, SessionChange({"calls": "2"}, appended=("a",)), T + 1)) == Committed(2)
        refused = await b.commit(seen_b, SessionChange({"calls": "2"}, appended=("b",)), T + 1)
        assert isinstance(refused, Committed) and refused.version is None
        assert refused.current == SessionRecord("s1", 2, {"calls": "2"}, ["a"])
        assert await b.commit(refused.current, SessionChange({"calls": "3"}, appended=("b",)), T + 1) == Committed(3)
        final = await a.load("s1")
        assert final == SessionRecord("s1", 3, {"calls": "3"}, ["a", "b"])

    stores(scenario)


def test_idle_sessions_are_claimed_once_whoever_asks(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        a, b = states(idle_s=10), states(idle_s=10)
        for sid, t in (("old", T), ("newer", T + 5)):
            record = await a.load(sid)
            assert isinstance(record, SessionRecord)
            await a.commit(record, SessionChange({"x": f'"{sid}"'}, appended=("e",)), t)
        assert await a.claim_idle(T + 9.9) == []
        claims = await asyncio.gather(a.claim_idle(T + 10), b.claim_idle(T + 10))
        assert sorted(len(c) for c in claims if isinstance(c, list)) == [0, 1]
        (claimed,) = next(c for c in claims if c)  # type: ignore[misc]
        assert claimed == SessionRecord("old", 1, {"x": '"old"'}, ["e"])
        assert await a.load("old") == SessionRecord("old")  # gone: its next exchange starts a new session
        assert [r.id for r in await b.claim_idle(T + 100)] == ["newer"]  # type: ignore[union-attr]

    stores(scenario)


def test_activity_keeps_a_session_open_and_a_claimed_one_refuses_a_late_commit(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        store = states(idle_s=10)
        record = await store.load("s1")
        assert isinstance(record, SessionRecord)
        done = await store.commit(record, SessionChange({"n": "1"}), T)
        assert isinstance(done, Committed) and done.version == 1
        record.version = 1
        # A commit with an earlier clock (another replica's) never moves the session's activity back.
        await store.commit(record, SessionChange({"n": "2"}), T + 8)
        record.version = 2
        await store.commit(record, SessionChange({"n": "3"}), T + 7)
        assert await store.claim_idle(T + 17) == []
        # Claimed while a replica was judging it: that replica's commit is refused, and it starts afresh.
        stale = await store.load("s1")
        assert [r.id for r in await store.claim_idle(T + 18)] == ["s1"]  # type: ignore[union-attr]
        assert isinstance(stale, SessionRecord)
        refused = await store.commit(stale, SessionChange({"n": "4"}), T + 19)
        assert refused == Committed(None, SessionRecord("s1"))

    stores(scenario)


def test_over_max_sessions_the_least_recently_active_go_to_the_committer(stores: Runner) -> None:
    async def scenario(states: Factory) -> None:
        store = states(max_sessions=2)
        for i, sid in enumerate(("a", "b", "c")):
            record = await store.load(sid)
            assert isinstance(record, SessionRecord)
            done = await store.commit(record, SessionChange({"who": f'"{sid}"'}), T + i)
            assert isinstance(done, Committed)
            evicted = [(r.id, r.fields) for r in done.evicted]
            assert evicted == ([("a", {"who": '"a"'})] if sid == "c" else [])
        assert await store.load("a") == SessionRecord("a")
        loaded = await store.load("b")
        assert isinstance(loaded, SessionRecord) and loaded.version == 1

    stores(scenario)


def test_bounds_are_checked_when_the_store_is_built() -> None:
    for kw, name in (({"idle_s": 0}, "idle_s"), ({"max_sessions": 0}, "max_sessions"), ({"history_max": 0}, "history")):
        with pytest.raises(ValueError, match=name):
            MemorySessions(**kw)


def test_redis_keys_expire_after_twice_the_idle_time_and_live_under_the_prefix(tmp_path: Path) -> None:
    with running_redis(tmp_path) as server:

        async def main() -> None:
            # A generous budget: this test is about keys and their expiry, not about late calls.
            link = RedisLink(StateConfig(backend="redis", url=server.url, key_prefix="fleet-a:", timeout_ms=2000))
            store = RedisSessions(link, idle_s=30)
            record = await store.load("s1")
            assert isinstance(record, SessionRecord)
            await store.commit(record, SessionChange({"totals": "{}"}), T)
            ttl = await link.client.pttl("fleet-a:session:s1")
            index_ttl = await link.client.pttl("fleet-a:sessions")
            await link.close()
            assert 59_000 < ttl <= 60_000 and 59_000 < index_ttl <= 60_000

        asyncio.run(main())


def test_a_store_that_is_away_answers_unavailable_and_never_raises(tmp_path: Path) -> None:
    with running_redis(tmp_path) as server:

        async def main() -> None:
            errors: list[str] = []
            link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=200), on_error=errors.append)
            store = RedisSessions(link)
            record = await store.load("s1")
            assert isinstance(record, SessionRecord)
            server.stop()
            assert await store.commit(record, SessionChange({"a": "1"}), T) is Status.UNAVAILABLE
            assert await store.load("s1") is Status.UNAVAILABLE
            assert await store.claim_idle(T) is Status.UNAVAILABLE
            await link.close()
            assert errors == ["session_commit", "session_load", "session_claim"]

        asyncio.run(main())
