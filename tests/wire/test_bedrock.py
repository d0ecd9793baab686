"""Bedrock wire format: recognition, Converse and InvokeModel bodies, event streams, errors, edits, cost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange
from brownout.core.wire import by_provider
from brownout.core.wire.bedrock_faults import exception_message
from brownout.core.wire.framing import EventStreamFramer
from brownout.proxy.demo import anthropic_mock, bedrock_mock
from brownout.proxy.demo.mockdata import Knobs
from tests.wire._wire_helpers import Tagging, request, stream_through, tagged

WIRE = by_provider("bedrock")
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
CONVERSE = f"/model/{MODEL.replace(':', '%3A')}/converse"
TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "description": "w",
                                 "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}}}}]}  # fmt: skip
REQ = {
    "system": [{"text": "Be terse."}],
    "toolConfig": TOOLS,
    "messages": [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Rome"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"json": {"temp": 20}}, {"text": "!"}],
                                                     "status": "error"}}]},
    ],
}  # fmt: skip
CLAUDE = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
          "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
          "messages": [{"role": "user", "content": "Weather?"}]}  # fmt: skip


def feed(ex: Exchange, body: bytes) -> Exchange:
    """Body bytes in random-sized chunks through the event-stream framer and the format's parser."""
    return stream_through(WIRE, ex, body, framer=EventStreamFramer())


def converse_stream(tool: bool = True) -> bytes:
    req = {**REQ, "messages": REQ["messages"][:1]} if tool else {"messages": REQ["messages"][:1]}
    return b"".join(bedrock_mock._converse(req, Knobs(), 100)[1])


def claude_stream() -> bytes:
    out = anthropic_mock.answer({**CLAUDE, "model": MODEL}, Knobs(), 100)
    return b"".join(bedrock_mock._chunks(out.events, out.message["usage"]))


@pytest.mark.parametrize(
    ("path", "op", "stream"),
    [
        (CONVERSE, "chat", False),
        (f"/model/{MODEL}/converse-stream", "chat", True),
        ("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude/invoke", "chat", False),
        ("/model/amazon.titan-embed-text-v2%3A0/invoke", "embeddings", False),
        (f"/model/{MODEL}/invoke-with-response-stream", "chat", True),
    ],
)
def test_recognised_by_path_with_the_model_from_it(path: str, op: str, stream: bool) -> None:
    fmt, ex = request(path, {"messages": []}, host="bedrock-runtime.us-east-1.amazonaws.com")
    assert (fmt.provider, ex.operation, ex.stream, ex.gen_ai_provider) == ("bedrock", op, stream, "aws.bedrock")
    assert ex.model is not None and "%" not in ex.model


@pytest.mark.parametrize("path", ["/model/x/converse/extra", "/models/x/converse", "/model//converse"])
def test_other_paths_are_not_bedrock(path: str) -> None:
    fmt, _ = request(path, {"messages": []})
    assert fmt.provider != "bedrock"


def test_converse_request() -> None:
    _, ex = request(CONVERSE, REQ)
    assert ex.model == MODEL and not ex.stream
    assert [(t.name, t.schema) for t in ex.tools_declared] == [
        ("get_weather", TOOLS["tools"][0]["toolSpec"]["inputSchema"]["json"])
    ]  # type: ignore[index]
    assert ex.messages[0].role == "system" and ex.messages[0].text == "Be terse."
    (res,) = ex.tool_results
    assert (res.call_id, res.content, res.name, res.is_error) == ("tu_1", '{"temp":20}!', "get_weather", True)


def test_invoke_reads_claudes_body_with_the_anthropic_format() -> None:
    _, ex = request(f"/model/{MODEL}/invoke-with-response-stream", CLAUDE)
    assert (ex.model, ex.stream) == (MODEL, True)
    assert [t.name for t in ex.tools_declared] == ["get_weather"] and ex.messages[0].text == "Weather?"


