"""`brownout mcp-stdio` with the reference MCP servers from npm, started through `npx` as the docs show: the
launcher keeps the real server as a grandchild, and the official MCP SDK client talks to it through brownout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.e2e.npm_servers import NPM_DIR, descendants, npm_env, npx, pid_of, wait_gone
from tests.e2e.test_mcp_stdio import BROWNOUT, _config, _records

FILESYSTEM = "@modelcontextprotocol/server-filesystem"
EVERYTHING = "@modelcontextprotocol/server-everything"


def _client(config: Path, server: list[str], mode: str = "legacy") -> Client:
    params = StdioServerParameters(
        command=BROWNOUT, args=["mcp-stdio", "-c", str(config), "--", *server], cwd=str(NPM_DIR), env=npm_env()
    )
    return Client(stdio_client(params, errlog=sys.stderr), mode=mode, read_timeout_seconds=15)


@pytest.mark.parametrize(
    ("name", "fault"),
    [("crash", "{type: reset}"), ("stuck", "{type: hang, duration_ms: 300}")],
)
def test_reset_and_hang_end_the_whole_server_behind_npx(tmp_path: Path, name: str, fault: str) -> None:
    rules = f"rules:\n  - name: {name}\n    match: {{tool: list_directory}}\n    fault: {fault}\n"
    config = _config(tmp_path, rules + "    schedule: {after: 1}\n")
    (tmp_path / "shared").mkdir()

    async def agent() -> tuple[set[int], str, set[int]]:
        async with _client(config, npx(FILESYSTEM, str(tmp_path / "shared"))) as client:
            first = await client.call_tool("list_directory", {"path": str(tmp_path / "shared")})
            assert not first.is_error
            server = descendants(pid_of(str(config)))  # npx, and the real server below it
            with pytest.raises(MCPError) as closed:
                await client.call_tool("list_directory", {"path": str(tmp_path / "shared")})
            # Still inside the session: the fault ended the server, not the client leaving.
            return server, str(closed.value), wait_gone(server)

    server, error, survivors = asyncio.run(agent())
    assert len(server) >= 2  # the launcher and its grandchild
    assert error == "Connection closed" and survivors == set()
    (killed,) = [x for x in _records(tmp_path / "exchanges.jsonl") if x["faults"]]
    assert killed["error_type"] == "connection"


def test_ctrl_c_to_brownout_ends_a_server_whose_launcher_does_not_pass_it_on(tmp_path: Path) -> None:
    # A shell that waits for its command passes no signal on: only the process group reaches the server.
    server = f"{sys.executable} {Path(__file__).with_name('mcp_stdio_server.py')}; echo launcher done >&2"
    proc = _started([BROWNOUT, "mcp-stdio", "--", "sh", "-c", server])
    tree = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends brownout (the server has its own group)
    try:
        status = proc.wait(timeout=15)
    finally:
        proc.kill()
        left = _ended(tree)
    _, err = proc.communicate()
    assert len(tree) == 2 and left == set()
    assert status == 130 and "brownout: sh was killed (SIGINT)" in err.decode()  # the launcher's own status


def test_what_a_server_leaves_in_its_group_is_ended_with_it(tmp_path: Path) -> None:
    # The launcher starts a helper in the background: it holds the server's stdout and would outlive it.
    marker = str(tmp_path / "leftover")
    helper = f"{sys.executable} -c 'import time; time.sleep(300)' {marker}"
    server = f"{helper} & {sys.executable} {Path(__file__).with_name('mcp_stdio_server.py')}"
    proc = _started([BROWNOUT, "mcp-stdio", "--", "sh", "-c", server])
    helper_pid = pid_of(marker)
    try:
        _, err = proc.communicate(b"", timeout=30)  # the client leaves: the server's stdin closes, it exits 0
    finally:
        proc.kill()
        left = _ended({helper_pid})
    assert proc.returncode == 0, err.decode()
    assert left == set()


def _started(command: list[str]) -> subprocess.Popen[bytes]:
    """brownout running `command`, once the server answered `initialize` (it is up, and so are its helpers)."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    return proc


