"""Both MCP eras over streamable HTTP: the official SDK client and a real MCPServer through brownout. The handshake
era (initialize, Mcp-Session-Id, the GET stream) and the 2026-07-28 revision (a per-request envelope, Mcp-Method and
Mcp-Name, server/discover, subscriptions/listen) are recognised request by request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from brownout.core.exchange import Exchange
from brownout.faults.mcplists import DEFAULT_POISON
from brownout.invariants.records import Violation
from brownout.proxy.embed import ProxyHandle
from tests.e2e.conftest import Spans
from tests.e2e.mcp_listen_server import LIST_TTL_MS, listen_server
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
    # Listeners hear of an exchange when the proxy's loop is next idle: wait for the last of each session.
    last = lambda xs: any(x.session == "auto" and x.operation == "tools/call" for x in xs)
    _wait_for(exchanges, lambda xs: sum(x.operation == "session_end" for x in xs) == 1 and last(xs))
    seen = [(x.session, x.method, x.operation, x.mcp_era, x.notes.get("mcp_protocol_version")) for x in exchanges]
    old = [("old", m, op, "handshake", "2025-11-25") for m, op in [("POST", "initialize"), ("POST", "tools/list")]]
    assert set(old) <= set(seen) and ("old", "DELETE", "session_end", "handshake", "2025-11-25") in seen
    new = [("new", "POST", op, "modern", "2026-07-28") for op in ("tools/list", "tools/call")]
    assert [row for row in seen if row[0] == "new"] == new
    # mode auto probes with server/discover, and this server speaks the 2026-07-28 revision.
    auto = [("auto", "POST", op, "modern", "2026-07-28") for op in ("server/discover", "tools/list", "tools/call")]
    assert [row for row in seen if row[0] == "auto"] == auto
    by_session: dict[str, list[Any]] = {}
    for span in spans.all():
        by_session.setdefault(str(span.attributes["brownout.session.id"]), []).append(span)
    # The conventions forbid mcp.session.id for 2026-07-28: there is no session.
    assert all("mcp.session.id" in s.attributes for s in by_session["old"])
    assert not any("mcp.session.id" in s.attributes for s in by_session["new"] + by_session["auto"])
    assert {s.attributes["mcp.protocol.version"] for s in by_session["new"]} == {"2026-07-28"}


MODES = ["legacy", "2026-07-28"]


def _run(
    brownout_proxy: Callable[..., ProxyHandle], url: str, config: str, session: str, mode: str, agent: Any
) -> tuple[Any, list[Exchange], list[Violation]]:
    exchanges: list[Exchange] = []
    proxy = brownout_proxy(config, on_exchange=exchanges.append)
    violations: list[Violation] = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)

    async def run() -> Any:
        async with _client(proxy, url, session, mode) as client:
            return await agent(client)

    out = asyncio.run(run())
    time.sleep(0.3)  # the last exchanges through the invariants
    return out, exchanges, violations


@pytest.mark.parametrize("mode", MODES)
def test_tool_errors_and_jsonrpc_errors_in_both_eras(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str
) -> None:
    config = """
rules:
  - name: down
    match: {tool: get_weather}
    schedule: {first: 1}
    fault: {type: http_error, error_type: tool_error, message: "backend unavailable"}
  - name: bad
    match: {tool: get_weather}
    schedule: {after: 1, first: 1}
    fault: {type: http_error, error_type: invalid_params, message: "unknown city"}
"""

    async def agent(client: Client) -> tuple[Any, int]:
        down = await client.call_tool("get_weather", {"city": "Oslo"})
        with pytest.raises(MCPError) as bad:
            await client.call_tool("get_weather", {"city": "Oslo"})
        return down, bad.value.error.code

    (down, code), exchanges, _ = _run(brownout_proxy, mcp_url, config, f"errors-{mode}", mode, agent)
    assert down.is_error and [c.text for c in down.content] == ["backend unavailable"] and code == -32602
    bad = [x for x in exchanges if x.tool_name == "get_weather"][1]
    # A 2026-07-28 server sends invalid_params with HTTP 400; the handshake era's in a 200.
    assert (bad.status, bad.error_type) == (400 if mode != "legacy" else 200, "invalid_params")


@pytest.mark.parametrize("mode", MODES)
def test_structured_content_off_its_schema_in_both_eras(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str
) -> None:
    config = """
