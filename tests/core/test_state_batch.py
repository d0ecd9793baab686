"""The link's batched calls against a real redis-server: one write per turn of the loop, each call its own answer.

Writes are counted by the server itself (`INFO stats`: `total_reads_processed`, one per write a
client sent it), not by the link, so a test cannot pass on the link's own say-so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.batch import Lua
from brownout.core.state.redis_sessions import RedisSessions
from brownout.core.state.schedule import FIRED, ScheduleSpec
from brownout.core.state.sessions import Committed, SessionChange, SessionRecord
from tests.core.test_state_schedule import Rule, store_for
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

COUNT = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def link_for(server: RedisServer, errors: list[str], **kw: Any) -> RedisLink:
    # Generous budgets: a first call that connects and loads a script on a busy machine can outlast the defaults.
    config = StateConfig(backend="redis", url=server.url, **{"timeout_ms": 2000, "connect_timeout_ms": 5000, **kw})
    return RedisLink(config, on_error=errors.append)


async def counting(server: RedisServer, errors: list[str], **kw: Any) -> tuple[RedisLink, Lua]:
    """A link and its counting script, loaded into the server (a first use costs a round trip more)."""
    link = link_for(server, errors, **kw)
    count = link.lua(COUNT)
    assert await link.eval("count", count, ["warm"], [1], None) == 1
    return link, count


def reads(server: RedisServer) -> int:
    """Writes the server has read from its clients so far (this INFO's own one included)."""
    info = server.command("INFO", "stats").decode()
    return int(info.split("total_reads_processed:")[1].split()[0])


def writes_during(server: RedisServer, before: int) -> int:
    return reads(server) - before - 2  # the two INFO commands' own writes


def test_calls_of_one_turn_leave_in_one_write_each_with_its_answer(redis_server: RedisServer) -> None:
    async def main() -> None:
        link, count = await counting(redis_server, errors := [])
        before = reads(redis_server)
        got = await asyncio.gather(*(link.eval("count", count, [f"k{i}"], [i + 1], None) for i in range(8)))
        assert writes_during(redis_server, before) == 1
        assert got == list(range(1, 9)) and errors == []
        await link.close()

    asyncio.run(main())


def test_a_lingering_call_goes_out_with_the_next_urgent_one_or_alone_soon(redis_server: RedisServer) -> None:
    async def main() -> None:
        link, count = await counting(redis_server, errors := [])
        link.batches.linger_s = 1.0  # however busy the machine, the decision below comes within it
        before = reads(redis_server)
        commit = asyncio.ensure_future(link.eval("commit", count, ["late"], [5], None, linger=True))
        for _ in range(3):  # turns later: the next exchange's decision
            await asyncio.sleep(0)
        assert not commit.done()
        assert await link.eval("decide", count, ["now"], [7], None) == 7
        assert await commit == 5
        assert writes_during(redis_server, before) == 1
        link.batches.linger_s = 0.005
        t0 = time.monotonic()
        assert await link.eval("commit", count, ["late"], [1], None, linger=True) == 6  # nobody comes: alone
        assert time.monotonic() - t0 < 1.0 and errors == []
        await link.close()

    asyncio.run(main())


def test_the_decision_runs_and_answers_ahead_of_the_commit_that_rides_with_it(redis_server: RedisServer) -> None:
    """A lingering commit issued before the decision leaves in the decision's write, behind it: Redis runs the
    decision first, and the decision's caller has its answer before the commit's is even read."""

    async def main() -> None:
        link = link_for(redis_server, errors := [])
        log = link.lua("return redis.call('RPUSH', KEYS[1], ARGV[1])")
        assert await link.eval("warm", log, ["warm"], ["x"], None) == 1
        link.batches.linger_s = 1.0
        answered: list[str] = []
        commit = asyncio.ensure_future(link.eval("commit", log, ["order"], ["commit"], None, linger=True))
        commit.add_done_callback(lambda _: answered.append("commit"))
        for _ in range(3):
            await asyncio.sleep(0)
        decision = asyncio.ensure_future(link.eval("decide", log, ["order"], ["decision"], None))
        decision.add_done_callback(lambda _: answered.append("decision"))
        await asyncio.gather(commit, decision)
        assert redis_server.command("LRANGE", "order", "0", "-1") == b"*2\r\n$8\r\ndecision\r\n$6\r\ncommit\r\n"
        assert answered == ["decision", "commit"] and errors == []
        await link.close()

    asyncio.run(main())


def test_after_redis_restarts_the_first_call_is_answered_on_a_fresh_connection(redis_server: RedisServer) -> None:
    """The connection kept from before a restart is closed by then: the pool must see that and reconnect, not
    send on it and count a failure (redis-py 8's default maintenance notifications skip that check)."""

    async def main() -> None:
        link, count = await counting(redis_server, errors := [])
        redis_server.stop()
        redis_server.start()  # empty: the script is loaded again in the same call
        await asyncio.sleep(0.2)  # the kept connection's EOF has arrived
        assert await link.eval("count", count, ["after"], [3], None) == 3
        assert errors == [] and link.up is True
        await link.close()

    asyncio.run(main())


def test_a_call_that_fails_fails_alone_and_is_counted(redis_server: RedisServer) -> None:
    async def main() -> None:
        link, count = await counting(redis_server, errors := [])
        broken = link.lua("return redis.error_reply('no such thing')")
        got = await asyncio.gather(
            link.eval("count", count, ["a"], [1], None),
            link.eval("broken", broken, [], [], "fallback"),
            link.eval("unsendable", count, ["b"], [None], "fallback"),  # Redis takes no None: it never leaves
            link.eval("count", count, ["a"], [2], None),
        )
        assert got == [1, "fallback", "fallback", 3]
        assert sorted(errors) == ["broken", "unsendable"]
        await link.close()

    asyncio.run(main())


def test_a_dead_store_fails_every_call_of_a_batch_each_counted(redis_server: RedisServer) -> None:
    async def main() -> None:
        link, count = await counting(redis_server, errors := [], timeout_ms=200)
        redis_server.stop()
        got = await asyncio.gather(*(link.eval(op, count, ["k"], [1], "fallback") for op in ("a", "b", "c")))
        assert got == ["fallback"] * 3 and sorted(errors) == ["a", "b", "c"] and link.up is False
        await link.close()

    asyncio.run(main())


def test_a_script_the_server_lost_is_loaded_again_in_the_same_call(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [])
        count = link.lua(COUNT)
        assert await link.eval("count", count, ["k"], [1], None) == 1  # first use: NOSCRIPT, loaded, sent again
        assert redis_server.command("SCRIPT", "FLUSH").startswith(b"+OK")  # as a restarted server would
        assert await asyncio.gather(*(link.eval("count", count, ["k"], [1], None) for _ in range(3))) == [2, 3, 4]
        assert errors == []
        await link.close()

    asyncio.run(main())


def test_a_reply_in_time_is_taken_though_the_loop_looked_late(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [], timeout_ms=50)
        # Redis answers after 20 ms, well within the budget; the proxy's loop is busy for 200 ms meanwhile.
        source = (
            "local t = redis.call('TIME'); while true do local n = redis.call('TIME'); "
            "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 20000 then return redis.call('INCR', KEYS[1]) end end"
        )
        slow, single = link.lua(source), link.script(source)
        await link.eval("warm", slow, ["warm"], [], None)
        await link.call("warm", lambda r: single(keys=["warm"]), None)
        for op, call in (
            ("batched", lambda: link.eval("batched", slow, ["k"], [], None)),
            ("single", lambda: link.call("single", lambda r: single(keys=["j"]), None)),
        ):
            task = asyncio.ensure_future(call())
            for _ in range(5):  # the command goes out
                await asyncio.sleep(0)
            time.sleep(0.2)
            assert await task == 1, op
        assert errors == [] and link.up is True
        await link.close()

    asyncio.run(main())


def test_commits_of_many_sessions_share_one_write(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [])
        states = RedisSessions(link, idle_s=60)
        change = SessionChange(fields={"calls": "1"}, appended=("a",))
        assert isinstance(await states.commit(SessionRecord("s0"), change, 1.0), Committed)  # the script is in
        before = reads(redis_server)
        done = await asyncio.gather(*(states.commit(SessionRecord(f"s{i}"), change, 2.0) for i in range(1, 17)))
        assert writes_during(redis_server, before) == 1
        assert all(isinstance(d, Committed) and d.version == 1 for d in done) and errors == []
        loaded = await states.load("s16")
        assert not isinstance(loaded, type(None)) and loaded.fields == {"calls": "1"} and loaded.history == ["a"]
        await link.close()

    asyncio.run(main())


def test_decisions_of_exchanges_that_arrive_together_share_one_write(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with store_for("redis", redis_server) as store:
            rule = Rule(store, ScheduleSpec(every=2))
            await rule.decide("warm")
            before = reads(redis_server)
            tickets = await asyncio.gather(*(rule.decide(f"s{i}") for i in range(8)))
            assert writes_during(redis_server, before) == 1
            # Counted atomically in the order they were issued: matches 2..9 of the rule, every 2nd fires.
            assert sorted(t.counter for t in tickets) == list(range(2, 10))
            assert [t.outcome == FIRED for t in tickets] == [t.counter % 2 == 0 for t in tickets]

    asyncio.run(main())
