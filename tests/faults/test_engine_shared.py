"""The fault engine with a shared schedule store (a real redis-server): one await per exchange, same decisions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.schedule_redis import RedisSchedules
from brownout.core.wire.openai import OpenAIFormat
from brownout.faults.engine import FaultEngine
from brownout.faults.plan import Plan
from tests.faults.engine_support import WIRE, Clock, engine, ex, openai_events
from tests.redismonitor import Monitor
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

MIXED = (
    {
        "name": "p-only",
        "match": {"model": "gpt-*"},
        "fault": {"type": "tag", "text": "a"},
        "schedule": {"probability": 0.4},
    },
    {"name": "every", "match": {"model": "gpt-*"}, "fault": {"type": "tag", "text": "b"}, "schedule": {"every": 3}},
    {
        "name": "capped",
        "match": {"model": "gpt-*"},
        "fault": {"type": "tag", "text": "c"},
        "schedule": {"probability": 0.5, "max_injections": 7, "scope": "session"},
    },
    {"name": "quota", "match": {"model": "gpt-*"}, "schedule": {"quota": {"requests_per_min": 5}}},
    {"name": "window", "match": {"model": "gpt-*"}, "fault": {"type": "tag"}, "schedule": {"start_s": 30, "after": 1}},
)


@asynccontextmanager
async def shared(server: RedisServer, *rules: dict[str, Any], **kw: Any) -> AsyncIterator[FaultEngine]:
    link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=2000))
    store = RedisSchedules(link, lease_ttl_s=30, replica="t")
    store.epoch = "1"
    e = engine(*rules, store=store, **kw)
    try:
        yield e
    finally:
        await e.drain()
        await link.close()


async def planned(e: FaultEngine, *args: Any, **kw: Any) -> Plan:
    """What the proxy's request hook does: plan, then settle once when rules wait for the store."""
    plan = e.plan(ex(*args, **kw), WIRE)
    if plan.pending:
        await e.settle(plan)
    return plan


def decisions(e: FaultEngine) -> list[tuple[str, str, str, int, int]]:
    return [(d.rule, d.outcome, d.reason, d.counter, d.index) for d in e.decisions.recent()]


def by_session(e: FaultEngine) -> list[tuple[str, str, int, str, str, int]]:
    """The decisions per session and rule in match order (index), as a fleet's replicas can be merged."""
    return [(d.session, d.rule, d.index, d.outcome, d.reason, d.counter) for d in e.decisions.recent()]


def test_memory_and_redis_take_the_same_decisions(redis_server: RedisServer) -> None:
    async def main() -> None:
        clock_m, clock_r = Clock(), Clock()
        memory = engine(*MIXED, clock=clock_m)
        async with shared(redis_server, *MIXED, clock=clock_r) as red:
            for i in range(120):
                clock_m.t = clock_r.t = memory.started_at + i * 0.5
                for e in (memory, red):
                    plan = await planned(e, i, session=f"s{i % 4}")
                    plan.finish()
            await red.drain()
        assert decisions(red) == decisions(memory)
        outcomes = {d[1] for d in decisions(memory)}
        assert {"fired", "skipped_schedule", "skipped_probability", "skipped_blast_radius"} <= outcomes

    asyncio.run(main())


def test_matched_rules_wait_for_one_settle_and_keep_config_order(redis_server: RedisServer) -> None:
    rules = (
        {"name": "first", "match": {}, "fault": {"type": "tag", "text": "1"}, "schedule": {"probability": 1.0}},
        {"name": "counted", "match": {}, "fault": {"type": "tag", "text": "2"}, "schedule": {"max_injections": 5}},
        {"name": "last", "match": {}, "fault": {"type": "tag", "text": "3"}},
    )

    async def main() -> None:
        async with shared(redis_server, *rules) as e:
            plan = e.plan(ex(1), WIRE)
            assert plan.fired == [] and [r.name for r in plan.pending or []] == ["first", "counted", "last"]
            assert list(e.decisions.recent()) == []  # every decision waits for the store
            await e.settle(plan)
            assert plan.pending is None
            assert [f.rule for f in plan.fired] == ["first", "counted", "last"]
            assert [d.rule for d in e.decisions.recent()] == ["first", "counted", "last"]

    asyncio.run(main())


