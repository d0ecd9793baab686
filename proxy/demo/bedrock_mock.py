"""AWS Bedrock Runtime: Converse, ConverseStream, InvokeModel and InvokeModelWithResponseStream.

The signature is not checked (any dummy credentials do); everything else is as botocore expects it:
event streams with their CRCs, the `p` padding field Bedrock adds to stream payloads, errors as
`x-amzn-errortype` with `{"message": ...}`. InvokeModel answers Claude's Messages body, the same
answer the Anthropic mock gives, its stream events wrapped in `chunk` payload parts.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from brownout.core.wire.bedrock_faults import EVENTSTREAM_HEADERS, error_response, event
from brownout.proxy.demo import anthropic_mock
from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import Knobs, answer_pieces, dumps, mock_arguments, mock_id, split_text, tool_answer
from brownout.proxy.demo.sse import send_stream

__all__ = ["PATH", "bedrock", "bedrock_error"]

PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<api>converse|converse-stream|invoke|invoke-with-response-stream)$")
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def bedrock_error(status: int) -> tuple[dict[str, str], bytes]:
    _, headers, _ = error_response(status, None, None, None)
    return headers, dumps({"message": f"Mock upstream forced status {status}."})


def _padded(payload: dict[str, Any], n: int) -> dict[str, Any]:
    # Bedrock pads stream payloads with a `p` field of varying length (so sizes tell nothing); clients ignore it.
    return {**payload, "p": _PADDING[: 4 + n % 40]}


def _last_tool_result(messages: list[Any]) -> str | None:
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if last.get("role") != "user":
        return None
    for block in last.get("content") or []:
        result = block.get("toolResult") if isinstance(block, dict) else None
        if isinstance(result, dict):
            parts = [c.get("text") if "text" in c else json.dumps(c.get("json")) for c in result.get("content") or []]
            return "".join(p for p in parts if isinstance(p, str))
    return None


def _converse(req: dict[str, Any], knobs: Knobs, prompt_bytes: int) -> tuple[dict[str, Any], list[bytes]]:
    """A Converse answer, whole and as ConverseStream events."""
    result = _last_tool_result(req.get("messages") or [])
    tools = (req.get("toolConfig") or {}).get("tools") or []
    spec = tools[0].get("toolSpec") if tools and result is None and isinstance(tools[0], dict) else None
    usage = {"inputTokens": max(1, prompt_bytes // 4), "outputTokens": 0, "totalTokens": 0}
    events = [event("messageStart", _padded({"role": "assistant"}, 0))]

    def delta(index: int, d: dict[str, Any]) -> bytes:
        return event("contentBlockDelta", _padded({"contentBlockIndex": index, "delta": d}, len(events)))

    if isinstance(spec, dict):
        preface, args = "I'll look that up.", mock_arguments((spec.get("inputSchema") or {}).get("json"))
        tool_id = mock_id("tooluse_", 22)
        content: list[dict[str, Any]] = [{"text": preface},
                                         {"toolUse": {"toolUseId": tool_id, "name": spec.get("name"), "input": args}}]  # fmt: skip
        events += [delta(0, {"text": preface}), event("contentBlockStop", _padded({"contentBlockIndex": 0}, 1))]
        start = {"toolUse": {"toolUseId": tool_id, "name": spec.get("name")}}
        events.append(event("contentBlockStart", _padded({"contentBlockIndex": 1, "start": start}, 2)))
        pieces = split_text(json.dumps(args), knobs.chunks or 4)
        events += [delta(1, {"toolUse": {"input": p}}) for p in pieces]
        last, stop = 1, "tool_use"
    else:
        pieces = answer_pieces(tool_answer(result) if result is not None else None, knobs)
        content = [{"text": "".join(pieces)}]
        events += [delta(0, {"text": p}) for p in pieces]
        last, stop = 0, "end_turn"
    usage["outputTokens"] = len(pieces)
    usage["totalTokens"] = usage["inputTokens"] + len(pieces)
    events += [
        event("contentBlockStop", _padded({"contentBlockIndex": last}, 3)),
        event("messageStop", _padded({"stopReason": stop}, 4)),
        event("metadata", _padded({"usage": usage, "metrics": {"latencyMs": 120}}, 5)),
    ]
    whole = {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
             "usage": usage, "metrics": {"latencyMs": 120}}  # fmt: skip
    return whole, events


def _chunks(events: list[dict[str, Any]], usage: dict[str, Any]) -> Iterator[bytes]:
    """Claude's stream events as InvokeModelWithResponseStream sends them: one payload part each."""
    for i, ev in enumerate(events):
        if ev["type"] == "message_stop":
            metrics = {"inputTokenCount": usage["input_tokens"], "outputTokenCount": usage["output_tokens"],
                       "invocationLatency": 120, "firstByteLatency": 40}  # fmt: skip
            ev = {**ev, "amazon-bedrock-invocationMetrics": metrics}
        part = {"bytes": base64.b64encode(dumps(ev)).decode("ascii")}
        yield event("chunk", _padded(part, i))


async def bedrock(path: str, body: bytes, resp: Responder, knobs: Knobs) -> None:
    m = PATH.match(path)
    assert m is not None  # the dispatcher routes only matching paths here
    model, api = unquote(m["model"]), m["api"]
    req = json.loads(body or b"{}")
    rid = {"x-amzn-requestid": mock_id("", 32)}
    if api.startswith("converse"):
        whole, events = _converse(req, knobs, len(body))
        if api == "converse":
            resp.send(200, dumps(whole), headers=rid)
        else:
            await send_stream(resp, events, knobs, EVENTSTREAM_HEADERS["content-type"], rid)
        return
    out = anthropic_mock.answer({**req, "model": model}, knobs, len(body))
    usage = out.message["usage"]
    if api == "invoke":
        counts = {"x-amzn-bedrock-input-token-count": str(usage["input_tokens"]),
                  "x-amzn-bedrock-output-token-count": str(usage["output_tokens"])}  # fmt: skip
        resp.send(200, dumps(out.message), headers={**rid, **counts})
        return
    headers = {**rid, "x-amzn-bedrock-content-type": "application/json"}
    await send_stream(resp, _chunks(out.events, usage), knobs, EVENTSTREAM_HEADERS["content-type"], headers)
