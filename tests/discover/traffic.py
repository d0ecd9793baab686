"""Hand-built exchanges of a small agent, as exchange-log records: two LLM providers, MCP, a tool API."""

from __future__ import annotations

import itertools
import json
from typing import Any

from brownout.core.exchange import Cost, Exchange, FaultRecord, Timings, ToolCall, ToolSpec
from brownout.exporters.jsonl import exchange_summary
from tests.invariants.builders import T0, llm, tool, weather_tool

__all__ = ["SECRET_CITY", "exchanges", "records", "tool_api"]

SECRET_CITY = "Zzyzx-4111111111111111"  # an argument value that must never surface
_ids = itertools.count(1)


def tool_api(path: str, *, session: str = "s1", status: int | None = 200, body: str = "", **fields: Any) -> Exchange:
    """A plain JSON tool API call (provider http)."""
    ex = Exchange(
        id=f"api-{next(_ids)}",
        session=session,
        method="POST" if body else "GET",
        host="tools.example.com",
        port=443,
        path=path,
        provider="http",
        operation="execute_tool",
        tool_name=path.split("?")[0].rsplit("/", 1)[-1],
        status=status,
        timings=Timings(start=T0, end=T0 + 0.1),
    )
    if body:
        ex.tool_calls = [ToolCall(ex.tool_name or "", body)]
    for key, value in fields.items():
        setattr(ex, key, value)
    return ex


def exchanges() -> list[Exchange]:
    args = json.dumps({"city": SECRET_CITY, "days": 2})
    cost = Cost(total=0.002, input=0.0015, output=0.0005, currency="USD", model="gpt-4o", provider="openai")
    send_email = ToolSpec("send_email", {"type": "object"})
    return [
        llm(0, calls=[("get_weather", args)], tools=[weather_tool(), send_email], cost=cost),
        llm(1, stream=True, stream_complete=True, tools=[weather_tool()], cost=cost, retry_count=1),
        llm(2, stream=True, stream_complete=False, model="ft:gpt-4o[eu]*", usage=(100, 0)),
        llm(
            3,
            provider="anthropic",
            host="api.anthropic.com",
            model="claude-3-5-haiku",
            stream=True,
            calls=[("lookup", json.dumps({"q": SECRET_CITY}))],
            usage=(40, 6),
        ),
        llm(4, status=429, usage=None, faults=[FaultRecord("rate-limited", "http_error")]),
        tool("get_weather", {"city": SECRET_CITY}, 5),
        tool("get_weather", {"city": SECRET_CITY, "units": "metric"}, 6, session="s2"),
        tool(
            "noop",
            {},
            7,
            session="s2",
            mcp_method="tools/list",
            operation="tools/list",
            tool_name=None,
            tool_calls=[],
            tools_declared=[weather_tool(), ToolSpec("noop")],
        ),
        tool_api(f"/v1/search?q={SECRET_CITY}&limit=3"),
        tool_api("/v1/search?q=x", status=None, error_type="connection"),
        tool_api("/v1/notes", body=json.dumps({"title": SECRET_CITY, "tags": ["a"]}), session="s2"),
        tool_api("/favicon.ico", operation="http", tool_name="favicon"),
    ]


def records() -> list[dict[str, Any]]:
    """The exchanges as the exchange log writes them."""
    return [exchange_summary(ex) for ex in exchanges()]
