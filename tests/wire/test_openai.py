"""OpenAI wire format: recognition, requests, non-streamed and streamed responses."""

from __future__ import annotations

import json

from brownout.core.wire.openai import OpenAIFormat
from tests.wire._wire_helpers import request, sse, stream_through

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}},
    },
]


def chat_request(**extra: object) -> dict[str, object]:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather in Paris "}, {"type": "text", "text": "and time?"}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
        ],
        "tools": TOOLS,
        **extra,
    }


def test_recognises_operations_on_any_compatible_path() -> None:
    assert request("/v1/chat/completions", {})[1].operation == "chat"
    assert request("/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21", {})[1].operation == "chat"
    assert request("/v1/responses", {})[1].operation == "responses"
    assert request("/v1/embeddings", {})[1].operation == "embeddings"
    assert request("/v1/completions", {})[1].operation == "text_completion"
    fmt, ex = request("/v1/chat/completions", {})
    assert isinstance(fmt, OpenAIFormat) and ex.provider == "openai"
    assert request("/v1/chat/completions", method="GET")[1].provider == "http"


def test_chat_request() -> None:
    _, ex = request("/v1/chat/completions", chat_request(stream=True, stream_options={"include_usage": True}))
    assert ex.model == "gpt-4o" and ex.stream is True
    assert [t.name for t in ex.tools_declared] == ["get_weather", "get_time"]
    assert ex.tools_declared[0].schema == TOOLS[0]["function"]["parameters"]
    assert [(m.role, m.text) for m in ex.messages][:2] == [
        ("system", "You are helpful."),
        ("user", "Weather in Paris and time?"),
    ]
    assert len(ex.tool_results) == 1
    res = ex.tool_results[0]
    assert (res.call_id, res.content, res.name) == ("call_1", "18C, cloudy", "get_weather")
    assert ex.request_body.startswith("{")
    assert ex.parse_error is None


def test_azure_model_from_deployment() -> None:
    body = chat_request()
    del body["model"]
    _, ex = request("/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21", body)
    assert ex.model == "gpt4o-prod"


def test_chat_response_with_tool_calls() -> None:
    fmt, ex = request("/v1/chat/completions", chat_request())
    body = {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
                        },
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 40,
            "total_tokens": 160,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
        },
    }
    fmt.parse_response(ex, json.dumps(body).encode())
    assert ex.response_id == "chatcmpl-abc" and ex.response_model == "gpt-4o-2024-08-06"
    assert ex.finish_reasons == ["tool_calls"]
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (120, 40)
    assert ex.usage.cache_read_tokens == 64 and ex.usage.cache_write_tokens is None
    assert ex.output_text == "Checking."
    assert [(c.name, c.arguments, c.id, c.index) for c in ex.tool_calls] == [
        ("get_weather", '{"city":"Paris"}', "call_a", 0),
        ("get_time", '{"tz":"CET"}', "call_b", 1),
    ]


