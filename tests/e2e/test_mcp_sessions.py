"""The session failures MCP users meet, between the official SDK client and a real MCPServer through brownout:
a session the server forgets (404, then whatever the client does next), and a server that goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from brownout.core.exchange import Exchange
from brownout.invariants.records import Violation
from brownout.proxy.embed import ProxyHandle
from tests.e2e.mcp_server import weather_server
from tests.e2e.test_mcp_sdk import _wait_for


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with weather_server() as url:
        yield url


def _proxied(
    brownout_proxy: Callable[..., ProxyHandle], config: str
) -> tuple[ProxyHandle, list[Exchange], list[Violation]]:
    exchanges: list[Exchange] = []
    proxy = brownout_proxy(config, on_exchange=exchanges.append)
    violations: list[Violation] = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)
    return proxy, exchanges, violations


def _client(proxy: ProxyHandle, url: str, session: str, mode: str = "legacy") -> Client:
    http = httpx2.AsyncClient(proxy=proxy.proxy_url(session), timeout=10)
    return Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=5)


def test_an_expired_session_stays_expired_until_the_client_starts_a_new_one(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    config = """
rules:
  - name: expire
    match: {mcp_method: tools/call}
    schedule: {after: 1, first: 1}
    fault: {type: session_expired}
"""
    proxy, exchanges, _ = _proxied(brownout_proxy, config)

    async def agent() -> list[Any]:
        errors: list[Any] = []
        async with _client(proxy, mcp_url, "expiring") as client:
            await client.list_tools()
            await client.call_tool("get_weather", {"city": "Oslo"})
            for again in (client.call_tool("get_weather", {"city": "Oslo"}), client.list_tools()):
                with pytest.raises(MCPError) as expired:
                    await again
                errors.append((expired.value.error.code, expired.value.error.message))
        async with _client(proxy, mcp_url, "expiring") as fresh:  # what the spec asks: a new session
            errors.append((await fresh.call_tool("get_weather", {"city": "Oslo"})).is_error)
        return errors

    assert asyncio.run(agent()) == [(-32001, "Session not found"), (-32001, "Session not found"), False]
    _wait_for(exchanges, lambda xs: sum(x.operation == "session_end" for x in xs) == 2)
    time.sleep(0.2)
    sessions = [x.response_headers.get("mcp-session-id") for x in exchanges if x.operation == "initialize"]
    old, new = sessions
    of_old = [x for x in exchanges if x.notes.get("mcp_session_id") == old and x.operation != "initialize"]
    expired = [(x.operation, x.status) for x in of_old if x.faults]
    # The call the rule fired on, then the listing and the DELETE of the dead session (the schedule was spent).
    assert expired[:2] == [("tools/call", 404), ("tools/list", 404)] and ("session_end", 404) in expired
    stream = next(x for x in of_old if x.operation == "server_stream")
    assert stream.error_type == "connection" and "the session went away" in (stream.error_message or "")
    assert all(not x.faults and x.status in (200, 202) for x in exchanges if x.notes.get("mcp_session_id") == new)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_server_that_goes_away_resets_its_calls_and_cuts_its_streams_until_it_is_back(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str
) -> None:
    config = """
rules:
  - name: crash
    match: {tool: get_weather}
    schedule: {after: 1, first: 1}
    fault: {type: server_gone, down_s: 1.5}
"""
    proxy, exchanges, _ = _proxied(brownout_proxy, config)
    session = f"gone-{mode}"

    async def until_gone() -> None:
        async with _client(proxy, mcp_url, session, mode) as client:
            await client.list_tools()
            await client.call_tool("get_weather", {"city": "Oslo"})
            await client.call_tool("get_weather", {"city": "Oslo"})  # the server goes away

    async def while_gone() -> None:
        async with _client(proxy, mcp_url, session, mode) as client:  # reconnects at once
            await client.list_tools()

    async def back() -> bool:
        async with _client(proxy, mcp_url, session, mode) as client:
            return (await client.call_tool("get_weather", {"city": "Oslo"})).is_error

    # The SDK client's transport fails with the connection: the reset ends the client, as a real crash does.
    for attempt in (until_gone, while_gone):
        with pytest.raises(Exception) as failed:  # an ExceptionGroup around the transport error
            asyncio.run(attempt())
        assert "ReadError" in repr(
            failed.value.exceptions if isinstance(failed.value, ExceptionGroup) else failed.value
        )
    time.sleep(1.6)
    assert asyncio.run(back()) is False
    _wait_for(exchanges, lambda xs: sum(x.tool_name == "get_weather" and x.status == 200 for x in xs) == 2)
    reset = [(x.operation, x.status, x.error_type) for x in exchanges if x.faults]
    first = "initialize" if mode == "legacy" else "tools/list"  # a pinned 2026-07-28 client has no handshake
    assert reset == [("tools/call", None, "connection"), (first, None, "connection")]
    if mode == "legacy":  # the session's GET stream went down with the server
        stream = next(x for x in exchanges if x.operation == "server_stream")
        assert (stream.error_type, stream.error_message) == ("connection", "the server went away (brownout rule crash)")
