"""An OpenAI Agents SDK agent and the MCP SDK's streamable HTTP client, recorded through the real proxy and
replayed with their servers gone: the same answer, the same tools and tool results."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from brownout.proxy.embed import ProxyHandle
from tests.e2e.mcp_server import weather_server
from tests.experiment.test_framework_agent import AGENT, PROXY_VARS, _has_agents_sdk
from tests.record.support import load, mock_upstream, player, recorder, wait_recorded


def run_framework_agent(proxy: ProxyHandle, upstream_url: str, city: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env.update(proxy.env_for("framework-1"))
    env["DEMO_UPSTREAM"] = upstream_url
    return subprocess.run(
        [sys.executable, str(AGENT), city], env=env, cwd=AGENT.parent, capture_output=True, text=True, timeout=90
    )


@pytest.mark.slow
@pytest.mark.skipif(not _has_agents_sdk(), reason="the OpenAI Agents SDK is not installed")
@pytest.mark.timeout(240)
def test_openai_agents_run_replays_without_its_upstream(brownout_proxy, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        live = run_framework_agent(rec, up.url, "Tokyo")
        assert live.returncode == 0, live.stderr
        calls = len(up.requests_seen)
        wait_recorded(rec, calls)
        url = up.url
    providers = {r.provider for c in load(cassettes) for r in c.exchanges}
    assert {"openai", "http"} <= providers  # the model calls and the weather tool API
    play = player(brownout_proxy, cassettes, speed=0)
    replayed = run_framework_agent(play, url, "Tokyo")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == live.stdout and "18" in live.stdout
    assert play.addon.tape.counts["hit"] == calls and play.addon.tape.counts["miss"] == 0


async def mcp_session(proxy: ProxyHandle, url: str, mode: str | None) -> dict[str, Any]:
    http = httpx2.AsyncClient(proxy=proxy.proxy_url("mcp-1"), timeout=10)
    kwargs = {"mode": mode} if mode else {}
    async with Client(streamable_http_client(url, http_client=http), **kwargs) as client:
        tools = await client.list_tools()
        result = await client.call_tool("get_weather", {"city": "Paris"})
        failing = await client.call_tool("flaky_forecast", {"city": "Paris"})
    return {
        "tools": sorted(t.name for t in tools.tools),
        "result": result.model_dump(),
        "failing": (failing.is_error, failing.model_dump()),
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", [None, "legacy"], ids=["default", "legacy"])
def test_mcp_streamable_http_session_replays_without_its_server(
    brownout_proxy, tmp_path: Path, mode: str | None
) -> None:
    cassettes = tmp_path / "cassettes"
    with weather_server() as url:
        rec = recorder(brownout_proxy, cassettes)
        recorded = asyncio.run(mcp_session(rec, url, mode))
        wait_recorded(rec, 4)
    assert recorded["tools"] == ["flaky_forecast", "get_weather"] and recorded["failing"][0] is True
    operations = [r.operation for c in load(cassettes) for r in c.exchanges]
    assert {"tools/list", "tools/call"} <= set(operations)
    play = player(brownout_proxy, cassettes, speed=0)
    assert asyncio.run(mcp_session(play, url, mode)) == recorded
    assert play.addon.tape.counts["miss"] == 0
