"""A fault that fires but cannot act is recorded as skipped with its reason, never as injected."""

from __future__ import annotations

import asyncio
import json

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire import by_provider
from tests.faults.engine_support import WIRE, engine, ex

JSON_HEADERS = {"content-type": "application/json"}


@pytest.mark.parametrize("off_loop", [False, True])
def test_a_body_fault_on_a_body_it_cannot_edit_is_skipped_not_injected(off_loop: bool) -> None:
    e = engine(
        {"name": "bad-json", "fault": {"type": "malformed_json"}},
        {"name": "tag", "fault": {"type": "tag", "text": "+"}},
    )
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    assert [f.rule for f in exchange.faults] == ["bad-json", "tag"]
    if off_loop:  # as the proxy edits a large body: the edits in a worker thread, the records on the loop
        edited = asyncio.run(plan.edit_body_off_loop(b"<html>", dict(JSON_HEADERS)))
    else:
        edited = plan.edit_body(b"<html>", dict(JSON_HEADERS))
    assert edited == b"<html>+"  # the other fault still acts
    assert [f.rule for f in exchange.faults] == ["tag"]
    [skipped] = exchange.faults_skipped
    assert skipped.rule == "bad-json" and skipped.params["skipped"] == "the body is not JSON"
    outcomes = [(d.rule, d.outcome, d.reason) for d in e.decisions.recent()]
    assert outcomes[-1] == ("bad-json", "skipped_not_applicable", "the body is not JSON")
    assert e.decisions.counts["skipped_not_applicable"] == 1
    assert e.guard.snapshot() == {}
    assert [f.rule for f in plan.fired] == ["tag"]  # later phases no longer ask the skipped fault


def test_deeply_nested_json_degrades_cleanly() -> None:
    e = engine({"name": "bad-json", "fault": {"type": "malformed_json", "target": "tool_arguments"}})
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    deep = b"[" * 100_000 + b"]" * 100_000
    assert plan.edit_body(deep, dict(JSON_HEADERS)) == deep
    assert exchange.faults == [] and exchange.faults_skipped[0].params["skipped"] == "JSON nested too deeply to edit"
    assert e.guard.snapshot() == {}


def test_skip_body_faults_leaves_faults_that_need_no_body() -> None:
    e = engine(
        {"name": "slow", "fault": {"type": "latency", "delay_ms": 1}},
        {"name": "inject", "fault": {"type": "inject", "text": "x"}},
    )
    exchange = ex()
    plan = e.plan(exchange, WIRE)
    plan.skip_body_faults("decodes to over 4 bytes")
    assert [f.rule for f in exchange.faults] == ["slow"]
    assert [(f.rule, f.params["skipped"]) for f in exchange.faults_skipped] == [("inject", "decodes to over 4 bytes")]
    assert json.loads(plan.edit_body(b'{"a": "b"}', dict(JSON_HEADERS))) == {"a": "b"}  # inject no longer edits


ARGS_AND_TEXT = (
    {"name": "bad-args", "fault": {"type": "malformed_json", "target": "tool_arguments"}},
    {"name": "evil", "fault": {"type": "inject", "target": "completion", "text": "x"}},
)
CHAT = {"choices": [{"message": {"content": "Hi", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}]}


def test_a_wire_format_that_knows_no_places_skips_argument_and_text_faults_on_streams() -> None:
    e = engine(*ARGS_AND_TEXT)
    exchange = ex(content_type="text/event-stream", stream=True)
    plan = e.plan(exchange, WIRE)  # WIRE implements none of the hooks that locate arguments or text
    assert plan.stream_editor() is None
    assert exchange.faults == []
    assert [(f.rule, f.params["skipped"]) for f in exchange.faults_skipped] == [
        ("bad-args", "the openai wire format locates no tool-call arguments in streams"),
        ("evil", "the openai wire format locates no assistant text in streams"),
    ]
    assert e.decisions.counts["skipped_not_applicable"] == 2


def test_a_wire_format_that_knows_no_places_skips_argument_and_text_faults_on_whole_bodies() -> None:
    body = json.dumps(CHAT).encode()
    e = engine(*ARGS_AND_TEXT)
    exchange = ex()
    assert e.plan(exchange, WIRE).edit_body(body, dict(JSON_HEADERS)) == body
    assert [f.params["skipped"] for f in exchange.faults_skipped] == [
        "nothing to change for target tool_arguments",
        "no place for the text (completion)",
    ]
    # The built-in OpenAI format knows both places: the same rules act and stay injected.
    e = engine(*ARGS_AND_TEXT)
    exchange = ex()
    out = json.loads(e.plan(exchange, by_provider("openai")).edit_body(body, dict(JSON_HEADERS)))
    assert out["choices"][0]["message"]["content"] == "Hi\n\nx"
    assert out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] != "{}"
    assert [f.rule for f in exchange.faults] == ["bad-args", "evil"] and exchange.faults_skipped == []


def _handshake(i: int) -> Exchange:
    return ex(i, path="/v1/realtime", request_headers={"upgrade": "WebSocket", "connection": "Upgrade"})


def test_a_websocket_handshake_is_not_a_match_for_a_fault_that_needs_a_body() -> None:
    e = engine(
        {"name": "cut-once", "fault": {"type": "truncate", "at_bytes": 1}, "schedule": {"first": 1}},
        {"name": "drop-mid-body", "fault": {"type": "reset", "phase": "mid_body", "after_bytes": 1}},
        {"name": "refuse", "fault": {"type": "http_error", "status": 429}},
    )
    handshake = _handshake(0)
    plan = e.plan(handshake, WIRE)
    assert [f.rule for f in plan.fired] == ["refuse"]  # answering instead of the 101 is a real fault
    outcomes = [(d.rule, d.outcome) for d in e.decisions.recent()]
    assert outcomes == [
        ("cut-once", "skipped_not_applicable"),
        ("drop-mid-body", "skipped_not_applicable"),
        ("refuse", "fired"),
    ]
    assert "WebSocket handshake" in e.decisions.recent()[0].reason
    # Not counted as the rule's first match: the next real exchange gets the cut.
    later = ex(1)
    e.plan(later, WIRE)
    assert [f.rule for f in later.faults] == ["cut-once", "drop-mid-body", "refuse"]
