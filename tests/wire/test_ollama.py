"""Ollama wire format: NDJSON streams, tool_calls, default streaming, mid-stream errors."""

from __future__ import annotations

import json

from brownout.core.wire import by_provider
from brownout.core.wire.framing import NDJSONFramer
from tests.wire._wire_helpers import request, stream_through

WIRE = by_provider("ollama")
REQ = {
    "model": "llama3.2",
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "tool", "content": "rainy", "tool_name": "get_weather"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
}


def ndjson(*lines: object) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_request_streams_by_default() -> None:
    _, ex = request("/api/chat", REQ, host="localhost")
    assert (ex.provider, ex.operation, ex.model, ex.stream) == ("ollama", "chat", "llama3.2", True)
    assert ex.tools_declared[0].name == "get_weather"
    assert ex.tool_results[0].name == "get_weather" and ex.tool_results[0].content == "rainy"
    assert request("/api/chat", dict(REQ, stream=False))[1].stream is False
    _, ex = request("/api/generate", {"model": "llama3.2", "prompt": "hi", "system": "s"})
    assert ex.operation == "text_completion" and [m.role for m in ex.messages] == ["system", "user"]
    assert request("/api/embed", {"model": "all-minilm", "input": "x"})[1].operation == "embeddings"


def stream_lines() -> list[dict[str, object]]:
    return [
        {"model": "llama3.2", "created_at": "t", "message": {"role": "assistant", "content": "Let "}, "done": False},
        {
            "model": "llama3.2",
            "created_at": "t",
            "message": {
                "role": "assistant",
                "content": "me check",
                "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
            },
            "done": False,
        },
        {
            "model": "llama3.2",
            "created_at": "t",
            "message": {"role": "assistant", "content": ""},
            "done_reason": "stop",
            "done": True,
            "prompt_eval_count": 26,
            "eval_count": 12,
        },
    ]


def test_ndjson_stream_with_tool_calls() -> None:
    fmt, ex = request("/api/chat", REQ)
    body = ndjson(*stream_lines())
    stream_through(fmt, ex, body, ndjson=True)
    assert ex.parse_error is None and ex.stream_complete is True
    assert ex.output_text == "Let me check"
    assert [(c.name, json.loads(c.arguments)) for c in ex.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (26, 12) and ex.finish_reasons == ["stop"]
    assert [WIRE.is_terminal(e) for e in NDJSONFramer().feed(body)] == [False, False, True]


def test_buffered_stream_body_and_single_body() -> None:
    fmt, ex = request("/api/chat", REQ)
    fmt.parse_response(ex, ndjson(*stream_lines()))
    assert ex.output_text == "Let me check" and ex.usage.output_tokens == 12 and ex.streamed is False
    fmt, ex = request("/api/generate", {"model": "llama3.2", "prompt": "hi", "stream": False})
    fmt.parse_response(
        ex,
        json.dumps(
            {"model": "llama3.2", "response": "Hello", "done": True, "done_reason": "stop", "eval_count": 2}
        ).encode(),
    )
    assert ex.output_text == "Hello" and ex.finish_reasons == ["stop"] and ex.stream_complete is None


def test_mid_stream_error_line() -> None:
    fmt, ex = request("/api/chat", REQ)
    ex.status = 200
    body = ndjson(stream_lines()[0]) + WIRE.stream_error_event(message="model runner crashed")
    stream_through(fmt, ex, body, ndjson=True)
    assert ex.error_type == "stream_error" and ex.error_message == "model runner crashed" and not ex.stream_complete


def test_fault_bytes() -> None:
    _, ex = request("/api/chat", REQ)
    status, headers, body = WIRE.error_response(404, exchange=ex)
    assert status == 404 and json.loads(body) == {"error": 'model "llama3.2" not found, try pulling it first'}
    assert WIRE.stream_error_event(message="x") == b'{"error":"x"}\n'
    headers, body = WIRE.empty_response(ex)
    assert headers["content-type"] == "application/x-ndjson" and body.endswith(b"\n")
    line = json.loads(body)
    assert line["done"] is True and line["message"]["content"] == ""
    fmt, ex2 = request("/api/chat", REQ)
    stream_through(fmt, ex2, body, ndjson=True)
    assert ex2.stream_complete is True
    _, ex3 = request("/api/generate", {"model": "m", "prompt": "p", "stream": False})
    headers, body = WIRE.empty_response(ex3)
    assert json.loads(body)["response"] == "" and headers["content-type"].startswith("application/json")
    assert WIRE.is_terminal(NDJSONFramer().feed(WIRE.terminal_bytes(ex))[0])
