"""Gemini wire format: generateContent, SSE and JSON-array streams, functionCall, fault bytes."""

from __future__ import annotations

import json

from brownout.core.wire import by_provider
from brownout.core.wire.framing import SSEFramer
from tests.wire._wire_helpers import request, sse, stream_through

WIRE = by_provider("gemini")
REQ = {
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather in Lima?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 21}}}]},
    ],
    "tools": [
        {
            "functionDeclarations": [
                {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
            ]
        }
    ],
}
PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def test_request() -> None:
    _, ex = request(PATH, REQ)
    assert (ex.provider, ex.operation, ex.model, ex.stream) == ("gemini", "generate_content", "gemini-2.5-flash", False)
    assert ex.tools_declared[0].name == "get_weather" and ex.tools_declared[0].schema
    assert ex.messages[0].text == "Be brief." and ex.messages[1].text == "Weather in Lima?"
    res = ex.tool_results[0]
    assert res.name == "get_weather" and json.loads(res.content) == {"temp": 21}
    _, ex = request(STREAM_PATH, REQ)
    assert ex.stream
    _, ex = request("/v1/projects/p/locations/us/publishers/google/models/gemini-2.0-flash:streamGenerateContent", REQ)
    assert ex.provider == "gemini" and ex.model == "gemini-2.0-flash" and ex.stream


def test_response_with_function_call() -> None:
    fmt, ex = request(PATH, REQ)
    body = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Let me look."},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 40,
            "cachedContentTokenCount": 16,
            "candidatesTokenCount": 9,
            "totalTokenCount": 49,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "abc",
    }
    fmt.parse_response(ex, json.dumps(body).encode())
    assert ex.output_text == "Let me look." and ex.finish_reasons == ["STOP"]
    assert [(c.name, json.loads(c.arguments)) for c in ex.tool_calls] == [("get_weather", {"city": "Lima"})]
    assert (ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens) == (40, 9, 16)
    assert ex.response_id == "abc" and ex.response_model == "gemini-2.5-flash"
    assert ex.stream_complete is None


def chunks() -> list[dict[str, object]]:
    return [
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Hola"}]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 40},
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}],
                    },
                    "index": 0,
                }
            ]
        },
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "!"}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 7, "totalTokenCount": 47},
        },
    ]


def test_sse_stream() -> None:
    fmt, ex = request(STREAM_PATH, REQ)
    body = sse(*chunks(), sep="\r\n\r\n")  # Gemini frames with CRLF
    stream_through(fmt, ex, body)
    assert ex.parse_error is None and ex.stream_complete is True
    assert ex.output_text == "Hola!" and ex.tool_calls[0].name == "get_weather"
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (40, 7)
    events = SSEFramer().feed(body)
    assert [WIRE.is_terminal(e) for e in events] == [False, False, True]


def test_json_array_stream_parsed_whole() -> None:
    fmt, ex = request("/v1beta/models/gemini-2.5-flash:streamGenerateContent", REQ)
    body = ("[" + ",\r\n".join(json.dumps(c) for c in chunks()) + "]").encode()
    fmt.parse_response(ex, body)
    assert ex.output_text == "Hola!" and ex.finish_reasons == ["STOP"] and ex.parse_error is None


def test_error_bodies() -> None:
    for status, rpc in (
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
        (500, "INTERNAL"),
        (400, "INVALID_ARGUMENT"),
    ):
        st, headers, body = WIRE.error_response(status)
        err = json.loads(body)["error"]
        assert st == status and err["code"] == status and err["status"] == rpc and err["message"]
        assert headers["content-type"].startswith("application/json")
    _, _, body = WIRE.error_response(429, retry_after_s=12)
    assert json.loads(body)["error"]["details"][0]["retryDelay"] == "12s"
    fmt, ex = request(PATH, REQ)
    fmt.parse_response(ex, WIRE.error_response(429)[2])
    assert ex.error_type == "RESOURCE_EXHAUSTED"


def test_stream_error_and_empty_response() -> None:
    fmt, ex = request(STREAM_PATH, REQ)
    event = WIRE.stream_error_event(exchange=ex)
    assert event.startswith(b"data: {") and event.endswith(b"\r\n\r\n")
    stream_through(fmt, ex, sse(chunks()[0], sep="\r\n\r\n") + event)
    assert ex.error_type == "UNAVAILABLE" and ex.stream_complete is False
    headers, body = WIRE.empty_response(ex)
    assert headers["content-type"] == "text/event-stream"
    fmt2, ex2 = request(STREAM_PATH, REQ)
    stream_through(fmt2, ex2, body)
    assert ex2.stream_complete is True and ex2.output_text == "" and not ex2.tool_calls
    _, ex3 = request(PATH, REQ)
    headers, body = WIRE.empty_response(ex3)
    assert json.loads(body)["candidates"][0]["finishReason"] == "STOP"
    _, ex4 = request("/v1beta/models/m:streamGenerateContent", REQ)
    assert json.loads(WIRE.empty_response(ex4)[1])[0]["candidates"]


def test_truncated_json_array_stream_keeps_what_arrived() -> None:
    fmt, ex = request("/v1beta/models/gemini-2.5-flash:streamGenerateContent", REQ)
    body = ("[" + ",\r\n".join(json.dumps(c) for c in chunks()) + "]").encode()
    fmt.parse_response(ex, body[: body.index(b"finishReason") - 40])
    assert ex.output_text == "Hola" and ex.tool_calls and ex.stream_complete is False
    assert ex.parse_error is not None
    fmt, ex = request("/v1beta/models/gemini-2.5-flash:streamGenerateContent", REQ)
    fmt.parse_response(ex, body)
    assert ex.stream_complete is True and ex.parse_error is None
