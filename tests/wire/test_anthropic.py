"""Anthropic wire format: requests, responses, streams, and fault bytes through the anthropic SDK."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest

from brownout.core.wire import by_provider
from brownout.core.wire.framing import SSEFramer
from tests.wire._wire_helpers import request, sse, stream_through

WIRE = by_provider("anthropic")
REQ = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "Be terse."}],
    "tools": [
        {
            "name": "get_weather",
            "description": "w",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"type": "web_search_20250305", "name": "web_search"},
    ],
    "messages": [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "sunny"}],
                    "is_error": True,
                }
            ],
        },
    ],
}


def test_request() -> None:
    _, ex = request("/v1/messages", dict(REQ, stream=True))
    assert (ex.provider, ex.operation, ex.model, ex.stream) == ("anthropic", "chat", "claude-sonnet-4-5", True)
    assert [(t.name, t.schema is not None) for t in ex.tools_declared] == [("get_weather", True), ("web_search", False)]
    assert ex.messages[0].role == "system" and ex.messages[0].text == "Be terse."
    res = ex.tool_results[0]
    assert (res.call_id, res.content, res.name, res.is_error) == ("toolu_1", "sunny", "get_weather", True)


def test_vertex_raw_predict() -> None:
    body = {k: v for k, v in REQ.items() if k != "model"}
    _, ex = request(
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
        body,
    )
    assert ex.provider == "anthropic" and ex.model == "claude-sonnet-4-5@20250929" and ex.stream


def test_response() -> None:
    fmt, ex = request("/v1/messages", REQ)
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "text", "text": "Checking "},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 100,
            "cache_creation_input_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 6, "ephemeral_1h_input_tokens": 4},
            "cache_read_input_tokens": 20,
            "output_tokens": 30,
        },
    }
    fmt.parse_response(ex, json.dumps(body).encode())
    assert ex.response_id == "msg_01" and ex.finish_reasons == ["tool_use"]
    # Anthropic's input_tokens leaves the cached prompt out; the exchange counts it in, as its parts.
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (130, 30)
    assert (ex.usage.cache_read_tokens, ex.usage.cache_write_tokens, ex.usage.cache_write_1h_tokens) == (20, 10, 4)
    assert ex.output_text == "Checking "
    assert [(c.name, json.loads(c.arguments), c.id) for c in ex.tool_calls] == [
        ("get_weather", {"city": "Rome"}, "toolu_2")
    ]


def realistic_stream() -> bytes:
    partials = ['{"ci', 'ty": "Pa', 'ris", "uni', 'ts": "c"', "}"]
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_S",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": 472,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 2048,
                        "output_tokens": 2,
                    },
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Okay, "}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "checking."}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_S", "name": "get_weather", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
        ),
        *[
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": p}},
            )
            for p in partials
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 89},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse(*[e for _, e in events], event_names=[n for n, _ in events])


def test_stream_with_input_json_delta() -> None:
    fmt, ex = request("/v1/messages", dict(REQ, stream=True))
    stream_through(fmt, ex, realistic_stream())
    assert ex.parse_error is None and ex.stream_complete is True
    assert ex.output_text == "Okay, checking."
    assert [(c.name, c.id, c.arguments) for c in ex.tool_calls] == [
        ("get_weather", "toolu_S", '{"city": "Paris", "units": "c"}')
    ]
    # message_delta reports only the output: the cached prompt of message_start stays counted.
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (472 + 2048, 89)
    assert (ex.usage.cache_read_tokens, ex.usage.cache_write_tokens) == (2048, 0)
    assert ex.finish_reasons == ["tool_use"] and ex.response_id == "msg_S"


def test_stream_error_event_and_is_terminal() -> None:
    fmt, ex = request("/v1/messages", dict(REQ, stream=True))
    body = realistic_stream().split(b"event: content_block_stop")[0] + WIRE.stream_error_event()
    stream_through(fmt, ex, body)
    assert ex.error_type == "overloaded_error" and ex.error_message == "Overloaded" and ex.stream_complete is False
    events = SSEFramer().feed(realistic_stream())
    assert [WIRE.is_terminal(e) for e in events].count(True) == 1 and WIRE.is_terminal(events[-1])
    assert WIRE.stream_error_event() == (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )


# -- through the SDK ---------------------------------------------------------------


def client_for(status: int, headers: dict[str, str], body: bytes) -> anthropic.Anthropic:
    def handler(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    return anthropic.Anthropic(
        api_key="sk-ant-test",
        base_url="http://upstream.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


CALL = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("status", "error_type", "cls", "etype"),
    [
        (429, None, anthropic.RateLimitError, "rate_limit_error"),
        (529, None, anthropic.OverloadedError, "overloaded_error"),
        (500, None, anthropic.InternalServerError, "api_error"),
        (400, None, anthropic.BadRequestError, "invalid_request_error"),
        (400, "context_length_exceeded", anthropic.BadRequestError, "invalid_request_error"),
        (401, None, anthropic.AuthenticationError, "authentication_error"),
    ],
)
def test_error_response_through_sdk(status: int, error_type: str | None, cls: type, etype: str) -> None:
    st, headers, body = WIRE.error_response(status, error_type, retry_after_s=3)
    with pytest.raises(anthropic.APIStatusError) as info:
        client_for(st, headers, body).messages.create(**CALL)  # type: ignore[call-overload]
    exc = info.value
    assert type(exc) is cls
    data = json.loads(body)
    assert data["type"] == "error" and data["error"]["type"] == etype and data["request_id"].startswith("req_")
    assert exc.request_id == headers["request-id"] == data["request_id"]
    assert exc.body["error"]["type"] == etype  # type: ignore[index]


def test_rate_limit_headers() -> None:
    _, headers, _ = WIRE.error_response(429, retry_after_s=2.2)
    assert headers["retry-after"] == "3"
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert headers["anthropic-ratelimit-requests-limit"] == "50"
    assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    assert client_for(200, {}, b"")._parse_retry_after_header(httpx2.Headers(headers)) == 3


def test_stream_error_event_raises_in_sdk() -> None:
    body = realistic_stream().split(b"event: content_block_stop")[0] + WIRE.stream_error_event()
    client = client_for(200, {"content-type": "text/event-stream"}, body)
    with pytest.raises(anthropic.APIStatusError) as info:
        for _ in client.messages.create(**CALL, stream=True):  # type: ignore[call-overload]
            pass
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_empty_response_parses_in_sdk() -> None:
    _, ex = request("/v1/messages", CALL)
    headers, body = WIRE.empty_response(ex)
    msg = client_for(200, headers, body).messages.create(**CALL)  # type: ignore[call-overload]
    assert msg.content == [] and msg.stop_reason == "end_turn"
    _, ex = request("/v1/messages", dict(CALL, stream=True))
    headers, body = WIRE.empty_response(ex)
    with client_for(200, headers, body).messages.stream(**CALL) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    assert final.content == [] and final.stop_reason == "end_turn"
    assert SSEFramer().feed(body)[-1].raw == WIRE.terminal_bytes(ex)
