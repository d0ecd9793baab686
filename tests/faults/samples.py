"""Provider response samples and SDK clients fed from bytes (no network, no proxy)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import httpx2
import openai

JSON = {"content-type": "application/json"}
SSE = {"content-type": "text/event-stream"}

OPENAI_CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'},
                    }
                ],
            },
        }
    ],
}
OPENAI_RESPONSES = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-4o",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
    ],
}
ANTHROPIC_MSG = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "stop_reason": "tool_use",
    "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
GEMINI = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"text": "Checking."}, {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            }
        }
    ]
}
OLLAMA = {
    "model": "llama3",
    "done": True,
    "message": {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    },
}


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tool_delta(args: str, first: bool = False) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": args}}
    if first:
        call.update(id="call_1", type="function", function={"name": "get_weather", "arguments": args})
    return chat_chunk({"tool_calls": [call]})


OPENAI_TEXT_STREAM = [
    chat_chunk({"role": "assistant", "content": ""}),
    chat_chunk({"content": "Hello"}),
    chat_chunk({"content": " world"}),
    chat_chunk({}, "stop"),
]
OPENAI_TOOL_STREAM = [
    tool_delta("", first=True),
    tool_delta('{"ci'),
    tool_delta('ty": "Pa'),
    tool_delta('ris"}'),
    chat_chunk({}, "tool_calls"),
]


def responses_tool_stream(*fragments: str) -> list[tuple[str, dict[str, Any]]]:
    """A Responses stream calling one function: its fragments, then the full string three more times."""
    head = {k: v for k, v in OPENAI_RESPONSES.items() if k != "output"} | {"status": "in_progress", "output": []}
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    whole = dict(item, arguments="".join(fragments), status="completed")
    deltas = [{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": f} for f in fragments]
    events = [
        {"type": "response.created", "response": head},
        {"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress")},
        *deltas,
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": whole["arguments"]},
        {"type": "response.output_item.done", "output_index": 0, "item": whole},
        {"type": "response.completed", "response": head | {"status": "completed", "output": [whole]}},
    ]
    return [(str(e["type"]), dict(e, sequence_number=i)) for i, e in enumerate(events)]


def anthropic_stream(*deltas: dict[str, Any], block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    msg = {k: v for k, v in ANTHROPIC_MSG.items() if k != "content"} | {"content": [], "stop_reason": None}
    return [
        ("message_start", {"type": "message_start", "message": msg}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        *[("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas],
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


ANTHROPIC_TOOL_STREAM = anthropic_stream(
    *[{"type": "input_json_delta", "partial_json": p} for p in ("", '{"city"', ': "Paris"}')],
    block={"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
)
ANTHROPIC_TEXT_STREAM = anthropic_stream(
    *[{"type": "text_delta", "text": t} for t in ("Hello", " world")], block={"type": "text", "text": ""}
)


def openai_sdk(status: int, headers: dict[str, str], body: bytes) -> openai.OpenAI:
    transport = httpx.MockTransport(lambda req: httpx.Response(status, headers=headers, content=body))
    return openai.OpenAI(
        api_key="k", base_url="http://up/v1", max_retries=0, http_client=httpx.Client(transport=transport)
    )


def anthropic_sdk(status: int, headers: dict[str, str], body: bytes) -> anthropic.Anthropic:
    transport = httpx2.MockTransport(lambda req: httpx2.Response(status, headers=headers, content=body))
    return anthropic.Anthropic(
        api_key="k", base_url="http://up", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def dump(doc: Any) -> bytes:
    return json.dumps(doc).encode()