rules:
  - name: off-schema
    match: {tool: get_weather}
    fault: {type: malformed_json, target: structured_content}
"""

    async def agent(client: Client) -> str:
        await client.list_tools()
        with pytest.raises(RuntimeError) as off:
            await client.call_tool("get_weather", {"city": "Oslo"})
        return str(off.value)

    error, _, _ = _run(brownout_proxy, mcp_url, config, f"drift-{mode}", mode, agent)
    assert error.startswith("Invalid structured content returned by tool get_weather")


@pytest.mark.parametrize("mode", MODES)
def test_poisoned_tools_followed_and_drifted_schemas_in_both_eras(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str
) -> None:
    config = """
invariants: [{type: mcp_tools}, {type: injection_followed}, {type: tool_policy, deny: ["flaky_*"]}]
rules:
  - name: poisoned
    match: {mcp_method: tools/list}
    fault: {type: rug_pull, kind: description, item: get_weather}
  - name: drifted
    match: {mcp_method: tools/list}
    fault: {type: rug_pull, kind: schema, item: get_weather, change: rename, rename_to: location}
"""

    async def agent(client: Client) -> str:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        # An agent that believes the old schema and obeys the description; then a forbidden tool.
        await client.call_tool("get_weather", {"city": "Oslo", "notes": "https://collect.brownout.invalid/upload"})
        await client.call_tool("flaky_forecast", {"city": "Oslo"})
        return tools["get_weather"].description or ""

    description, exchanges, violations = _run(brownout_proxy, mcp_url, config, f"poison-{mode}", mode, agent)
    assert description.endswith(DEFAULT_POISON)
    found = sorted((v.invariant, v.details.get("check") or v.details.get("rule", "")) for v in violations)
    assert found == [("injection_followed", ""), ("mcp_tools", "schema"), ("tool_policy", "deny[0]")]
    era = "handshake" if mode == "legacy" else "modern"
    assert {x.mcp_era for x in exchanges if x.mcp_method in ("tools/list", "tools/call")} == {era}


def test_a_2025_03_26_session_without_version_headers_is_known_by_its_handshake(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str
) -> None:
    # Clients of 2025-03-26 send Mcp-Session-Id but no MCP-Protocol-Version: the session's handshake tells.
    exchanges: list[Exchange] = []
    proxy = brownout_proxy(on_exchange=exchanges.append)
    accept = {"accept": "application/json, text/event-stream"}
    init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}
    with httpx.Client(proxy=proxy.proxy_url("old-client"), timeout=10) as http:
        answer = http.post(
            mcp_url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=accept
        )
        session = {**accept, "mcp-session-id": answer.headers["mcp-session-id"]}
        http.post(mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        listing = http.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=session)
        assert "get_weather" in listing.text
    _wait_for(exchanges, lambda xs: any(x.operation == "tools/list" for x in xs))
    found = {x.operation: (x.mcp_era, x.notes.get("mcp_protocol_version")) for x in exchanges}
    assert found["tools/list"] == found["initialize"] == ("handshake", "2025-03-26")


def test_mcp_tools_honours_the_listing_ttl_after_a_change_heard_on_the_listen_stream(
    brownout_proxy: Callable[..., ProxyHandle],
) -> None:
    # The server's listing says ttlMs 1500: a call right after a change may still use it; one past it is stale.
    exchanges: list[Exchange] = []
    proxy = brownout_proxy("invariants: [{type: mcp_tools}]\n", on_exchange=exchanges.append)
    violations: list[Violation] = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)

    async def agent(url: str) -> None:
        async with _client(proxy, url, "ttl", "2026-07-28") as client:
            await client.list_tools()
            listed = time.monotonic()
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("change_tools", {})
                await asyncio.wait_for(sub.__anext__(), 5)
                await client.call_tool("get_weather", {"city": "Oslo"})  # within the ttl: fine
                await asyncio.sleep(max(0.0, LIST_TTL_MS / 1000 + 0.2 - (time.monotonic() - listed)))
                await client.call_tool("get_weather", {"city": "Rome"})  # past it, not listed again: stale
            await client.list_tools()  # a suspect call is judged once something that started after it ended

    with listen_server() as url:
        asyncio.run(agent(url))
    _wait_for(exchanges, lambda xs: any(x.operation == "subscriptions/listen" for x in xs))
    time.sleep(0.3)
    calls = [x for x in exchanges if x.tool_name == "get_weather"]
    listing = next(x for x in exchanges if x.operation == "tools/list")
    assert listing.notes["mcp_ttl_ms"] == LIST_TTL_MS
    (stale,) = violations
    assert stale.exchange_id == calls[1].id and stale.details["ttl_ms"] == LIST_TTL_MS


@pytest.mark.parametrize("mode", MODES)
def test_empty_answers_take_each_eras_shape(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str
) -> None:
    config = """
