"""The engine: response-stage tool rules, and reproducible decisions however sessions interleave."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire.openai import OpenAIFormat
from brownout.faults.base import Respond
from brownout.faults.decisions import DecisionLog
from brownout.faults.plan import Plan
from tests.faults.engine_support import (
    WIRE,
    Clock,
    engine,
    ex,
    openai_events,
    run,
)


def _calling(tool: str) -> bytes:
    call = {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}).encode()


def _edit_body(plan: Plan, body: bytes, off_loop: bool) -> bytes:
    """The proxy edits a large body with edit_body_off_loop (work in a worker thread), a small one with edit_body."""
    return asyncio.run(plan.edit_body_off_loop(body, {})) if off_loop else plan.edit_body(body, {})


@pytest.mark.parametrize("off_loop", [False, True])
def test_response_stage_tool_rule_on_a_buffered_body(off_loop: bool) -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}})
    exchange = ex()
    plan = e.plan(exchange, OpenAIFormat())
    assert not plan.empty and plan.fired == [] and plan.wants_body()
    assert e.decisions.recent() == []  # undecided until the response is known
    # The body is edited before the proxy parses it: the plan reads the tool calls from the body.
    assert _edit_body(plan, _calling("send_email"), off_loop) == _calling("send_email") + b"!"
    [d] = e.decisions.recent()
    assert d.outcome == "fired" and "send_email" in d.reason
    assert [f.rule for f in exchange.faults] == ["t"]


@pytest.mark.parametrize("off_loop", [False, True])
def test_response_stage_rule_without_the_tool_never_fires(off_loop: bool) -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag"}})
    exchange = ex()
    plan = e.plan(exchange, OpenAIFormat())
    assert _edit_body(plan, _calling("lookup"), off_loop) == _calling("lookup") and exchange.faults == []
    plan.finish()


def test_response_stage_tool_rule_joins_a_stream_when_the_call_appears() -> None:
    """Decided from upstream's events as the editor meets them: a chunk may hold the call and its
    arguments, and the proxy parses the record only after the whole chunk is edited."""
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}})
    exchange = ex(stream=True, content_type="text/event-stream")
    plan = e.plan(exchange, OpenAIFormat())
    assert not plan.wants_body()
    editor = plan.stream_editor()
    assert editor is not None
    text, call, args = openai_events("send_email")
    assert editor.on_event(text) == [text.raw]
    tagged = [[ev.raw.removesuffix(b"\n\n") + b"!\n\n"] for ev in (call, args)]
    assert [editor.on_event(call), editor.on_event(args)] == tagged
    assert exchange.tool_calls == [] and len(exchange.faults) == 1  # the record is the proxy's to parse


def test_a_stream_calling_another_tool_leaves_the_rule_waiting() -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}})
    exchange = ex(stream=True, content_type="text/event-stream")
    plan = e.plan(exchange, OpenAIFormat())
    editor = plan.stream_editor()
    assert editor is not None
    events = openai_events("lookup")
    assert [editor.on_event(ev) for ev in events] == [[ev.raw] for ev in events]
    assert exchange.faults == [] and len(plan.deferred) == 1


def test_tool_known_at_request_time_fires_before_upstream() -> None:
    e = engine({"name": "t", "match": {"tool": "search"}, "fault": {"type": "http_error", "status": 500}})
    exchange = ex(provider="mcp", operation="tools/call", tool_name="search")
    assert isinstance(run(e.plan(exchange, WIRE).before_upstream()), Respond)


# --- reproducibility ------------------------------------------------------------------------

REPRO_RULES = (
    {"name": "p30", "match": {"provider": "openai"}, "fault": {"type": "tag"}, "schedule": {"probability": 0.3}},
    {"name": "every3", "fault": {"type": "tag"}, "schedule": {"every": 3, "after": 1, "scope": "session"}},
    {
        "name": "capped",
        "fault": {"type": "tag"},
        "schedule": {"probability": 0.5, "max_injections": 4, "scope": "session"},
    },
    {
        "name": "gpt",
        "match": {"model": "gpt-4o*"},
        "fault": {"type": "latency", "delay_ms": 100, "jitter_ms": 50},
        "schedule": {"first": 10, "scope": "session"},
    },
)


def traffic(order_seed: int) -> list[Exchange]:
    """1,000 exchanges in 20 sessions (50 each, fixed per-session order), interleaved at random."""
    queues = {
        s: [ex(i, session=f"sess-{s}", model=("gpt-4o" if i % 2 else "o3")) for i in range(50)] for s in range(20)
    }
    out: list[Exchange] = []
    rnd = random.Random(order_seed)
    while queues:
        s = rnd.choice(sorted(queues))
        out.append(queues[s].pop(0))
        if not queues[s]:
            del queues[s]
    return out


def decision_log(order_seed: int, seed: int = 42) -> list[tuple[Any, ...]]:
    """The sorted decision log; the global-scope rule's counter (arrival order across sessions)
    is left out, as it is the only interleaving-dependent value by definition."""
    e = engine(*REPRO_RULES, seed=seed, decision_log=DecisionLog(ring_size=None))
    rows: list[tuple[Any, ...]] = []
    e.decisions.add_sink(
        lambda d: rows.append(
            (d.exchange_id, d.session, d.rule, d.outcome, d.reason, d.index, None if d.rule == "p30" else d.counter)
        )
    )
    faults_seen: list[tuple[Any, ...]] = []
    for exchange in traffic(order_seed):
        plan = e.plan(exchange, WIRE)
        run(plan.before_upstream())
        plan.finish()
        faults_seen += [(exchange.id, f.rule, tuple(sorted(f.params.items()))) for f in exchange.faults]
    rows += [("fault", *f) for f in faults_seen]
    return sorted(rows)


def test_same_seed_same_decisions_however_sessions_interleave() -> None:
    assert traffic(1) != traffic(2)
    a, b, c = decision_log(1), decision_log(1), decision_log(2)
    assert a == b == c
    assert len([r for r in a if r[0] != "fault"]) == 1000 * 2 + 1000 + 500  # p30+every3+capped, gpt
    outcomes = {r[3] for r in a if r[0] != "fault"}
    assert {"fired", "skipped_probability", "skipped_schedule", "skipped_blast_radius"} <= outcomes
    # the faults' own randomness (jitter, tag rolls) is reproducible too
    assert any(dict(r[3]).get("delay_s") not in (None, 0.1) for r in a if r[0] == "fault")
    assert decision_log(1, seed=43) != a


def test_same_order_gives_a_byte_identical_jsonl_log(tmp_path: Any) -> None:
    # The decision log file as production writes it: the exporters' JSONL sink on the engine's log.
    from brownout.exporters.config import ExportersConfig
    from brownout.exporters.hub import Exporters

    texts = []
    for run_no in range(2):
        path = tmp_path / f"run{run_no}.jsonl"
        config = ExportersConfig.model_validate(
            {"prometheus": {"enabled": False}, "jsonl": {"decisions_path": str(path)}}
        )
        hub = Exporters(config)
        e = engine(*REPRO_RULES)
        e.decisions.add_sink(hub.on_decision)
        for exchange in traffic(7):
            e.plan(exchange, WIRE).finish()
        hub.shutdown()
        texts.append(path.read_text())
    assert texts[0] == texts[1] and len(texts[0].splitlines()) == 3500


def test_quota_429_uses_the_providers_real_headers() -> None:
    from brownout.core.wire.openai import OpenAIFormat

    clock = Clock()
    e = engine({"name": "q", "schedule": {"quota": {"requests_per_min": 1}}}, clock=clock)
    e.plan(ex(0), OpenAIFormat()).finish()
    clock.t += 20
    action = run(e.plan(ex(1), OpenAIFormat()).before_upstream())
    assert isinstance(action, Respond) and action.status == 429
    assert action.headers["retry-after"] == "40" and "x-ratelimit-remaining-requests" in action.headers
    assert json.loads(action.body)["error"]["code"] == "rate_limit_exceeded"
