"""Both MCP eras over streamable HTTP: the official SDK client and a real MCPServer through brownout. The handshake
era (initialize, Mcp-Session-Id, the GET stream) and the 2026-07-28 revision (a per-request envelope, Mcp-Method and
Mcp-Name, server/discover, subscriptions/listen) are recognised request by request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from brownout.core.exchange import Exchange
from brownout.proxy.embed import ProxyHandle
from tests.e2e.conftest import Spans
from tests.e2e.mcp_server import weather_server
from tests.e2e.test_mcp_sdk import _wait_for


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with weather_server() as url:
        yield url


def _client(proxy: ProxyHandle, url: str, session: str, mode: str) -> Client:
    http = httpx2.AsyncClient(proxy=proxy.proxy_url(session), timeout=10)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def test_each_request_knows_its_era_and_version(brownout_proxy: Callable[..., ProxyHandle], mcp_url: str) -> None:
    exchanges: list[Exchange] = []
    proxy = brownout_proxy(on_exchange=exchanges.append)
    spans = Spans(proxy)

    async def agent(session: str, mode: str) -> None:
        async with _client(proxy, mcp_url, session, mode) as client:
            await client.list_tools()
            await client.call_tool("get_weather", {"city": "Paris"})

    asyncio.run(agent("old", "legacy"))
    asyncio.run(agent("new", "2026-07-28"))
    asyncio.run(agent("auto", "auto"))
    _wait_for(exchanges, lambda xs: sum(x.operation == "session_end" for x in xs) == 1)
    seen = [(x.session, x.method, x.operation, x.mcp_era, x.notes.get("mcp_protocol_version")) for x in exchanges]
    for row in seen:
        print(row)
    for s in spans.all():
        print(s.name, dict(s.attributes))
    assert False
