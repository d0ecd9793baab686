"""OpenAI Realtime codec: recognition at the upgrade, one exchange per generation, and the provider's bytes
for faults checked against the official SDK's own event models (openai.types.realtime)."""

from __future__ import annotations

import json

import pytest
from openai.types.realtime import RateLimitsUpdatedEvent, RealtimeErrorEvent, ResponseDoneEvent
from openai.types.realtime.response_function_call_arguments_done_event import ResponseFunctionCallArgumentsDoneEvent

from brownout.core.wire import BUILTIN
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.openai_realtime import OpenAIRealtimeFormat
from brownout.core.wire.realtime import CloseSpec, WsOut
from tests.wire.realtime_helpers import Clock, feed, session_for

FMT = OpenAIRealtimeFormat()
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]


def _upgrade(path: str, upgrade: str = "websocket") -> RequestInfo:
    return RequestInfo("GET", "api.openai.com", path, "model=gpt-realtime", {"upgrade": upgrade}, b"")


def test_the_upgrade_to_v1_realtime_is_recognised_and_nothing_else() -> None:
    assert BUILTIN.detect(_upgrade("/v1/realtime"))[0].provider == "openai_realtime"
    assert BUILTIN.detect(_upgrade("/openai/v1/realtime"))[1] == "realtime_session"  # Azure and gateways
    assert BUILTIN.detect(_upgrade("/v1/realtime", upgrade=""))[0].provider == "http"  # a plain GET
    assert BUILTIN.detect(_upgrade("/v1/chat"))[0].provider == "http"


def _response(rid: str, status: str = "completed", output: list[object] | None = None) -> dict[str, object]:
    usage = {"total_tokens": 60, "input_tokens": 40, "output_tokens": 20, "input_token_details": {"cached_tokens": 8}}
    return {"type": "response.done", "response": {"id": rid, "status": status, "output": output or [], "usage": usage}}


