"""An MCP session (the official SDK against a real MCP server) through the proxy, discovered from its exchanges log."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from brownout.proxy.cli import main
from brownout.proxy.embed import ProxyHandle
from brownout.proxy.experiment.check import check_experiment
from tests.e2e.mcp_server import weather_server


async def _session(proxy: ProxyHandle, url: str) -> None:
    http = httpx2.AsyncClient(proxy=proxy.proxy_url("mcp-agent"), timeout=10)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        await client.list_tools()
        await client.call_tool("get_weather", {"city": "Reykjavik"})
        await client.call_tool("get_weather", {"city": "Quito"})
        await client.call_tool("flaky_forecast", {"city": "Hanoi"})


@pytest.mark.timeout(120)
def test_mcp_servers_methods_and_tools(brownout_proxy, tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    with weather_server() as url:
        proxy = brownout_proxy(f"version: 1\nexporters: {{jsonl: {{exchanges_path: {log}}}}}\n")
        asyncio.run(_session(proxy, url))
        deadline = time.monotonic() + 10
        while sum(1 for r in proxy.addon.pipeline.exporters.recent_exchanges() if r["mcp_method"] == "tools/call") < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        log_writer = proxy.addon.pipeline.exporters.exchange_log
        assert log_writer is not None and log_writer.flush(10)  # the log is written off the event loop
    exp = tmp_path / "exp.yaml"
    result = CliRunner().invoke(main, ["discover", str(log), "--json", "--out", str(exp), "--agent", "python a.py"])
    assert result.exit_code == 0, result.output
    inv = json.loads(result.stdout)
    (server,) = inv["mcp_servers"].values()
    assert server["methods"]["tools/list"] == 1 and server["methods"]["tools/call"] == 3
    assert server["tools"]["get_weather"] == {
        "calls": 2,
        "declared": True,
        "shapes": [{"shape": {"city": "string"}, "calls": 2}],
    }
    assert server["tools"]["flaky_forecast"]["calls"] == 1 and server["tools"]["flaky_forecast"]["declared"]
    # The tool whose backend is down answered with isError: an error the traffic already showed.
    assert [e["error_type"] for e in inv["errors"]] == ["tool_error"]
    assert inv["providers"] == {} and inv["sessions"]["mcp-agent"]["tool_calls"] == 3
    for city in ("Reykjavik", "Quito", "Hanoi"):
        assert city not in result.stdout and city not in exp.read_text(encoding="utf-8")
    config = check_experiment(exp.read_text(encoding="utf-8"), str(exp), tmp_path)
    injection = next(p for p in config.phases if p.name == "tools-injection")
    assert sorted(r["match"]["tool"] for r in injection.rules or []) == ["flaky_forecast", "get_weather"]
    assert all(r["match"]["mcp_method"] == "tools/call" for r in injection.rules or [])
    assert {i["type"] for i in config.invariants} >= {"mcp_tools", "tool_arguments_json", "tool_policy"}
    assert not any(p.name.startswith("llm-") for p in config.phases)