def _ended(pids: set[int]) -> set[int]:
    """Which of `pids` outlived brownout (up to a bound); the test then ends them itself."""
    left = wait_gone(pids, timeout_s=3.0)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _violations(tmp_path: Path) -> list[tuple[str, str | None, str | None, int]]:
    """(invariant, check, tool, which tools/call of the session it names, from 1)."""
    calls = [x["id"] for x in _records(tmp_path / "exchanges.jsonl") if x["operation"] == "tools/call"]
    found = _records(tmp_path / "violations.jsonl")
    return [(v["invariant"], v["details"].get("check"), v["tool"], calls.index(v["exchange_id"]) + 1) for v in found]


# The reference servers speak the handshake era only (server-everything 2026.8.31 is built on the TypeScript
# SDK 1.32): the SDK client in `auto` mode probes with the 2026-07-28 server/discover, gets -32601, and falls
# back to initialize. The modern era over stdio is run against the SDK's own server in test_mcp_stdio.py.
MODES = ["legacy", "auto"]
CLEAN = """invariants:
  - {type: mcp_tools}
  - {type: mcp_reconnect_discipline}
  - {type: retry_discipline}
  - {type: tool_arguments_json}
  - {type: injection_followed}
rules: []
"""


@pytest.mark.parametrize("mode", MODES)
def test_server_everything_with_no_fault_gives_no_violation(tmp_path: Path, mode: str) -> None:
    # server-everything sends notifications/tools/list_changed while the client's first tools/list is in
    # flight: the listing answers after the change, so calls made from it are current.
    config = _config(tmp_path, CLEAN)

    async def agent() -> None:
        async with _client(config, npx(EVERYTHING, "stdio"), mode) as client:
            await client.list_tools()
            await client.call_tool("echo", {"message": "hi"})
            await client.call_tool("get-sum", {"a": 1, "b": 2})
            await client.call_tool("echo", {"message": "again"})

    asyncio.run(agent())
    exchanges = _records(tmp_path / "exchanges.jsonl")
    assert [x["operation"] for x in exchanges][-4:] == ["tools/list", "tools/call", "tools/call", "tools/call"]
    if mode == "auto":  # the 2026-07-28 probe, refused by a handshake-era server, then the handshake
        probe, init = exchanges[0], exchanges[1]
        assert (probe["operation"], probe["mcp_era"], probe["error_type"]) == (
            "server/discover",
            "modern",
            "method_not_found",
        )
        assert (init["operation"], init["mcp_era"]) == ("initialize", "handshake")
    assert {x["mcp_era"] for x in exchanges if x["operation"] != "server/discover"} == {"handshake"}
    assert _violations(tmp_path) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_rug_pull_on_server_everything_is_stale_then_off_schema(tmp_path: Path, mode: str) -> None:
    drift = """rules:
  - name: drift-after-approval
    match: {mcp_method: "tools/*"}
    schedule: {after: 2, scope: session}
    fault: {type: rug_pull, kind: schema, item: echo, change: rename, rename_to: text, notify: true}
"""
    config = _config(tmp_path, "invariants: [{type: mcp_tools}]\n" + drift)

    async def agent() -> dict[str, Any]:
        async with _client(config, npx(EVERYTHING, "stdio"), mode) as client:
            await client.list_tools()
            await client.call_tool("echo", {"message": "approved"})
            await client.call_tool("echo", {"message": "announces"})  # its reply carries list_changed
            await client.call_tool("echo", {"message": "stale"})  # without listing again
            await client.call_tool("get-sum", {"a": 1, "b": 2})  # another tool, same stale listing
            tools = {t.name: t for t in (await client.list_tools()).tools}
            await client.call_tool("echo", {"message": "old schema"})  # listed, and still `message`
            return tools["echo"].input_schema

    schema = asyncio.run(agent())
    assert "text" in schema["properties"] and "message" not in schema["properties"]
    assert _violations(tmp_path) == [
        ("mcp_tools", "stale", "echo", 3),
        ("mcp_tools", "stale", "get-sum", 4),
        ("mcp_tools", "schema", "echo", 5),
    ]
