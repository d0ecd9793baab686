"""The engine: plans, phases, containment, pause/reload/status, quotas, and reproducibility."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any, Literal

import pytest

import faults
from faults.base import CLOSE, Fault, FaultContext, FaultParams, Respond, StreamEditor, StreamTiming
from faults.decisions import DecisionLog
from faults.engine import FaultEngine
from faults.plan import EMPTY_PLAN, merge_timings
from proxy.config import BrownoutConfig
from proxy.exchange import Exchange, ToolCall, Usage
from proxy.wire.base import RequestInfo, StreamEvent, StreamParser, WireFormat
from proxy.wire.framing import SSEFramer

T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, s: float) -> None:
        self.calls.append(s)


class Wire(WireFormat):
    """Just enough provider: an error_response whose bytes show what was asked."""

    provider = "openai"

    def recognise(self, req: RequestInfo) -> str | None:
        return None

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        pass

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        raise NotImplementedError

    def error_response(self, status: int, error_type: str | None = None, message: str | None = None,
                       retry_after_s: float | None = None, exchange: Exchange | None = None) -> tuple[int, dict[str, str], bytes]:
        headers = {"content-type": "application/json"}
        if retry_after_s is not None:
            headers["retry-after"] = str(retry_after_s)
        return status, headers, json.dumps({"error": {"type": error_type, "code": status}}).encode()


# Stand-in faults: behaviour the tests control, registered only for this module's tests.
class TagParams(FaultParams):
    type: Literal["tag"]
    text: str = "!"
    close_after: int | None = None


class TagFault(Fault):
    """Appends text to bodies and stream events; records a random number from its RNG."""

    type = "tag"
    Params = TagParams
    params: TagParams

    async def before_upstream(self, ctx: FaultContext) -> None:
        ctx.extra["roll"] = ctx.rng.random()

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        return body + self.params.text.encode()

    def stream_editor(self, ctx: FaultContext) -> StreamEditor:
        return _TagEditor(self.params)


class _TagEditor(StreamEditor):
    def __init__(self, p: TagParams) -> None:
        self.p, self.n = p, 0

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        self.n += 1
        if self.p.close_after is not None and self.n > self.p.close_after:
            return CLOSE
        return [f"data: {event.data}{self.p.text}\n\n".encode()]

    def on_end(self) -> list[bytes]:
        return [f"data: end{self.p.text}\n\n".encode()]


class BoomParams(FaultParams):
    type: Literal["boom"]


class BoomFault(Fault):
    """Raises in every phase."""

    type = "boom"
    Params = BoomParams

    async def before_upstream(self, ctx: FaultContext) -> None:
        raise RuntimeError("boom")

    async def on_response_headers(self, ctx: FaultContext, headers: dict[str, str]) -> None:
        raise RuntimeError("boom")

    def wants_body(self, ctx: FaultContext) -> bool:
        raise RuntimeError("boom")

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        raise RuntimeError("boom")

    def stream_editor(self, ctx: FaultContext) -> StreamEditor:
        class Bad(StreamEditor):
            def on_event(self, event: StreamEvent) -> list[bytes] | str:
                raise RuntimeError("boom")

        return Bad()

    def stream_timing(self, ctx: FaultContext) -> StreamTiming:
        raise RuntimeError("boom")


@pytest.fixture(autouse=True)
def standins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(faults.REGISTRY, "tag", TagFault)
    monkeypatch.setitem(faults.REGISTRY, "boom", BoomFault)
    yield


def config(*rules: dict[str, Any], seed: int = 42) -> BrownoutConfig:
    return BrownoutConfig.model_validate({"seed": seed, "rules": list(rules)})


def engine(*rules: dict[str, Any], seed: int = 42, **kw: Any) -> FaultEngine:
    kw.setdefault("clock", Clock())
    kw.setdefault("sleep", Sleeps())
    return FaultEngine(config(*rules, seed=seed), **kw)


def ex(i: int = 0, session: str = "s1", **kw: Any) -> Exchange:
    base: dict[str, Any] = {"provider": "openai", "operation": "chat", "path": "/v1/chat/completions", "model": "gpt-4o"}
    base.update(kw)
    return Exchange(id=f"{session}-{i}", session=session, **base)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


WIRE = Wire()


def test_no_match_is_the_shared_empty_plan_and_logs_nothing() -> None:
    e = engine({"name": "r", "match": {"provider": "anthropic"}, "fault": {"type": "reset"}})
    plan = e.plan(ex(), WIRE)
    assert plan is EMPTY_PLAN and plan.empty and plan.records == []
    assert e.decisions.recent() == []
    assert run(plan.before_upstream()) is None and plan.stream_editor() is None and plan.stream_timing() is None
    plan.finish()
    assert engine().plan(ex(), WIRE) is EMPTY_PLAN


def test_http_error_fires_with_the_providers_response_and_is_recorded() -> None:
    e = engine({"name": "r429", "fault": {"type": "http_error", "status": 429, "retry_after_s": 2}})
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    assert not plan.empty
    action = run(plan.before_upstream())
    assert isinstance(action, Respond) and action.status == 429 and action.headers["retry-after"] == "2.0"
    [record] = exchange.faults
    assert (record.rule, record.fault, record.params["status"], record.at) == ("r429", "http_error", 429, T0)
    assert plan.records == [record]
    [d] = e.decisions.recent()
    assert (d.exchange_id, d.rule, d.outcome, d.counter, d.fault) == ("s1-0", "r429", "fired", 1, "http_error")


def test_latencies_add_up_and_the_first_answer_wins() -> None:
    sleeps = Sleeps()
    e = engine(
        {"name": "slow", "fault": {"type": "latency", "delay_ms": 100}},
        {"name": "slower", "fault": {"type": "latency", "delay_ms": 200}},
        {"name": "err", "fault": {"type": "http_error", "status": 503}},
        {"name": "never", "fault": {"type": "latency", "delay_ms": 999}},
        sleep=sleeps,
    )
    exchange = ex()
    action = run(e.plan(exchange, WIRE).before_upstream())
    assert isinstance(action, Respond) and action.status == 503
    assert sleeps.calls == [0.1, 0.2]
    assert [f.rule for f in exchange.faults] == ["slow", "slower", "err", "never"]
    assert exchange.faults[0].params["delay_s"] == 0.1  # sampled values land on the record


def test_pause_resume_and_rule_toggle() -> None:
    e = engine({"name": "r", "fault": {"type": "reset"}})
    e.pause()
    assert e.plan(ex(0), WIRE).empty
    assert e.decisions.recent()[-1].outcome == "skipped_paused"
    e.resume()
    assert not e.plan(ex(1), WIRE).empty
    assert e.decisions.recent()[-1].counter == 1  # paused matches did not advance counters
    e.set_rule_enabled("r", False)
    assert e.plan(ex(2), WIRE) is EMPTY_PLAN
    assert e.active_rules() == {"r": False}
    with pytest.raises(KeyError, match="no rule named 'x'"):
        e.set_rule_enabled("x", True)


def test_reload_keeps_counters_of_unchanged_names() -> None:
    e = engine({"name": "keep", "fault": {"type": "reset"}, "schedule": {"first": 2}}, {"name": "gone", "fault": {"type": "reset"}})
    for i in range(2):
        e.plan(ex(i), WIRE)
    e.pause()
    e.reload(config({"name": "keep", "fault": {"type": "hang"}, "schedule": {"first": 2}}, {"name": "new", "fault": {"type": "reset"}}))
    assert e.paused
    e.resume()
    exchange = ex(9)
    e.plan(exchange, WIRE)
    assert [f.rule for f in exchange.faults] == ["new"]  # keep's first 2 were used before the reload
    st = {r["name"]: r for r in e.status()["rules"]}
    assert st["keep"]["matches"] == 3 and st["new"]["matches"] == 1 and "gone" not in st


def test_status_snapshot() -> None:
    clock = Clock()
    e = engine({"name": "r", "fault": {"type": "reset"}, "schedule": {"start_s": 10}}, clock=clock)
    e.plan(ex(), WIRE)
    st = e.status()
    assert st["paused"] is False and st["seed"] == 42
    assert st["rules"][0] == {"name": "r", "fault": "reset", "enabled": True, "active": False, "matches": 1,
                              "injections": 0, "in_flight": 0, "sessions": 1}
    assert st["decisions"]["skipped_schedule"] == 1
    clock.t += 10
    assert e.active_rules() == {"r": True}
    json.dumps(st)


def test_max_concurrent_under_concurrency() -> None:
    e = engine({"name": "r", "fault": {"type": "latency", "delay_ms": 50}, "schedule": {"max_concurrent": 2}},
               sleep=asyncio.sleep)

    async def one(i: int) -> bool:
        plan = e.plan(ex(i, session=f"s{i}"), WIRE)
        try:
            await plan.before_upstream()
            return not plan.empty
        finally:
            plan.finish()
            plan.finish()

    async def main() -> list[bool]:
        first = await asyncio.gather(*(one(i) for i in range(5)))
        return [*first, await one(99)]

    results = run(main())
    assert results == [True, True, False, False, False, True]
    assert e.status()["rules"][0]["in_flight"] == 0


def test_quota_answers_429_with_retry_after_until_the_window_resets() -> None:
    clock = Clock()
    e = engine({"name": "q", "schedule": {"quota": {"requests_per_min": 2}}}, clock=clock)
    answers = []
    for i in range(3):
        clock.t = T0 + 10 + i
        plan = e.plan(ex(i), WIRE)
        answers.append(run(plan.before_upstream()))
        plan.finish()
    assert answers[:2] == [None, None]
    assert isinstance(answers[2], Respond) and answers[2].status == 429
    assert answers[2].headers["retry-after"] == "48"
    clock.t = T0 + 60
    assert e.plan(ex(5), WIRE).fired == []


def test_token_quota_counts_usage_at_finish() -> None:
    e = engine({"name": "q", "match": {"provider": "openai"}, "schedule": {"quota": {"tokens_per_min": 100}}})
    exchange = ex(0)
    plan = e.plan(exchange, WIRE)
    assert not plan.empty and plan.fired == []  # nothing fired, but finish() must count tokens
    exchange.usage = Usage(input_tokens=80, output_tokens=30)
    plan.finish()
    plan.finish()
    second = ex(1)
    assert isinstance(run(e.plan(second, WIRE).before_upstream()), Respond)
    assert second.faults[0].fault == "quota"


def test_quota_with_a_custom_fault() -> None:
    e = engine({"name": "q", "fault": {"type": "http_error", "status": 429, "error_type": "insufficient_quota"},
                "schedule": {"quota": {"requests_per_min": 1}}})
    e.plan(ex(0), WIRE).finish()
    action = run(e.plan(ex(1), WIRE).before_upstream())
    assert isinstance(action, Respond) and b"insufficient_quota" in action.body


def test_a_fault_that_raises_is_contained_and_counted() -> None:
    e = engine({"name": "bad", "fault": {"type": "boom"}}, {"name": "good", "fault": {"type": "tag", "text": "+"}})
    plan = e.plan(ex(), WIRE)
    assert run(plan.before_upstream()) is None
    run(plan.on_response_headers(200, {}))
    assert plan.wants_body() is False
    assert plan.edit_body(b"body", {}) == b"body+"
    assert plan.stream_timing() is None
    editor = plan.stream_editor()
    assert editor is not None
    assert editor.on_event(StreamEvent(raw=b"data: a\n\n", data="a")) == [b"data: a+\n\n"]
    assert editor.on_event(StreamEvent(raw=b"data: b\n\n", data="b")) == [b"data: b+\n\n"]
    assert e.internal_errors["fault:boom"] == 6  # one per phase; the broken editor dropped out after one


def test_fault_construction_errors_are_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fragile(TagFault):
        def __init__(self, params: FaultParams) -> None:
            raise ValueError("bad init")

    e = engine({"name": "r", "fault": {"type": "tag"}})
    monkeypatch.setattr(e.rules[0], "fault_cls", Fragile)
    exchange = ex()
    assert e.plan(exchange, WIRE).fired == [] and exchange.faults == []
    assert e.internal_errors["fault:tag"] == 1


def test_stream_editors_chain_in_rule_order_and_close() -> None:
    e = engine({"name": "a", "fault": {"type": "tag", "text": "1"}},
               {"name": "b", "fault": {"type": "tag", "text": "2", "close_after": 2}})
    editor = e.plan(ex(content_type="text/event-stream"), WIRE).stream_editor()
    assert editor is not None
    events = SSEFramer().feed(b"data: x\n\ndata: y\n\ndata: z\n\n")
    assert editor.on_event(events[0]) == [b"data: x12\n\n"]
    assert editor.on_event(events[1]) == [b"data: y12\n\n"]
    assert editor.on_event(events[2]) == CLOSE
    assert editor.on_end() == []


def test_on_end_tails_pass_through_later_editors() -> None:
    e = engine({"name": "a", "fault": {"type": "tag", "text": "1"}}, {"name": "b", "fault": {"type": "tag", "text": "2"}})
    editor = e.plan(ex(), WIRE).stream_editor()
    assert editor is not None and editor.on_end() == [b"data: end12\n\n", b"data: end2\n\n"]


def test_merge_timings() -> None:
    a = StreamTiming(pause_after_events=3, pause_s=1.0, bytes_per_s=1000)
    b = StreamTiming(pause_after_events=3, pause_s=0.5, reset_after_bytes=50)
    c = StreamTiming(pause_after_events=7, pause_s=9.0, bytes_per_s=10, reset_after_bytes=10)
    assert merge_timings([]) is None and merge_timings([a]) is a
    m = merge_timings([a, b, c])
    assert m == StreamTiming(pause_after_events=3, pause_s=1.5, bytes_per_s=10, reset_after_bytes=10)


def test_response_stage_tool_rule_on_a_buffered_body() -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}})
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    assert not plan.empty and plan.fired == [] and plan.wants_body()
    assert e.decisions.recent() == []  # undecided until the response is known
    exchange.tool_calls = [ToolCall(name="send_email")]
    assert plan.edit_body(b"{}", {}) == b"{}!"
    [d] = e.decisions.recent()
    assert d.outcome == "fired" and "send_email" in d.reason
    assert [f.rule for f in exchange.faults] == ["t"]


def test_response_stage_rule_without_the_tool_never_fires() -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag"}})
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    exchange.tool_calls = [ToolCall(name="lookup")]
    assert plan.edit_body(b"{}", {}) == b"{}" and exchange.faults == []
    plan.finish()


def test_response_stage_tool_rule_joins_a_stream_when_the_call_appears() -> None:
    e = engine({"name": "t", "match": {"tool": "send_*"}, "fault": {"type": "tag", "text": "!"}})
    exchange = ex(stream=True, content_type="text/event-stream")
    plan = e.plan(exchange, WIRE)
    assert not plan.wants_body()
    editor = plan.stream_editor()
    assert editor is not None
    first, second, third = SSEFramer().feed(b"data: a\n\ndata: b\n\ndata: c\n\n")
    assert editor.on_event(first) == [first.raw]
    exchange.tool_calls.append(ToolCall(name="send_email"))  # the parser saw the call in `second`
    assert editor.on_event(second) == [b"data: b!\n\n"]
    assert editor.on_event(third) == [b"data: c!\n\n"]
    assert len(exchange.faults) == 1


def test_tool_known_at_request_time_fires_before_upstream() -> None:
    e = engine({"name": "t", "match": {"tool": "search"}, "fault": {"type": "http_error", "status": 500}})
    exchange = ex(provider="mcp", operation="tools/call", tool_name="search")
    assert isinstance(run(e.plan(exchange, WIRE).before_upstream()), Respond)


# --- reproducibility ------------------------------------------------------------------------

REPRO_RULES = (
    {"name": "p30", "match": {"provider": "openai"}, "fault": {"type": "tag"}, "schedule": {"probability": 0.3}},
    {"name": "every3", "fault": {"type": "tag"}, "schedule": {"every": 3, "after": 1, "scope": "session"}},
    {"name": "capped", "fault": {"type": "tag"},
     "schedule": {"probability": 0.5, "max_injections": 4, "scope": "session"}},
    {"name": "gpt", "match": {"model": "gpt-4o*"}, "fault": {"type": "latency", "delay_ms": 100, "jitter_ms": 50},
     "schedule": {"first": 10, "scope": "session"}},
)


def traffic(order_seed: int) -> list[Exchange]:
    """1,000 exchanges in 20 sessions (50 each, fixed per-session order), interleaved at random."""
    queues = {s: [ex(i, session=f"sess-{s}", model=("gpt-4o" if i % 2 else "o3")) for i in range(50)] for s in range(20)}
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
    e.decisions.add_sink(lambda d: rows.append(
        (d.exchange_id, d.session, d.rule, d.outcome, d.reason, d.index, None if d.rule == "p30" else d.counter)))
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
    texts = []
    for run_no in range(2):
        path = tmp_path / f"run{run_no}.jsonl"
        log = DecisionLog(path=path)
        e = engine(*REPRO_RULES, decision_log=log)
        for exchange in traffic(7):
            e.plan(exchange, WIRE).finish()
        log.close()
        texts.append(path.read_text())
    assert texts[0] == texts[1] and len(texts[0].splitlines()) == 3500


def test_quota_429_uses_the_providers_real_headers() -> None:
    from proxy.wire.openai import OpenAIFormat

    clock = Clock()
    e = engine({"name": "q", "schedule": {"quota": {"requests_per_min": 1}}}, clock=clock)
    e.plan(ex(0), OpenAIFormat()).finish()
    clock.t += 20
    action = run(e.plan(ex(1), OpenAIFormat()).before_upstream())
    assert isinstance(action, Respond) and action.status == 429
    assert action.headers["retry-after"] == "40" and "x-ratelimit-remaining-requests" in action.headers
    assert json.loads(action.body)["error"]["code"] == "rate_limit_exceeded"
