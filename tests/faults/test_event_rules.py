"""Rules on the events of realtime sessions: match.event (a glob on the event type) and match.direction,
decided per event with the rule's schedule and seed, never at the upgrade request; and the config errors
that keep a rule from meaning nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from brownout.faults.engine import FaultEngine
from tests.faults.engine_support import config, engine
from tests.faults.realtime_support import OPENAI, event, session

DELTA = {"type": "response.output_text.delta", "response_id": "resp_1", "delta": "x"}


def _fired(e: FaultEngine, doc: dict[str, Any], direction: str = "server", name: str = "s1") -> list[str]:
    codec = session(name=name)
    ev = event(codec, doc, direction)
    return [f.rule for f in e.plan_event(ev.generation.exchange if ev.generation else codec.session, OPENAI, ev)]


def test_event_glob_and_direction_pick_the_events() -> None:
    e = engine(
        {"name": "deltas", "match": {"event": "response.*.delta"}, "fault": {"type": "drop"}},
        {"name": "client", "match": {"direction": "client"}, "fault": {"type": "drop"}},
        {"name": "openai-only", "match": {"provider": "gemini_live", "event": "*"}, "fault": {"type": "drop"}},
    )
    assert _fired(e, DELTA) == ["deltas"]
    assert _fired(e, {"type": "response.done", "response": {"id": "resp_1"}}) == []
    assert _fired(e, {"type": "response.create"}, "client") == ["client"]


def test_an_event_rule_never_fires_at_the_upgrade_request() -> None:
    e = engine({"name": "drop-all", "match": {"event": "*"}, "fault": {"type": "drop"}})
    codec = session()
    assert e.plan(codec.session, OPENAI).empty and not e.decisions.recent()


def test_event_decisions_are_seeded_and_scheduled() -> None:
    rules = [
        {"name": "coin", "match": {"event": "response.output_text.delta"}, "fault": {"type": "drop"},
         "schedule": {"probability": 0.5}},
        {"name": "third", "match": {"event": "response.output_text.delta"}, "fault": {"type": "drop"},
         "schedule": {"every": 3}},
    ]  # fmt: skip

    def outcomes(seed: int) -> list[list[str]]:
        e = engine(*rules, seed=seed)
        return [_fired(e, DELTA) for _ in range(12)]

    assert outcomes(1) == outcomes(1)
    assert outcomes(1) != outcomes(2)
    assert [("third" in fired) for fired in outcomes(1)] == [i % 3 == 2 for i in range(12)]


def test_session_scope_counts_events_per_session() -> None:
    e = engine({"name": "first", "match": {"event": "response.*"}, "fault": {"type": "drop"},
                "schedule": {"first": 1, "scope": "session"}})  # fmt: skip
    assert _fired(e, DELTA, name="a") == ["first"]
    assert _fired(e, DELTA, name="a") == []
    assert _fired(e, DELTA, name="b") == ["first"]


def test_a_paused_engine_fires_no_event_rule() -> None:
    e = engine({"name": "d", "match": {"event": "*"}, "fault": {"type": "drop"}})
    e.pause()
    assert _fired(e, DELTA) == [] and e.decisions.recent()[-1].outcome == "skipped_paused"


def test_the_tool_glob_on_events_matches_the_tool_the_event_calls() -> None:
    e = engine({"name": "t", "match": {"event": "response.function_call_arguments.done", "tool": "get_*"},
                "fault": {"type": "malformed_json", "target": "tool_arguments"}})  # fmt: skip
    done = {"type": "response.function_call_arguments.done", "response_id": "resp_1", "name": "get_weather"}
    assert _fired(e, done) == ["t"]
    assert _fired(e, {**done, "name": "send_mail"}) == []


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"match": {"event": "*"}, "schedule": {"quota": {"requests_per_min": 1}}}, "quota counts requests"),
        (
            {"match": {"event": "*"}, "fault": {"type": "stall", "pause_ms": 10, "after_events": 1}},
            "stall cannot act on WebSocket events",
        ),
        ({"fault": {"type": "drop"}}, "give match.event"),
        ({"fault": {"type": "rate_limits"}}, "give match.event"),
        ({"fault": {"type": "close"}}, "give match.event"),
        ({"match": {"event": "*"}, "fault": {"type": "http_error", "status": 500}}, "needs mid_stream: true"),
        ({"match": {"event": "*"}, "fault": {"type": "truncate", "at_bytes": 3}}, "with after_events"),
        ({"match": {"event": "*"}, "fault": {"type": "malformed_json"}}, "target: tool_arguments"),
        ({"match": {"event": "*"}, "fault": {"type": "reset", "phase": "mid_body", "after_bytes": 1}}, "no phase"),
        ({"match": {"event": "*"}, "fault": {"type": "close", "after_s": 5}}, "by its age"),
        ({"match": {"direction": "sideways"}, "fault": {"type": "drop"}}, "direction"),
    ],
)
def test_rules_that_could_not_act_are_config_errors(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        config({"name": "r", **rule})


def test_the_stream_faults_a_handshake_cannot_take_still_load_without_events() -> None:
    config({"name": "cap", "fault": {"type": "close", "after_s": 60}})  # a session cap: decided at the upgrade
    config({"name": "late", "match": {"provider": "openai_realtime"}, "fault": {"type": "latency", "delay_ms": 5}})
