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

from brownout.proxy.embed import ProxyHandle
from tests.e2e.mcp_listen_server import listen_server
from tests.e2e.mcp_server import weather_server
from tests.e2e.test_mcp_sdk import _proxied, _wait_for


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with weather_server() as url:
        yield url


def _client(proxy: ProxyHandle, url: str, session: str, mode: str = "legacy") -> Client:
    http = httpx2.AsyncClient(proxy=proxy.proxy_url(session), timeout=10)
    return Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=5)


def test_an_expired_session_stays_expired_until_the_client_starts_a_new_one(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    config = """
invariants: [{type: mcp_reconnect_discipline}]
rules:
  - name: expire
    match: {mcp_method: tools/call}
    schedule: {after: 1, first: 1}
    fault: {type: session_expired}
"""
    proxy, exchanges, violations = _proxied(brownout_proxy, config)

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
    # Listing on the dead session is what the spec forbids (the SDK client leaves reconnecting to its caller);
    # the new session that followed at once is what it asks for.
    (dead,) = [v for v in violations if v.details["check"] == "expired_session"]
    assert dead.message.startswith("tools/list sent on an MCP session") and dead.rule == "expire"
    assert {v.details["check"] for v in violations} <= {"expired_session"}


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


def test_a_header_mismatch_makes_the_sdk_client_list_again_and_resend(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    config = """
rules:
  - name: mismatch
    match: {tool: get_weather}
    schedule: {first: 1}
    fault: {type: header_mismatch, header: mcp-name}
  - name: always
    match: {tool: flaky_forecast}
    fault: {type: header_mismatch}
"""
    proxy, exchanges, _ = _proxied(brownout_proxy, config)

    async def agent() -> tuple[bool, tuple[int, str]]:
        async with _client(proxy, mcp_url, "mismatch", "2026-07-28") as client:
            recovered = await client.call_tool("get_weather", {"city": "Oslo"})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("flaky_forecast", {"city": "Oslo"})
            return recovered.is_error, (refused.value.error.code, refused.value.error.message)

    recovered, refused = asyncio.run(agent())
    assert recovered is False
    assert refused == (-32020, "mcp-method header does not match the request body's method")
    _wait_for(exchanges, lambda xs: len(xs) >= 6)
    seen = [(x.operation, x.tool_name, x.status, x.error_type) for x in exchanges]
    # The spec's recovery: the call refused, the listing fetched again, the call sent once more.
    assert seen[:3] == [
        ("tools/call", "get_weather", 400, "header_mismatch"),
        ("tools/list", None, 200, None),
        ("tools/call", "get_weather", 200, None),
    ]
    assert [s[2:] for s in seen[3:]] == [(400, "header_mismatch"), (200, None), (400, "header_mismatch")]


def test_an_unsupported_version_sends_an_auto_client_back_to_the_handshake_and_fails_a_pinned_one(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    config = """
rules:
  - name: rolled-back
    match: {mcp_era: modern}
    fault: {type: unsupported_version}
"""
    proxy, exchanges, _ = _proxied(brownout_proxy, config)

    async def auto() -> str | None:
        async with _client(proxy, mcp_url, "auto", "auto") as client:
            await client.call_tool("get_weather", {"city": "Oslo"})
            return client.session.protocol_version

    async def pinned() -> Any:
        async with _client(proxy, mcp_url, "pinned", "2026-07-28") as client:
            with pytest.raises(MCPError) as refused:
                await client.list_tools()
            return refused.value.error

    assert asyncio.run(auto()) == "2025-11-25"
    error = asyncio.run(pinned())
    assert (error.code, error.message, error.data) == (
        -32022,
        "Unsupported protocol version",
        {"supported": ["2025-11-25"], "requested": "2026-07-28"},
    )
    _wait_for(exchanges, lambda xs: any(x.session == "pinned" for x in xs))
    auto_seen = [(x.operation, x.status, x.mcp_era) for x in exchanges if x.session == "auto"]
    assert auto_seen[:2] == [("server/discover", 400, "modern"), ("initialize", 200, "handshake")]


def test_latency_on_a_listen_stream_delays_what_it_carries(brownout_proxy: Callable[..., ProxyHandle]) -> None:
    config = """
rules:
  - name: slow-notes
    match: {mcp_method: subscriptions/listen}
    fault: {type: latency, phase: events, delay_ms: 600}
"""
    proxy, exchanges, _ = _proxied(brownout_proxy, config)

    async def agent() -> tuple[float, float]:
        async with _client(proxy, url, "slow-listen", "2026-07-28") as client:
            opened = time.monotonic()
            async with client.listen(tools_list_changed=True) as sub:
                acked = time.monotonic() - opened  # the acknowledgment is on the stream too
                changed = time.monotonic()
                await client.call_tool("change_tools", {})
                await asyncio.wait_for(sub.__anext__(), 5)
                return acked, time.monotonic() - changed

    with listen_server() as url:
        acked, heard = asyncio.run(agent())
    assert acked >= 0.55 and heard >= 0.55, (acked, heard)
    _wait_for(exchanges, lambda xs: any(x.operation == "subscriptions/listen" for x in xs))
    listen = next(x for x in exchanges if x.operation == "subscriptions/listen")
    assert listen.faults[0].params["delay_s"] == 0.6 and listen.error_type is None
    calls = [x for x in exchanges if x.tool_name == "change_tools"]
    assert calls[0].timings.duration_s is not None and calls[0].timings.duration_s < 0.5  # the call itself is not slow


def _reconnecting(proxy: ProxyHandle, url: str, session: str, waits: list[float]) -> int:
    """An agent that opens a new client after each failure, waiting `waits[i]` before attempt i; the attempts made."""

    async def attempt() -> None:
        async with _client(proxy, url, session) as client:
            await client.call_tool("get_weather", {"city": "Oslo"})

    for n, wait in enumerate(waits, start=1):
        time.sleep(wait)
        try:
            asyncio.run(attempt())
            return n
        except Exception:  # the SDK client's transport error, wrapped in task groups
            continue
    return len(waits)


@pytest.mark.parametrize(
    ("down_s", "waits", "found"),
    [(30, [0.0] * 7, ["backoff", "storm"]), (2.5, [0.0, 0.6, 1.2, 2.4], [])],
    ids=["storm", "backoff"],
)
def test_reconnect_discipline_after_the_server_goes_away(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, down_s: float, waits: list[float], found: list[str]
) -> None:
    config = f"""
invariants: [{{type: mcp_reconnect_discipline, max_per_minute: 5}}]
rules:
  - name: crash
    match: {{tool: get_weather}}
    schedule: {{after: 1, first: 1}}
    fault: {{type: server_gone, down_s: {down_s}}}
"""
    proxy, _, violations = _proxied(brownout_proxy, config)
    assert _reconnecting(proxy, mcp_url, "reconnecting", [0.0]) == 1  # works
    _reconnecting(proxy, mcp_url, "reconnecting", waits)
    time.sleep(0.3)
    assert [v.details["check"] for v in violations] == found
    assert all(v.rule == "crash" for v in violations)