def test_error_body_sets_error_type() -> None:
    fmt, ex = request("/v1/chat/completions", chat_request())
    err = {"error": {"message": "quota", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
    fmt.parse_response(ex, json.dumps(err).encode())
    assert ex.error_type == "insufficient_quota" and ex.error_message == "quota"


def _split(text: str, n: int) -> list[str]:
    size = max(1, len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def parallel_tool_stream() -> tuple[bytes, dict[int, str]]:
    args = {
        0: json.dumps({"city": "Paris", "units": "metric", "detail": "hourly forecast"}),
        1: json.dumps({"tz": "Europe/Paris", "format": "24h"}),
    }
    base = {"id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-2024-08-06"}
    events: list[object] = [
        dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}])
    ]
    for idx, name in ((0, "get_weather"), (1, "get_time")):
        events.append(
            dict(
                base,
                choices=[
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": idx,
                                    "id": f"call_{idx}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ],
            )
        )
    frags = {idx: _split(a, 10) for idx, a in args.items()}
    # Interleave the two calls' fragments, as parallel tool calls arrive.
    for i in range(max(len(f) for f in frags.values())):
        for idx in (0, 1):
            if i < len(frags[idx]):
                events.append(
                    dict(
                        base,
                        choices=[
                            {
                                "index": 0,
                                "delta": {"tool_calls": [{"index": idx, "function": {"arguments": frags[idx][i]}}]},
                                "finish_reason": None,
                            }
                        ],
                    )
                )
    events.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    events.append(dict(base, choices=[], usage={"prompt_tokens": 80, "completion_tokens": 33, "total_tokens": 113}))
    events.append("[DONE]")
    return sse(*events), args


def test_stream_reassembles_parallel_tool_calls() -> None:
    fmt, ex = request("/v1/chat/completions", chat_request(stream=True))
    body, args = parallel_tool_stream()
    stream_through(fmt, ex, body)
    assert ex.parse_error is None
    assert ex.stream_events > 20
    assert ex.stream_complete is True and ex.streamed is True
    assert [(c.name, c.id, c.index) for c in ex.tool_calls] == [("get_weather", "call_0", 0), ("get_time", "call_1", 1)]
    assert [c.arguments for c in ex.tool_calls] == [args[0], args[1]]
    assert all(json.loads(c.arguments) for c in ex.tool_calls)
    assert ex.finish_reasons == ["tool_calls"]
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (80, 33)
    assert ex.response_id == "chatcmpl-s1"


def test_stream_text_and_truncation_without_done() -> None:
    fmt, ex = request("/v1/chat/completions", chat_request(stream=True))
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    words = ["Hel", "lo", ", ", "world"]
    body = sse(*[dict(base, choices=[{"index": 0, "delta": {"content": w}, "finish_reason": None}]) for w in words])
    stream_through(fmt, ex, body)
    assert ex.output_text == "Hello, world"
    assert ex.stream_complete is False


def test_is_terminal() -> None:
    fmt = OpenAIFormat()
    from brownout.core.wire.framing import SSEFramer

    events = SSEFramer().feed(
        b'data: {"x":1}\n\ndata: [DONE]\n\nevent: response.completed\ndata: {"type":"response.completed"}\n\n'
    )
    assert [fmt.is_terminal(e) for e in events] == [False, True, True]


def responses_stream() -> bytes:
    resp = {"id": "resp_1", "object": "response", "model": "gpt-4.1", "status": "in_progress", "output": []}
    args = json.dumps({"city": "Oslo"})
    events: list[tuple[str, dict[str, object]]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": resp}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "sequence_number": 1,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Let me check.",
                "sequence_number": 2,
            },
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "sequence_number": 3,
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_X",
                    "name": "get_weather",
                    "arguments": "",
                    "status": "in_progress",
                },
            },
        ),
    ]
    for i, frag in enumerate(_split(args, 5)):
        events.append(
            (
                "response.function_call_arguments.delta",
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_1",
                    "output_index": 1,
                    "delta": frag,
                    "sequence_number": 4 + i,
                },
            )
        )
    events.append(
        (
            "response.function_call_arguments.done",
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": 1,
                "arguments": args,
                "sequence_number": 20,
            },
        )
    )
    usage = {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 32}, "output_tokens": 12, "total_tokens": 62}
    done = dict(resp, status="completed", usage=usage)
    events.append(("response.completed", {"type": "response.completed", "sequence_number": 21, "response": done}))
    return sse(*[e for _, e in events], event_names=[n for n, _ in events])


def test_responses_request_and_function_call_stream() -> None:
    body = {
        "model": "gpt-4.1",
        "stream": True,
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "function_call", "call_id": "call_0", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_0", "output": "cold"},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    }
    fmt, ex = request("/v1/responses", body)
    assert ex.operation == "responses" and ex.stream
    assert [t.name for t in ex.tools_declared] == ["get_weather"]
    assert ex.tool_results[0].name == "get_weather" and ex.tool_results[0].content == "cold"
    stream_through(fmt, ex, responses_stream())
    assert ex.parse_error is None
    assert ex.stream_complete is True
    assert ex.output_text == "Let me check."
    assert [(c.name, c.id, c.arguments) for c in ex.tool_calls] == [("get_weather", "call_X", '{"city": "Oslo"}')]
    assert (ex.usage.input_tokens, ex.usage.output_tokens, ex.usage.cache_read_tokens) == (50, 12, 32)
    assert ex.response_id == "resp_1" and ex.finish_reasons == ["completed"]


def test_responses_non_stream() -> None:
    fmt, ex = request("/v1/responses", {"model": "gpt-4.1", "input": "hi"})
    body = {
        "id": "resp_2",
        "object": "response",
        "model": "gpt-4.1",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
            {"type": "function_call", "id": "fc", "call_id": "call_9", "name": "f", "arguments": '{"a":1}'},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    fmt.parse_response(ex, json.dumps(body).encode())
    assert ex.output_text == "Hello" and ex.tool_calls[0].id == "call_9"
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (3, 2)
    assert [m.text for m in ex.messages] == ["hi"]


def test_embeddings_and_completions() -> None:
    fmt, ex = request("/v1/embeddings", {"model": "text-embedding-3-small", "input": "hello"})
    fmt.parse_response(
        ex,
        json.dumps(
            {
                "object": "list",
                "data": [],
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode(),
    )
    assert ex.model == "text-embedding-3-small" and ex.usage.input_tokens == 1 and ex.parse_error is None
    fmt, ex = request("/v1/completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "Say hi", "stream": True})
    body = sse(
        {"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "Hi", "index": 0, "finish_reason": None}]},
        {"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "!", "index": 0, "finish_reason": "stop"}]},
        "[DONE]",
    )
    stream_through(fmt, ex, body)
    assert ex.output_text == "Hi!" and ex.finish_reasons == ["stop"] and ex.stream_complete


def test_mid_stream_error_chunk() -> None:
    fmt, ex = request("/v1/chat/completions", chat_request(stream=True))
    body = sse(
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"error": {"message": "boom", "type": "server_error", "param": None, "code": "server_error"}},
    )
    stream_through(fmt, ex, body)
    assert ex.error_type == "server_error" and ex.error_message == "boom" and not ex.stream_complete
