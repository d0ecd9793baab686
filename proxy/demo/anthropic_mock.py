"""Anthropic Messages API, with the exact streaming event sequence the SDK expects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

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

__all__ = ["anthropic_error", "messages"]

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


async def messages(body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
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
    in_tokens = max(1, len(body) // 4)
    if tool:
        args = mock_arguments(tool.get("input_schema"))
        args_text = json.dumps(args)
        pieces = split_text(args_text, knobs.chunks or 4)
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
    if not req.get("stream"):
        if tool:
            content: list[dict[str, Any]] = [
                {"type": "text", "text": preface},
                {"type": "tool_use", "id": tool_id, "name": tool.get("name"), "input": args},
            ]
        else:
            content = [{"type": "text", "text": "".join(pieces)}]
        out = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        resp.send(200, pad_json(out, knobs.body_bytes), headers=headers)
        return

    def frames() -> Iterator[bytes]:
        start_usage = {**usage, "output_tokens": 1}
        yield sse_event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
        index = 0
        if tool:
            yield sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
            yield sse_event("ping", {"type": "ping"})
            yield sse_event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": preface}},
            )
            yield sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
            yield sse_event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": tool_id, "name": tool.get("name"), "input": {}},
                },
            )
            for p in pieces:
                yield sse_event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": p},
                    },
                )
        else:
            yield sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
            yield sse_event("ping", {"type": "ping"})
            for p in pieces:
                yield sse_event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
                )
        yield sse_event("content_block_stop", {"type": "content_block_stop", "index": index})
        yield sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": len(pieces)},
            },
        )
        yield sse_event("message_stop", {"type": "message_stop"})

    await send_stream(resp, frames(), knobs, headers=headers)
