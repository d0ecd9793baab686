"""The plain JSON tool API (weather, search, bytes, sse, ping) and an MCP streamable HTTP server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import parse_qs

from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import WEATHER, Knobs, dumps, mock_id, pad_json
from brownout.proxy.demo.sse import sse_event

__all__ = ["PING_BODY", "bytes_body", "mcp", "search", "sse_events", "weather"]

# Exactly 1 KB: the benchmark's hot path (GET /ping) is a 1 KB JSON answer.
PING_BODY = pad_json({"ok": True, "service": "brownout-mock"}, 1024)


def _q(query: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(query).items()}


def weather(query: str, resp: Responder, knobs: Knobs) -> None:
    city = _q(query).get("city", "Paris")
    resp.send(200, pad_json({**WEATHER, "city": city}, knobs.body_bytes))


def search(query: str, resp: Responder, knobs: Knobs) -> None:
    q = _q(query).get("q", "")
    results = [
        {"title": f"Result {i} for {q}", "url": f"https://example.com/{i}", "snippet": f"Snippet {i} about {q}."}
        for i in range(1, 4)
    ]
    resp.send(200, dumps(results))


def bytes_body(n: int, resp: Responder) -> None:
    """`n` bytes of valid JSON: a string of x's (or a shorter valid value for tiny n)."""
    body = b'"' + b"x" * (n - 2) + b'"' if n >= 2 else b"0" * max(n, 0)
    resp.send(200, body)


async def sse_events(query: str, resp: Responder) -> None:
    """`events` ticks `delay_ms` apart; with `stamp=1` each carries `t`, its send time in Unix seconds.

    The stamp lets a client on the same machine measure each event's lateness through a proxy.
    """
    q = _q(query)
    n, delay_s = int(q.get("events", "10")), int(q.get("delay_ms", "100")) / 1000.0
    stamp = q.get("stamp") == "1"
    await resp.start_stream(200, "text/event-stream")
    for i in range(n):
        if i and delay_s:
            await asyncio.sleep(delay_s)
        if stamp:
            await resp.chunk(b'id: %d\nevent: tick\ndata: {"i":%d,"t":%.6f}\n\n' % (i, i, time.time()))
        else:
            await resp.chunk(b'id: %d\nevent: tick\ndata: {"i":%d}\n\n' % (i, i))


_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _mcp_result(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, params = msg.get("method"), msg.get("params") or {}
    if "id" not in msg:
        return None  # a notification: nothing to answer
    rid = msg["id"]
    if method == "initialize":
        result: Any = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "brownout-mock", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [_TOOL]}
    elif method == "tools/call":
        if params.get("name") != "get_weather":
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"},
            }
        city = (params.get("arguments") or {}).get("city", "Paris")
        payload = {**WEATHER, "city": city}
        result = {
            "content": [{"type": "text", "text": json.dumps(payload)}],
            "structuredContent": payload,
            "isError": False,
        }
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


async def mcp(body: bytes, headers: dict[str, str], resp: Responder, knobs: Knobs) -> None:
    try:
        msg = json.loads(body or b"{}")
    except ValueError:
        resp.send(400, dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}))
        return
    if not isinstance(msg, dict):
        resp.send(400, dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}))
        return
    session = headers.get("mcp-session-id") or mock_id("mcp-", 32)
    out_headers = {"mcp-session-id": session}
    answer = _mcp_result(msg)
    if answer is None:
        resp.send(202, b"", headers=out_headers)
        return
    if knobs.sse:
        await resp.start_stream(200, "text/event-stream", out_headers)
        await resp.chunk(sse_event("message", answer))
        return
    resp.send(200, dumps(answer), headers=out_headers)
