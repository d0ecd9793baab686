"""OpenAI Chat Completions and Responses API, as the official SDK expects them."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from typing import Any

from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import (
    CREATED,
    Knobs,
    answer_pieces,
    dumps,
    mock_arguments,
    mock_id,
    pad_json,
    split_text,
    tool_answer,
)
from brownout.proxy.demo.sse import send_stream, sse_data, sse_event

__all__ = ["chat_completions", "embeddings", "openai_error", "responses"]

_FINGERPRINT = "fp_brownout_mock"


def openai_error(status: int) -> bytes:
    kind = {
        400: ("invalid_request_error", None),
        401: ("invalid_request_error", "invalid_api_key"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("requests", "rate_limit_exceeded"),
    }
    typ, code = kind.get(status, ("server_error", None))
    return dumps(
        {"error": {"message": f"Mock upstream forced status {status}.", "type": typ, "param": None, "code": code}}
    )


def _headers(req_id: str) -> dict[str, str]:
    return {
        "x-request-id": req_id,
        "openai-processing-ms": "1",
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "9999",
        "x-ratelimit-reset-requests": "6ms",
    }


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _decide(tools: list[Any], last_is_tool_result: bool, tool_output: str) -> tuple[dict[str, Any] | None, str | None]:
    """(tool to call with its name/schema) or (None, answer text)."""
    if last_is_tool_result:
        return None, tool_answer(tool_output)
    if tools:
        t = tools[0]
        fn = t.get("function", t) if isinstance(t, dict) else {}
        return {"name": fn.get("name", "get_weather"), "schema": fn.get("parameters")}, None
    return None, None


def _usage(body: bytes, out_tokens: int) -> dict[str, int]:
    prompt = max(1, len(body) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": out_tokens, "total_tokens": prompt + out_tokens}


async def chat_completions(body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
    model = req.get("model", "gpt-4o-mini")
    messages = req.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    tool, text = _decide(req.get("tools") or [], last.get("role") == "tool", _text_of(last.get("content")))
    cid, rid = mock_id("chatcmpl-", 29), mock_id("req_", 32)
    base = {"id": cid, "created": CREATED, "model": model, "system_fingerprint": _FINGERPRINT}
    call_id = mock_id("call_")
    args = json.dumps(mock_arguments(tool["schema"])) if tool else ""
    pieces = split_text(args, knobs.chunks or 4) if tool else answer_pieces(text, knobs)
    usage = _usage(body, len(pieces))
    if not req.get("stream"):
        if tool:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool["name"], "arguments": args}}
                ],
            }
        else:
            message = {"role": "assistant", "content": "".join(pieces), "refusal": None}
        out = {
            **base,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if tool else "stop"}
            ],
            "usage": usage,
            "service_tier": "default",
        }
        resp.send(200, pad_json(out, knobs.body_bytes), headers=_headers(rid))
        return
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))

    def frames() -> Iterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            c = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                c["usage"] = None
            return sse_data(c)

        if tool:
            yield chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool["name"], "arguments": ""},
                        }
                    ],
                }
            )
            for p in pieces:
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
            yield chunk({}, "tool_calls")
        else:
            yield chunk({"role": "assistant", "content": "", "refusal": None})
            for p in pieces:
                yield chunk({"content": p})
            yield chunk({}, "stop")
        if include_usage:
            yield sse_data({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    await send_stream(resp, frames(), knobs, headers=_headers(rid))


def embeddings(body: bytes, resp: Responder, knobs: Knobs) -> None:
    """One short vector per input; base64 (little-endian float32s) when asked, as the SDK asks by default."""
    req = json.loads(body or b"{}")
    inputs = req.get("input")
    count = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
    floats = [0.125, -0.25, 0.5, 0.0]
    vector: Any = floats
    if req.get("encoding_format") == "base64":
        vector = base64.b64encode(struct.pack(f"<{len(floats)}f", *floats)).decode()
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(count)]
    prompt = max(1, len(body) // 4)
    out = {
        "object": "list",
        "data": data,
        "model": req.get("model", "text-embedding-3-small"),
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    }
    resp.send(200, pad_json(out, knobs.body_bytes), headers=_headers(mock_id("req_", 32)))


def _responses_input(req: dict[str, Any]) -> tuple[bool, str]:
    items = req.get("input")
    if isinstance(items, list) and items:
        last = items[-1] if isinstance(items[-1], dict) else {}
        if last.get("type") == "function_call_output":
            return True, str(last.get("output", ""))
    return False, ""


async def responses(body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
    model = req.get("model", "gpt-4o-mini")
    is_result, output = _responses_input(req)
    tool, text = _decide(req.get("tools") or [], is_result, output)
    rid, item_id, call_id = mock_id("resp_", 48), mock_id("msg_" if not tool else "fc_", 48), mock_id("call_")
    args = json.dumps(mock_arguments(tool["schema"])) if tool else ""
    pieces = split_text(args, knobs.chunks or 4) if tool else answer_pieces(text, knobs)
    prompt = max(1, len(body) // 4)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(pieces),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + len(pieces),
    }
    if tool:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": tool["name"],
            "arguments": args,
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": item_id,
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": [], "logprobs": []}],
        }

    def response(status: str, output: list[Any], use: Any) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": req.get("instructions"),
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": req.get("tool_choice", "auto"),
            "tools": req.get("tools") or [],
            "temperature": 1.0,
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": use,
            "metadata": {},
        }

    headers = _headers(mock_id("req_", 32))
    if not req.get("stream"):
        resp.send(200, pad_json(response("completed", [item], usage), knobs.body_bytes), headers=headers)
        return

    def frames() -> Iterator[bytes]:
        seq = iter(range(10**6))

        def ev(kind: str, **fields: Any) -> bytes:
            return sse_event(kind, {"type": kind, "sequence_number": next(seq), **fields})

        yield ev("response.created", response=response("in_progress", [], None))
        yield ev("response.in_progress", response=response("in_progress", [], None))
        pending = {**item, "status": "in_progress"}
        if tool:
            yield ev("response.output_item.added", output_index=0, item={**pending, "arguments": ""})
            for p in pieces:
                yield ev("response.function_call_arguments.delta", item_id=item_id, output_index=0, delta=p)
            yield ev("response.function_call_arguments.done", item_id=item_id, output_index=0, arguments=args)
        else:
            yield ev("response.output_item.added", output_index=0, item={**pending, "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield ev("response.content_part.added", item_id=item_id, output_index=0, content_index=0, part=part)
            for p in pieces:
                yield ev(
                    "response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=p, logprobs=[]
                )
            full = "".join(pieces)
            yield ev(
                "response.output_text.done", item_id=item_id, output_index=0, content_index=0, text=full, logprobs=[]
            )
            yield ev(
                "response.content_part.done",
                item_id=item_id,
                output_index=0,
                content_index=0,
                part={**part, "text": full},
            )
        yield ev("response.output_item.done", output_index=0, item=item)
        yield ev("response.completed", response=response("completed", [item], usage))

    await send_stream(resp, frames(), knobs, headers=headers)
