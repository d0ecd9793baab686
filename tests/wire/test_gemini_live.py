"""Gemini Live codec: recognition, generations (text turns, tool calls), resumption, both spellings of client
messages, and the provider's bytes for faults checked against google-genai's own message model."""

from __future__ import annotations

import json

import pytest
from google.genai import types

from brownout.core.wire import BUILTIN
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.gemini_live import GeminiLiveFormat
from brownout.core.wire.realtime import CloseSpec, WsOut
from tests.wire.realtime_helpers import Clock, feed, session_for

FMT = GeminiLiveFormat()
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
DECL = {"name": "get_weather", "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}


def test_the_upgrade_is_recognised() -> None:
    req = RequestInfo("GET", "generativelanguage.googleapis.com", PATH, "key=x", {"upgrade": "websocket"}, b"")
    assert BUILTIN.detect(req) == (BUILTIN.by_provider("gemini_live"), "realtime_session")
    constrained = PATH.replace("BidiGenerateContent", "BidiGenerateContentConstrained")
    assert (
        BUILTIN.detect(RequestInfo("GET", "h", constrained, "", {"upgrade": "websocket"}, b""))[0].provider
        == "gemini_live"
    )
    assert BUILTIN.detect(RequestInfo("GET", "h", PATH, "", {}, b""))[0].provider == "http"  # no upgrade


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_turns_tool_calls_usage_and_resumption(snake: bool) -> None:
    def key(name: str) -> str:
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name) if snake else name

    clock = Clock()
    _, codec = session_for(FMT, PATH, clock)
    setup = {"model": "models/gemini-live-2.5-flash", "tools": [{key("functionDeclarations"): [DECL]}]}
    setup[key("sessionResumption")] = {"handle": "h-1"}
    feed(codec, "client", {"setup": setup}, clock)
    feed(codec, "server", {"setupComplete": {}}, clock, binary=True)
    asked = clock.now + 0.001
    content = {"turns": [{"role": "user", "parts": [{"text": "weather?"}]}], key("turnComplete"): True}
    feed(codec, "client", {key("clientContent"): content}, clock)
    call = {"id": "fc1", "name": "get_weather", "args": {"city": "Paris"}}
    event = feed(codec, "server", {"toolCall": {"functionCalls": [call]}}, clock, binary=True)
    assert event.tools == ("get_weather",)
    (first,) = codec.drain()
    assert first.model == "gemini-live-2.5-flash" and first.provider == "gemini_live"
    assert first.gen_ai_provider == "gcp.gemini" and first.finish_reasons == ["tool_call"]
    assert [(c.name, json.loads(c.arguments), c.from_object) for c in first.tool_calls] == [
        ("get_weather", {"city": "Paris"}, True)
    ]
    assert first.messages[0].text == "weather?" and first.timings.start == pytest.approx(asked)
    assert [t.name for t in first.tools_declared] == ["get_weather"]
    reply = {"functionResponses": [{"id": "fc1", "name": "get_weather", "response": {"temp_c": 18}}]}
    feed(codec, "client", {key("toolResponse"): {key("functionResponses"): reply["functionResponses"]}}, clock)
    for piece in ("It is ", "18C."):
        feed(codec, "server", {"serverContent": {"modelTurn": {"parts": [{"text": piece}]}}}, clock, binary=True)
    usage = {"promptTokenCount": 30, "responseTokenCount": 12, "totalTokenCount": 42}
    feed(codec, "server", {"serverContent": {"turnComplete": True}, "usageMetadata": usage}, clock, binary=True)
    feed(codec, "server", {"sessionResumptionUpdate": {"newHandle": "h-2", "resumable": True}}, clock, binary=True)
    (answer,) = codec.drain()
    assert answer.output_text == "It is 18C." and answer.finish_reasons == ["stop"]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (30, 12)
    assert answer.tool_results[0].call_id == "fc1"
    info = codec.info
    assert info.minted and info.session_id == "rt_flow1"  # the Developer API exposes no session id
    assert info.resumption_used and info.resumption_offered and info.generations == 2


def test_an_interrupted_turn_and_a_session_that_ends_mid_turn() -> None:
    clock = Clock()
    _, codec = session_for(FMT, PATH, clock)
    feed(codec, "server", {"serverContent": {"modelTurn": {"parts": [{"text": "Hel"}]}}}, clock)
    feed(codec, "server", {"serverContent": {"interrupted": True}}, clock)
    (gen,) = codec.drain()
    assert gen.finish_reasons == ["interrupted"] and gen.realtime is not None and gen.realtime.status == "cancelled"
    feed(codec, "server", {"serverContent": {"modelTurn": {"parts": [{"text": "Again"}]}}}, clock)
    codec.close(clock.now)
    (cut,) = codec.drain()
    assert cut.stream_complete is False and cut.output_text == "Again"


def _codec() -> object:
    clock = Clock()
    _, codec = session_for(FMT, PATH, clock)
    feed(codec, "server", {"setupComplete": {}}, clock, binary=True)
    feed(codec, "server", {"serverContent": {"modelTurn": {"parts": [{"text": "x"}]}}}, clock, binary=True)
    return codec


def test_the_warning_before_a_close_is_a_go_away_google_genai_parses() -> None:
    codec = _codec()
    (warning,) = codec.close_warning(2.5)  # type: ignore[attr-defined]
    assert not warning.is_text  # the server's own messages are binary: brownout's follow suit
    message = types.LiveServerMessage.model_validate(json.loads(warning.content))
    assert message.go_away is not None and message.go_away.time_left == "2.5s"
    assert codec.default_close().code == 1011  # type: ignore[attr-defined]


@pytest.mark.parametrize(("status", "code"), [(429, 1011), (500, 1011), (400, 1007), (401, 1008)])
def test_errors_in_a_live_session_are_close_frames(status: int, code: int) -> None:
    out = _codec().error_event(status, None, None)  # type: ignore[attr-defined]
    assert isinstance(out, CloseSpec) and out.code == code and out.reason


def test_an_early_end_is_an_interrupted_turn_or_a_close() -> None:
    codec = _codec()
    gen = next(iter(codec.open.values()))  # type: ignore[attr-defined]
    out = codec.cut_event(gen, "incomplete")  # type: ignore[attr-defined]
    assert isinstance(out, WsOut)
    message = types.LiveServerMessage.model_validate(json.loads(out.content))
    assert message.server_content is not None and message.server_content.turn_complete
    assert isinstance(codec.cut_event(gen, "failed"), CloseSpec)  # type: ignore[attr-defined]
    assert codec.rate_limits_event(1, ("requests",)) is None  # type: ignore[attr-defined]


def test_broken_tool_arguments_become_a_string_the_client_cannot_take_for_its_args_object() -> None:
    codec = _codec()
    doc = {"toolCall": {"functionCalls": [{"id": "a", "name": "get_weather", "args": {"city": "Paris"}}]}}
    event = codec.observe("server", json.dumps(doc).encode(), False)  # type: ignore[attr-defined]
    out = codec.edit_tool_arguments(event, lambda text: text[:-1])  # type: ignore[attr-defined]
    assert json.loads(out.content)["toolCall"]["functionCalls"][0]["args"] == '{"city":"Paris"'
    codec.deliver(codec.replaced(event, out))  # type: ignore[attr-defined]
    (gen,) = codec.drain()  # type: ignore[attr-defined]
    assert gen.tool_calls[0].arguments == '{"city":"Paris"' and not gen.tool_calls[0].from_object