def test_a_session_yields_one_exchange_per_generation_with_model_usage_tools_and_ttfc() -> None:
    clock = Clock()
    session, codec = session_for(FMT, "/v1/realtime?model=gpt-realtime", clock)
    assert session.model == "gpt-realtime" and session.provider == "openai_realtime"
    feed(codec, "server", {"type": "session.created", "session": {"id": "sess_1", "model": "gpt-realtime"}}, clock)
    feed(codec, "client", {"type": "session.update", "session": {"tools": TOOLS}}, clock)
    msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]}
    feed(codec, "client", {"type": "conversation.item.create", "item": msg}, clock)
    asked = clock.now + 0.001
    feed(codec, "client", {"type": "response.create"}, clock)
    feed(codec, "server", {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}, clock)
    item = {"id": "it1", "type": "function_call", "name": "get_weather", "call_id": "call_1", "arguments": ""}
    feed(codec, "server", {"type": "response.output_item.added", "response_id": "resp_1", "item": item}, clock)
    first = clock.now + 0.001
    delta = {"type": "response.function_call_arguments.delta", "response_id": "resp_1", "item_id": "it1"}
    feed(codec, "server", {**delta, "delta": '{"city":'}, clock)
    feed(codec, "server", {**delta, "delta": '"Paris"}'}, clock)
    assert codec.drain() == []  # not finished before response.done
    feed(codec, "server", _response("resp_1", output=[{**item, "arguments": '{"city":"Paris"}'}]), clock)
    (gen,) = codec.drain()
    assert gen.operation == "realtime" and gen.model == "gpt-realtime" and gen.session == "agent-1"
    assert gen.id == "flow1.1" and gen.response_id == "resp_1"
    assert gen.realtime is not None and gen.realtime.session_id == "sess_1" and gen.realtime.status == "completed"
    assert gen.finish_reasons == ["tool_call"] and gen.stream_complete is True
    assert [(c.name, c.arguments, c.id) for c in gen.tool_calls] == [("get_weather", '{"city":"Paris"}', "call_1")]
    assert (gen.usage.input_tokens, gen.usage.output_tokens, gen.usage.cache_read_tokens) == (40, 20, 8)
    assert [t.name for t in gen.tools_declared] == ["get_weather"] and gen.messages[0].text == "weather?"
    assert gen.timings.start == pytest.approx(asked) and gen.timings.ttfc_s == pytest.approx(first - asked)
    # The tool's answer goes with the next generation.
    output = {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    feed(codec, "client", {"type": "conversation.item.create", "item": output}, clock)
    feed(codec, "server", {"type": "response.created", "response": {"id": "resp_2"}}, clock)
    text = {"type": "response.output_text.delta", "response_id": "resp_2", "item_id": "it2"}
    feed(codec, "server", {**text, "delta": "It is "}, clock)
    feed(codec, "server", {**text, "delta": "18C."}, clock)
    feed(codec, "server", _response("resp_2"), clock)
    (answer,) = codec.drain()
    assert answer.output_text == "It is 18C." and answer.finish_reasons == ["stop"]
    assert [r.call_id for r in answer.tool_results] == ["call_1"]
    assert codec.info.generations == 2 and codec.info.events_client == 4 and codec.info.events_server == 10


@pytest.mark.parametrize(
    ("status", "details", "finish", "error"),
    [
        ("incomplete", {"type": "incomplete", "reason": "max_output_tokens"}, "max_output_tokens", None),
        ("cancelled", {"type": "cancelled", "reason": "turn_detected"}, "turn_detected", None),
        (
            "failed",
            {"type": "failed", "error": {"type": "server_error", "code": "server_error"}},
            "error",
            "server_error",
        ),
    ],
)
def test_a_generation_that_did_not_complete_says_how(
    status: str, details: object, finish: str, error: str | None
) -> None:
    clock = Clock()
    _, codec = session_for(FMT, "/v1/realtime", clock)
    feed(codec, "server", {"type": "response.created", "response": {"id": "r"}}, clock)
    done = _response("r", status)
    done["response"]["status_details"] = details  # type: ignore[index]
    feed(codec, "server", done, clock)
    (gen,) = codec.drain()
    assert gen.finish_reasons == [finish] and gen.error_type == error and gen.stream_complete is True


def test_a_session_that_ends_mid_generation_leaves_it_cut_and_an_error_event_lands_on_it() -> None:
    clock = Clock()
    _, codec = session_for(FMT, "/v1/realtime", clock)
    feed(codec, "server", {"type": "response.created", "response": {"id": "r"}}, clock)
    err = {"type": "server_error", "code": "server_error", "message": "boom"}
    feed(codec, "server", {"type": "error", "error": err}, clock)
    codec.close(clock.now)
    (gen,) = codec.drain()
    assert gen.stream_complete is False and not gen.finish_reasons and gen.error_type == "server_error"
    assert codec.info.errors == 1 and codec.info.last_error == "server_error"
    assert codec.info.session_id == "rt_flow1" and codec.info.minted  # no session.created: minted


def test_a_message_that_is_not_json_is_a_parse_error_and_never_raises() -> None:
    clock = Clock()
    session, codec = session_for(FMT, "/v1/realtime", clock)
    for bad in (b"{nope", b"\xff\xfe", b"[1,2", b"plain", b"[" * 100_000, b""):
        event = codec.observe("server", bad, True)
        codec.deliver(event)
        assert event.type == "" and event.generation is None
    assert session.parse_error_reason == "invalid_json"


def _codec_with_generation() -> tuple[object, object]:
    clock = Clock()
    _, codec = session_for(FMT, "/v1/realtime", clock)
    feed(codec, "server", {"type": "response.created", "response": {"id": "resp_9"}}, clock)
    return codec, codec.open["resp_9"]


@pytest.mark.parametrize(("status", "error_type"), [(500, None), (429, None), (400, "invalid_value"), (503, None)])
def test_the_error_event_is_one_the_sdk_parses(status: int, error_type: str | None) -> None:
    codec, _ = _codec_with_generation()
    out = codec.error_event(status, error_type, None)  # type: ignore[attr-defined]
    assert isinstance(out, WsOut) and out.is_text
    event = RealtimeErrorEvent.model_validate(json.loads(out.content))
    assert (
        event.type == "error" and event.error.message and event.error.type in ("server_error", "invalid_request_error")
    )


def test_the_session_cap_warning_and_close_are_openais() -> None:
    codec, _ = _codec_with_generation()
    (warning,) = codec.close_warning(0)  # type: ignore[attr-defined]
    event = RealtimeErrorEvent.model_validate(json.loads(warning.content))
    assert event.error.code == "session_expired" and "60 minutes" in event.error.message
    assert codec.default_close() == CloseSpec(1001, "")  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", ["incomplete", "failed"])
def test_an_early_end_is_a_response_done_the_sdk_parses(status: str) -> None:
    codec, gen = _codec_with_generation()
    out = codec.cut_event(gen, status)  # type: ignore[attr-defined]
    done = ResponseDoneEvent.model_validate(json.loads(out.content))
    assert done.response.id == "resp_9" and done.response.status == status
    assert done.response.status_details is not None and done.response.status_details.type == status


def test_rate_limits_with_nothing_left_parse() -> None:
    codec, _ = _codec_with_generation()
    out = codec.rate_limits_event(30, ("requests", "tokens"))  # type: ignore[attr-defined]
    event = RateLimitsUpdatedEvent.model_validate(json.loads(out.content))
    assert [(r.name, r.remaining, r.reset_seconds) for r in event.rate_limits or []] == [
        ("requests", 0, 30),
        ("tokens", 0, 30),
    ]


def test_tool_arguments_are_edited_wherever_the_call_carries_them() -> None:
    codec, gen = _codec_with_generation()
    done = {
        "type": "response.function_call_arguments.done",
        "event_id": "e",
        "response_id": "resp_9",
        "item_id": "it",
        "output_index": 0,
        "call_id": "c",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    event = codec.observe("server", json.dumps(done).encode(), True)  # type: ignore[attr-defined]
    assert event.tools == ("get_weather",) and event.generation is gen
    out = codec.edit_tool_arguments(event, lambda text: text[1:])  # type: ignore[attr-defined]
    parsed = ResponseFunctionCallArgumentsDoneEvent.model_validate(json.loads(out.content))
    assert parsed.arguments == '"city":"Paris"}'
    item = {"id": "it", "type": "function_call", "name": "f", "call_id": "c", "arguments": "{}"}
    for doc in (
        {"type": "response.output_item.done", "response_id": "resp_9", "item": item},
        _response("resp_9", output=[item]),
    ):
        event = codec.observe("server", json.dumps(doc).encode(), True)  # type: ignore[attr-defined]
        assert b'"arguments":"}"' in codec.edit_tool_arguments(event, lambda text: text[1:]).content  # type: ignore[attr-defined]
    text = codec.observe("server", b'{"type":"response.output_text.delta","delta":"x"}', True)  # type: ignore[attr-defined]
    assert codec.edit_tool_arguments(text, lambda t: t[1:]) is None  # type: ignore[attr-defined]
