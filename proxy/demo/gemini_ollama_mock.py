"""Gemini generateContent / streamGenerateContent and Ollama /api/chat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import Knobs, answer_pieces, dumps, mock_arguments, mock_id, pad_json, tool_answer
from brownout.proxy.demo.sse import ndjson_line, send_stream

__all__ = ["gemini", "gemini_error", "ollama_chat"]

_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def gemini_error(status: int) -> bytes:
    return dumps(
        {
            "error": {
                "code": status,
                "message": f"Mock upstream forced status {status}.",
                "status": _GEMINI_STATUS.get(status, "UNKNOWN"),
            }
        }
    )


def _gemini_plan(req: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    contents = req.get("contents") or []
    last = contents[-1] if contents and isinstance(contents[-1], dict) else {}
    for part in last.get("parts") or []:
        if isinstance(part, dict) and "functionResponse" in part:
            return None, tool_answer(json.dumps(part["functionResponse"].get("response", {})))
    for tool in req.get("tools") or []:
        decls = tool.get("functionDeclarations") or tool.get("function_declarations") or []
        if decls:
            return decls[0], None
    return None, None


async def gemini(path: str, query: str, body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
    model = path.split("/models/", 1)[-1].split(":", 1)[0]
    stream = path.endswith(":streamGenerateContent")
    decl, text = _gemini_plan(req)
    prompt = max(1, len(body) // 4)
    rid = mock_id("", 22)

    def candidate(parts: list[Any], finish: str | None) -> dict[str, Any]:
        c: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            c["finishReason"] = finish
        return c

    def usage(out: int) -> dict[str, int]:
        return {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out}

    if decl:
        call = {
            "functionCall": {"name": decl.get("name", "get_weather"), "args": mock_arguments(decl.get("parameters"))}
        }
        chunks = [{"candidates": [candidate([call], "STOP")], "usageMetadata": usage(1)}]
    else:
        pieces = answer_pieces(text, knobs)
        chunks = [
            {
                "candidates": [candidate([{"text": p}], "STOP" if i == len(pieces) - 1 else None)],
                "usageMetadata": usage(i + 1),
            }
            for i, p in enumerate(pieces)
        ]
    for c in chunks:
        c.update(modelVersion=model, responseId=rid)
    if not stream:
        whole = dict(chunks[-1])
        if not decl:
            whole["candidates"] = [candidate([{"text": "".join(p for p in pieces)}], "STOP")]
        resp.send(200, pad_json(whole, knobs.body_bytes))
        return
    if "alt=sse" in query:
        # Gemini's SSE ends each event with CRLF CRLF and has no terminal [DONE].
        frames: Iterator[bytes] = (b"data: " + dumps(c) + b"\r\n\r\n" for c in chunks)
        await send_stream(resp, frames, knobs)
    else:  # without alt=sse Gemini streams one JSON array
        await send_stream(resp, _json_array(chunks), knobs, content_type="application/json")


def _json_array(chunks: list[dict[str, Any]]) -> Iterator[bytes]:
    for i, c in enumerate(chunks):
        yield (b"[" if i == 0 else b",\r\n") + dumps(c)
    yield b"]"


async def ollama_chat(body: bytes, resp: Responder, knobs: Knobs) -> None:
    req = json.loads(body or b"{}")
    model = req.get("model", "llama3.2")
    messages = req.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    tools = req.get("tools") or []
    created = "2025-01-01T00:00:00.000000Z"
    prompt = max(1, len(body) // 4)
    done_fields = {
        "done": True,
        "done_reason": "stop",
        "total_duration": 1_000_000,
        "load_duration": 100_000,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 200_000,
    }
    if tools and last.get("role") != "tool":
        fn = tools[0].get("function", {}) if isinstance(tools[0], dict) else {}
        msg = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": fn.get("name", "get_weather"), "arguments": mock_arguments(fn.get("parameters"))}}
            ],
        }
        lines = [{"model": model, "created_at": created, "message": msg, "done": False}]
        final_text = ""
    else:
        text = tool_answer(str(last.get("content", ""))) if last.get("role") == "tool" else None
        pieces = answer_pieces(text, knobs)
        lines = [
            {"model": model, "created_at": created, "message": {"role": "assistant", "content": p}, "done": False}
            for p in pieces
        ]
        final_text = "".join(pieces)
    final = {
        "model": model,
        "created_at": created,
        "message": {"role": "assistant", "content": ""},
        **done_fields,
        "eval_count": len(lines),
        "eval_duration": 500_000,
    }
    if req.get("stream", True) is False:
        whole = {
            **final,
            "message": lines[0]["message"] if not final_text else {"role": "assistant", "content": final_text},
        }
        resp.send(200, pad_json(whole, knobs.body_bytes))
        return
    await send_stream(resp, (ndjson_line(x) for x in [*lines, final]), knobs, content_type="application/x-ndjson")