def test_converse_response() -> None:
    _, ex = request(CONVERSE, REQ)
    body = {"output": {"message": {"role": "assistant", "content": [
        {"text": "Checking."}, {"toolUse": {"toolUseId": "tu_2", "name": "get_weather", "input": {"city": "Paris"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 90,
                                             "cacheWriteInputTokens": 0, "totalTokens": 105}}  # fmt: skip
    ex.status = 200
    WIRE.parse_response(ex, json.dumps(body).encode())
    assert ex.output_text == "Checking." and ex.finish_reasons == ["tool_use"]
    (call,) = ex.tool_calls
    assert (call.name, call.id, json.loads(call.arguments), call.from_object) == (
        "get_weather",
        "tu_2",
        {"city": "Paris"},
        True,
    )
    assert (ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens) == (100, 5, 90)


def test_invoke_response_usage_from_headers_when_the_body_has_none() -> None:
    _, ex = request("/model/meta.llama3-8b-instruct-v1%3A0/invoke", {"prompt": "hi"})
    ex.status, ex.response_headers = (
        200,
        {"x-amzn-bedrock-input-token-count": "12", "x-amzn-bedrock-output-token-count": "7"},
    )
    WIRE.parse_response(ex, b'{"generation":"Hello","stop_reason":"stop"}')
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (12, 7)


def test_error_response_is_read_from_the_error_type_header() -> None:
    _, ex = request(CONVERSE, REQ)
    status, headers, body = WIRE.error_response(429)
    ex.status, ex.response_headers = status, headers
    WIRE.parse_response(ex, body)
    assert (ex.error_type, ex.error_message) == (
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
    )
    assert headers["x-amzn-errortype"].startswith("ThrottlingException:") and json.loads(body) == {
        "message": ex.error_message
    }


@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [(503, None, "ServiceUnavailableException"), (500, None, "InternalServerException"), (408, None, "ModelTimeoutException"),
     (424, None, "ModelErrorException"), (400, None, "ValidationException"), (429, "ModelNotReadyException", "ModelNotReadyException"),
     (400, "context_length_exceeded", "ValidationException")],
)  # fmt: skip
def test_error_codes_by_status(status: int, error_type: str | None, code: str) -> None:
    got, headers, _ = WIRE.error_response(status, error_type)
    assert got == status and headers["x-amzn-errortype"].split(":")[0] == code


def test_converse_stream_with_a_tool_call() -> None:
    _, ex = request(f"/model/{MODEL}/converse-stream", REQ)
    feed(ex, converse_stream())
    assert ex.stream_complete is True and ex.finish_reasons == ["tool_use"] and ex.output_text == "I'll look that up."
    (call,) = ex.tool_calls
    assert call.name == "get_weather" and call.id and json.loads(call.arguments) == {"city": "Paris"}
    assert ex.usage.input_tokens == 25 and ex.usage.output_tokens == 4 and ex.stream_events == 11


def test_a_stream_without_message_stop_is_incomplete() -> None:
    _, ex = request(f"/model/{MODEL}/converse-stream", REQ)
    frames = EventStreamFramer().feed(converse_stream(tool=False))
    feed(ex, b"".join(f.raw for f in frames if f.event not in ("messageStop", "metadata")))
    assert ex.stream_complete is False and ex.output_text and ex.parse_error is None


def test_a_message_cut_inside_is_a_parse_error() -> None:
    _, ex = request(f"/model/{MODEL}/converse-stream", REQ)
    feed(ex, converse_stream()[:-7])
    assert ex.stream_complete is True  # messageStop came; the metadata message was cut
    assert ex.parse_error is not None and "cut short" in ex.parse_error and ex.parse_error_reason == "invalid_json"


def test_exception_mid_stream() -> None:
    _, ex = request(f"/model/{MODEL}/converse-stream", REQ)
    body = converse_stream()[:200]
    frames = EventStreamFramer().feed(body)
    body = b"".join(f.raw for f in frames) + WIRE.status_error_event(429)
    feed(ex, body)
    assert ex.stream_complete is False and ex.error_type == "throttlingException"
    assert ex.error_message == "Too many requests, please wait before trying again."


def test_claude_stream_inside_invoke() -> None:
    _, ex = request(f"/model/{MODEL}/invoke-with-response-stream", CLAUDE)
    feed(ex, claude_stream())
    assert ex.stream_complete is True and ex.finish_reasons == ["tool_use"] and ex.output_text == "I'll look that up."
    (call,) = ex.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert ex.usage.input_tokens == 25 and ex.usage.output_tokens == 4 and ex.response_model == MODEL


def test_terminal_events() -> None:
    converse = EventStreamFramer().feed(converse_stream())
    claude = EventStreamFramer().feed(claude_stream())
    assert [f.event for f in converse if WIRE.is_terminal(f)] == ["messageStop"]
    assert [json.loads(f.data)["type"] for f in claude if WIRE.is_terminal(f)] == ["message_stop"]
    (exc,) = EventStreamFramer().feed(exception_message(None, "throttlingException", None, None))
    assert not WIRE.is_terminal(exc)


def test_edits_in_converse_shapes_and_claudes() -> None:
    whole = {"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t", "name": "get_weather", "input": {"city": "Rome"}}}]}}}  # fmt: skip
    tags = Tagging()
    assert WIRE.edit_tool_arguments(whole, tags) == 1 and tags.seen == [("object", {"city": "Rome"}, "get_weather")]
    assert WIRE.edit_assistant_text(whole, tagged) and whole["output"]["message"]["content"][0] == {"text": "<>"}
    delta = {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"ci'}}}
    events = WIRE.tool_arguments_events()
    assert events is not None and events(delta, tags) == 1 and tags.seen[-1] == ("fragment", ("bedrock", 1), '{"ci')
    claude = {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{"}}
    assert events(claude, tags) == 1 and tags.seen[-1] == ("fragment", ("anthropic", 2), "{")
    text = WIRE.assistant_text_events()
    td = {"contentBlockIndex": 0, "delta": {"text": "Hi"}}
    assert text is not None and text(td, tagged) and td["delta"]["text"] == "<Hi>"
    assert [WIRE.drift_field(d) for d in (whole, td, {"stopReason": "x"}, {"usage": {}}, {"type": "message"})] == [
        "output", "delta", "stopReason", "usage", "content"]  # fmt: skip


def test_priced_from_the_price_table() -> None:
    _, ex = request(CONVERSE, REQ, host="bedrock-runtime.us-east-1.amazonaws.com")
    ex.usage.input_tokens, ex.usage.output_tokens = 1000, 100
    cost: Any = Pricer().price(ex)
    assert cost is not None and cost.provider == "aws" and cost.total > 0


def test_empty_answers_parse_as_empty_and_complete() -> None:
    for path, body in (
        (f"/model/{MODEL}/converse-stream", REQ),
        (f"/model/{MODEL}/invoke-with-response-stream", CLAUDE),
    ):
        _, ex = request(path, body)
        headers, raw = WIRE.empty_response(ex)
        assert headers["content-type"] == "application/vnd.amazon.eventstream"
        feed(ex, raw)
        assert ex.stream_complete is True and ex.output_text == "" and not ex.tool_calls and ex.parse_error is None


def test_span_attributes_name_aws_bedrock() -> None:
    from brownout.core.span_attributes import exchange_attributes, span_name

    _, ex = request(f"/model/{MODEL}/converse-stream", REQ, host="bedrock-runtime.us-east-1.amazonaws.com")
    feed(ex, converse_stream())
    attrs = exchange_attributes(ex)
    assert span_name(ex) == f"chat {MODEL}"
    assert attrs["gen_ai.provider.name"] == "aws.bedrock" and attrs["brownout.provider"] == "bedrock"
    assert (attrs["gen_ai.request.model"], attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
        MODEL, 25, 4)  # fmt: skip
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_use",) and attrs["brownout.stream.complete"] is True