def _commands_of_ten_exchanges(server: RedisServer, **kw: Any) -> list[str]:
    """What ten exchanges (`kw` for ex()) sent the store, one after the other, on MIXED's rules."""

    async def main() -> list[str]:
        async with shared(server, *MIXED) as e:
            assert isinstance(e.store, RedisSchedules) and await e.store.load()
            await planned(e, 0)  # the connection opens (redis-py says hello)
            with Monitor(server) as monitor:
                for i in range(1, 11):
                    await planned(e, i, session=f"s{i % 3}", **kw)
                return monitor.commands()

    return asyncio.run(main())


def test_an_exchange_costs_one_script_call_whatever_its_rules(redis_server: RedisServer) -> None:
    assert _commands_of_ten_exchanges(redis_server) == ["evalsha"] * 10


def test_an_exchange_no_rule_matches_asks_the_store_nothing(redis_server: RedisServer) -> None:
    assert _commands_of_ten_exchanges(redis_server, model="claude-sonnet-4") == []


def test_replicas_draw_a_sessions_probability_only_rules_as_one_process(redis_server: RedisServer) -> None:
    """Two engines on one store, taking turns on each session: the decisions one memory engine takes."""
    rules = (
        {"name": "global", "match": {}, "fault": {"type": "tag", "text": "g"}, "schedule": {"probability": 0.4}},
        {
            "name": "session",
            "match": {},
            "fault": {"type": "tag", "text": "s"},
            "schedule": {"probability": 0.6, "scope": "session", "ramp_s": 20},
        },
    )

    async def main() -> None:
        clock_m, clock_r = Clock(), Clock()
        memory = engine(*rules, clock=clock_m)
        async with (
            shared(redis_server, *rules, clock=clock_r) as one,
            shared(redis_server, *rules, clock=clock_r) as two,
        ):
            assert one.origin == two.origin == memory.origin  # windows and the ramp open together
            for i in range(60):
                clock_m.t = clock_r.t = memory.started_at + i * 0.5
                await planned(memory, i, session=f"s{i % 2}")
                await planned((one, two)[i // 2 % 2], i, session=f"s{i % 2}")  # each session on both in turn
            fleet = sorted(by_session(one) + by_session(two))
        assert fleet == sorted(by_session(memory))
        assert {d[3] for d in fleet} == {"fired", "skipped_probability"}

    asyncio.run(main())


def test_probability_only_rules_go_on_while_the_store_is_away(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with shared(redis_server, {"name": "p", "match": {}, "fault": {"type": "tag"}}) as e:
            redis_server.stop()
            plan = await planned(e, 1)
            assert [f.rule for f in plan.fired] == ["p"]
            [d] = e.decisions.recent()
            assert (d.outcome, d.index) == ("fired", 1)
            assert isinstance(e.store, RedisSchedules) and e.store.link.errors == 1  # the call it could not make

    asyncio.run(main())


def test_the_store_away_skips_counted_rules_and_counts_it(redis_server: RedisServer) -> None:
    rules = (
        {"name": "counted", "match": {}, "fault": {"type": "tag"}, "schedule": {"every": 1}},
        {"name": "free", "match": {}, "fault": {"type": "tag"}},
    )

    async def main() -> None:
        async with shared(redis_server, *rules) as e:
            redis_server.stop()
            plan = await planned(e, 1)
            assert [f.rule for f in plan.fired] == ["free"]
            [d] = [d for d in e.decisions.recent() if d.rule == "counted"]
            assert (d.outcome, d.reason) == ("skipped_state_unavailable", "the shared store is unreachable")
            assert e.decisions.counts["skipped_state_unavailable"] == 1
            redis_server.start()
            # A call while the link is down starts a probe (after a 0.25 s backoff): calls after it succeed.
            for i in range(2, 40):
                if any(f.rule == "counted" for f in (await planned(e, i)).fired):
                    break
                await asyncio.sleep(0.1)
            assert [d.outcome for d in e.decisions.recent() if d.rule == "counted"][-1] == "fired"

    asyncio.run(main())


def test_leases_are_released_when_the_exchange_ends(redis_server: RedisServer) -> None:
    rule = {"name": "one", "match": {}, "fault": {"type": "tag"}, "schedule": {"max_concurrent": 1}}

    async def main() -> None:
        async with shared(redis_server, rule) as e:
            held = await planned(e, 1)
            assert (await planned(e, 2)).fired == []
            held.finish()
            await e.drain()
            assert [f.rule for f in (await planned(e, 3)).fired] == ["one"]

    asyncio.run(main())


def test_a_release_reaches_the_store_after_the_exchanges_turn_even_with_eager_tasks(
    redis_server: RedisServer,
) -> None:
    """plan.finish() runs in the response hook: the release's Redis command must not go out before the
    hook has returned (mitmproxy's loop starts tasks eagerly)."""
    rule = {"name": "one", "match": {}, "fault": {"type": "tag"}, "schedule": {"max_concurrent": 1}}

    async def main() -> None:
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        async with shared(redis_server, rule) as e:
            assert isinstance(e.store, RedisSchedules)
            calls: list[int] = []
            release = e.store.release

            async def counted(*args: Any) -> None:
                calls.append(len(args[0]))
                await release(*args)

            e.store.release = counted  # type: ignore[method-assign]
            held = await planned(e, 1)
            held.finish()
            assert calls == []  # not in the caller's turn
            await e.drain()
            assert calls == [1]
            assert [f.rule for f in (await planned(e, 2)).fired] == ["one"]  # the slot was freed

    asyncio.run(main())


def test_paused_needs_no_round_trip(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with shared(
            redis_server, {"name": "c", "match": {}, "fault": {"type": "tag"}, "schedule": {"first": 3}}
        ) as e:
            e.pause()
            plan = e.plan(ex(1), WIRE)
            assert plan.pending is None and [d.outcome for d in e.decisions.recent()] == ["skipped_paused"]

    asyncio.run(main())


def _calling(tool: str) -> bytes:
    call = {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}).encode()


TOOL_RULE = {"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}, "schedule": {"first": 2}}


def test_a_counted_tool_rule_on_a_buffered_body_asks_the_store(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with shared(redis_server, TOOL_RULE) as e:
            bodies = []
            for i in range(3):
                exchange = ex(i)
                plan = e.plan(exchange, OpenAIFormat())
                assert plan.pending is None and plan.deferred  # decided on the response, not the request
                await plan.settle_deferred(_calling("send_email"))
                bodies.append(plan.edit_body(_calling("send_email"), {}))
            assert bodies == [_calling("send_email") + b"!"] * 2 + [_calling("send_email")]
            assert [d.reason for d in e.decisions.recent()][
                -1
            ] == "first: match 3 > 2; response calls tool 'send_email'"

    asyncio.run(main())


def test_a_counted_tool_rule_mid_stream_is_skipped_and_says_why(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with shared(redis_server, TOOL_RULE) as e:
            exchange = ex(stream=True, content_type="text/event-stream")
            plan = e.plan(exchange, OpenAIFormat())
            editor = plan.stream_editor()
            assert editor is not None
            text, call, _ = openai_events("send_email")
            editor.on_event(text)
            assert editor.on_event(call) == [call.raw]
            [d] = e.decisions.recent()
            assert d.outcome == "skipped_state_unavailable" and "mid-stream" in d.reason

    asyncio.run(main())


def test_only_rules_whose_fault_acts_on_the_answer_are_decided_in_flight() -> None:
    """A fleet's store may decide a rule while the request travels only when its fault cannot act before the
    request goes: answer it, hold it, edit it or choose how its answer is paced."""
    faults = {
        "first-byte": {"type": "latency", "delay_ms": 1, "phase": "first_byte"},
        "request-latency": {"type": "latency", "delay_ms": 1},
        "paced-events": {"type": "latency", "delay_ms": 1, "phase": "events"},
        "bad-json": {"type": "malformed_json"},
        "cut-clean": {"type": "truncate", "at_fraction": 0.5},
        "cut-reset": {"type": "truncate", "at_fraction": 0.5, "close": "reset"},
        "error": {"type": "http_error", "status": 503},
        "reset": {"type": "reset"},
        "edit-request": {"type": "mutate", "kind": "reorder"},
    }
    rules = [{"name": n, "match": {"model": "gpt-*"}, "fault": f, "schedule": {"every": 2}} for n, f in faults.items()]
    quota = {"name": "quota", "match": {"model": "gpt-*"}, "schedule": {"quota": {"requests_per_min": 5}}}
    in_flight = {r.name: r.in_flight for r in engine(*rules, quota).rules}
    assert in_flight == {
        "first-byte": True,
        "request-latency": False,
        "paced-events": False,
        "bad-json": True,
        "cut-clean": True,
        "cut-reset": False,
        "error": False,
        "reset": False,
        "edit-request": False,
        "quota": False,
    }