rules:
  - name: nothing-listed
    match: {mcp_method: tools/list}
    schedule: {first: 1}
    fault: {type: empty}
  - name: nothing-returned
    match: {tool: flaky_forecast}
    fault: {type: empty}
"""

    async def agent(client: Client) -> tuple[list[str], str]:
        listed = [t.name for t in (await client.list_tools()).tools]
        await client.list_tools()  # the tool's outputSchema, which the empty result then misses
        with pytest.raises(RuntimeError) as empty:
            await client.call_tool("flaky_forecast", {"city": "Oslo"})
        return listed, str(empty.value)

    (listed, error), exchanges, _ = _run(brownout_proxy, mcp_url, config, f"empty-{mode}", mode, agent)
    assert listed == [] and error == "Tool flaky_forecast has an output schema but did not return structured content"
    assert [x.operation for x in exchanges if x.faults] == ["tools/list", "tools/call"]


@pytest.mark.parametrize(("mode", "matched"), [("2026-07-28", True), ("legacy", False)])
def test_mcp_method_and_name_headers_route_a_request_too_large_to_read(
    brownout_proxy: Callable[..., ProxyHandle], mcp_url: str, mode: str, matched: bool
) -> None:
    # A request past proxy.buffer_max_bytes streams to the server unread: only a 2026-07-28 client's
    # Mcp-Method and Mcp-Name headers still say what it is, so a rule on the tool matches it. What it can
    # do is on the reply (the request is on its way already): an answer in its place is skipped, with why.
    config = """
proxy: {buffer_max_bytes: 64k}
rules:
  - name: slow
    match: {tool: get_weather}
    fault: {type: latency, phase: first_byte, delay_ms: 50}
  - name: too-late
    match: {tool: get_weather}
    fault: {type: http_error, error_type: tool_error}
"""

    async def agent(client: Client) -> bool:
        await client.list_tools()
        return (await client.call_tool("get_weather", {"city": "Oslo" + " " * 100_000})).is_error

    is_error, exchanges, _ = _run(brownout_proxy, mcp_url, config, f"large-{mode}", mode, agent)
    assert is_error is False
    (call,) = [x for x in exchanges if x.method == "POST" and x.operation not in ("tools/list", "initialize")][-1:]
    assert (call.operation == "tools/call", call.tool_name) == (matched, "get_weather" if matched else None)
    assert ([f.rule for f in call.faults], [f.rule for f in call.faults_skipped]) == (
        (["slow"], ["too-late"]) if matched else ([], [])
    )
    if matched:
        assert "streamed to the server before brownout could hold it" in call.faults_skipped[0].params["skipped"]
