"""MCP spans over streamable HTTP follow the MCP semantic conventions: the official SDK client, a real MCPServer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import StatusCode

from brownout.proxy.embed import ProxyHandle
from tests.e2e.conftest import Spans
from tests.e2e.mcp_server import weather_server


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with weather_server() as url:
        yield url


def test_spans_carry_the_mcp_session_protocol_and_errors(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    proxy = brownout_proxy(
        """
rules:
  - name: bad-params
    match: {tool: get_weather}
    schedule: {first: 1}
    fault: {type: http_error, error_type: invalid_params, message: "unknown city"}
"""
    )
    spans = Spans(proxy)

    async def agent() -> None:
        http = httpx2.AsyncClient(proxy=proxy.proxy_url("spans"), timeout=10)
        async with Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client:
            await client.list_tools()
            with pytest.raises(MCPError):
                await client.call_tool("get_weather", {"city": "Atlantis"})
            await client.call_tool("flaky_forecast", {"city": "Oslo"})

    asyncio.run(agent())
    found = {s.name: s for s in spans.wait("spans", 5)}
    init, listing = found["initialize"], found["tools/list"]
    bad, flaky = found["tools/call get_weather"], found["tools/call flaky_forecast"]
    session = listing.attributes["mcp.session.id"]
    # The server issues the session id in its initialize answer; every later request carries it.
    assert session and init.attributes["mcp.session.id"] == session and flaky.attributes["mcp.session.id"] == session
    assert init.attributes["mcp.protocol.version"] == listing.attributes["mcp.protocol.version"]
    assert bad.attributes["error.type"] == "-32602" and bad.attributes["rpc.response.status_code"] == "-32602"
    assert (bad.status.status_code, bad.status.description) == (StatusCode.ERROR, "unknown city")
    assert flaky.attributes["error.type"] == "tool_error" and "rpc.response.status_code" not in flaky.attributes
    for span in (bad, flaky):
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["network.transport"] == "tcp" and span.attributes["http.response.status_code"] == 200
        assert span.attributes["jsonrpc.request.id"].isdigit()


def test_the_session_end_and_its_stream_carry_the_session_id(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    # The GET stream and the DELETE carry no JSON-RPC body: only their headers name the session.
    proxy = brownout_proxy()
    spans = Spans(proxy)

    async def agent() -> None:
        http = httpx2.AsyncClient(proxy=proxy.proxy_url("ending"), timeout=10)
        async with Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client:
            await client.list_tools()

    asyncio.run(agent())
    spans.wait("ending", 5)  # initialize, notifications/initialized, tools/list, the GET stream, the DELETE
    found = {s.attributes["brownout.operation"]: s for s in spans.of("ending")}
    session = found["tools/list"].attributes["mcp.session.id"]
    assert found["session_end"].attributes["mcp.session.id"] == session
    assert found["server_stream"].attributes["mcp.session.id"] == session
    assert (
        found["session_end"].attributes["mcp.protocol.version"]
        == found["tools/list"].attributes["mcp.protocol.version"]
    )
