"""Anthropic Messages API, with the exact streaming event sequence the SDK expects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import (
    Knobs,
    answer_pieces,
    dumps,
    mock_arguments,
    mock_id,
    pad_json,
    split_text,
    tool_answer,
)
from brownout.proxy.demo.sse import send_stream, sse_event

__all__ = ["Answer", "answer", "anthropic_error", "messages"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error(status: int) -> bytes:
    return dumps(
        {
            "type": "error",
            "error": {
                "type": _ERROR_TYPES.get(status, "api_error"),
                "message": f"Mock upstream forced status {status}.",
            },
            "request_id": mock_id("req_"),
        }
    )


def _last_tool_result(messages: list[Any]) -> str | None:
    """The text of a tool_result in the last user message, or None when there is none."""
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list):
        return None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content", "")
            if isinstance(inner, list):
                inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
            return str(inner)
    return None


class Answer(NamedTuple):
    """What the mock answers one Messages request with, whole or as a stream of events."""

    message: dict[str, Any]  # the whole message
    events: list[dict[str, Any]]  # the same message as stream events, message_start to message_stop
    headers: dict[str, str]


def answer(req: dict[str, Any], knobs: Knobs, prompt_bytes: int) -> Answer:
    """The answer to a decoded Messages request (Bedrock's InvokeModel carries the same body)."""
    model = req.get("model", "claude-sonnet-4-5")
    result = _last_tool_result(req.get("messages") or [])
    tools = req.get("tools") or []
    tool = tools[0] if tools and result is None and isinstance(tools[0], dict) else None
    msg_id, tool_id = mock_id("msg_01"), mock_id("toolu_01")
    headers = {
        "request-id": mock_id("req_01"),
        "anthropic-ratelimit-requests-limit": "4000",
        "anthropic-ratelimit-requests-remaining": "3999",
    }
    in_tokens = max(1, prompt_bytes // 4)
    if tool:
        args = mock_arguments(tool.get("input_schema"))
        pieces = split_text(json.dumps(args), knobs.chunks or 4)
        preface = "I'll look that up."
    else:
        pieces = answer_pieces(tool_answer(result) if result is not None else None, knobs)
    usage = {
        "input_tokens": in_tokens,
        "output_tokens": len(pieces),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    stop = "tool_use" if tool else "end_turn"
    if tool:
        content: list[dict[str, Any]] = [
            {"type": "text", "text": preface},
            {"type": "tool_use", "id": tool_id, "name": tool.get("name"), "input": args},
        ]
    else:
        content = [{"type": "text", "text": "".join(pieces)}]
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }

    def block(index: int, kind: str, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **delta}}

    events: list[dict[str, Any]] = [
        {"type": "message_start",
         "message": {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]  # fmt: skip
    index = 0
    if tool:
        events += [block(0, "text_delta", {"text": preface}), {"type": "content_block_stop", "index": 0}]
        index = 1
        start: dict[str, Any] = {"type": "tool_use", "id": tool_id, "name": tool.get("name"), "input": {}}
        events.append({"type": "content_block_start", "index": 1, "content_block": start})
        events += [block(1, "input_json_delta", {"partial_json": p}) for p in pieces]
    else:
        events += [block(0, "text_delta", {"text": p}) for p in pieces]
    events += [
        {"type": "content_block_stop", "index": index},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
         "usage": {"output_tokens": len(pieces)}},
        {"type": "message_stop"},
    ]  # fmt: skip
    return Answer(message, events, headers)


async def messages(body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
    out = answer(req, knobs, len(body))
    if not req.get("stream"):
        resp.send(200, pad_json(out.message, knobs.body_bytes), headers=out.headers)
        return
    frames: Iterator[bytes] = (sse_event(ev["type"], ev) for ev in out.events)
    await send_stream(resp, frames, knobs, headers=out.headers)
