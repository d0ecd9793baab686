"""`brownout mcp-stdio` with whatever its client's side is: regular files, a closed descriptor, a directory,
and a client that stops reading its replies. brownout never crashes with a traceback, never hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.npm_servers import descendants, wait_gone
from tests.e2e.test_mcp_stdio import BROWNOUT, SERVER_CMD

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "files", "version": "1"}}
REQUESTS = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "get_weather", "arguments": {"city": "Oslo"}},
    },
]


def _lines(data: bytes) -> list[Any]:
    return [json.loads(line) for line in data.splitlines()]


def _answered(replies: list[Any]) -> list[Any]:
    return [(r["id"], "error" in r) for r in replies]


@pytest.mark.parametrize("out_kind", ["file", "pipe"])
def test_a_regular_file_as_stdin_sends_its_requests_and_waits_for_their_replies(tmp_path: Path, out_kind: str) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS))
    replies = tmp_path / "replies.jsonl"
    with requests.open("rb") as stdin, replies.open("wb") as out:
        run = subprocess.run(
            [BROWNOUT, "mcp-stdio", "--", *SERVER_CMD],
            stdin=stdin,
            stdout=out if out_kind == "file" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    got = replies.read_bytes() if out_kind == "file" else run.stdout
    assert run.returncode == 0, run.stderr.decode()
    assert _answered(_lines(got)) == [(0, False), (1, False), (2, False)]
    assert b"Traceback" not in run.stderr


def test_a_regular_file_as_stdout_gets_every_reply(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    with replies.open("wb") as out:
        proc = subprocess.Popen(
            [BROWNOUT, "mcp-stdio", "--", *SERVER_CMD], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE
        )
        assert proc.stdin is not None
        for request in REQUESTS:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
        deadline = time.monotonic() + 30
        while replies.read_bytes().count(b"\n") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)  # the client leaves once it has its replies
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
    assert _answered(_lines(replies.read_bytes())) == [(0, False), (1, False), (2, False)]


@pytest.mark.parametrize("closed", [0, 1])
def test_a_closed_stdin_or_stdout_fails_at_once_before_the_server_starts(tmp_path: Path, closed: int) -> None:
    started = tmp_path / "server-started"
    server = [sys.executable, "-c", f"open({str(started)!r}, 'w').close(); import time; time.sleep(30)"]
    start = time.monotonic()
    run = subprocess.run(
        [BROWNOUT, "mcp-stdio", "--", *server],
        stdin=subprocess.PIPE,
        capture_output=True,
        preexec_fn=lambda: os.close(closed),  # `<&-` or `>&-` in a shell
        timeout=30,
    )
    name = ("stdin", "stdout")[closed]
    assert (
        run.stderr.decode()
        == f"brownout: {name} is closed (Bad file descriptor): mcp-stdio speaks to its MCP client there\n"
    )
    assert run.returncode == 1 and time.monotonic() - start < 10
    assert not started.exists()


# A server that says a lot: 20 MB of log notifications, then it waits (its stdout stays open).
CHATTY = [
    sys.executable,
    "-c",
    "import sys, time\n"
    'line = \'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\' + \'x\' * 1000 + \'"}}\\n\'\n'
    "for _ in range(20000): sys.stdout.write(line)\n"
    "sys.stdout.flush(); time.sleep(300)",
]


@pytest.mark.parametrize("client", ["reads nothing", "closed its end"])
def test_a_client_that_stops_reading_its_replies_ends_brownout_and_the_server(client: str) -> None:
    proc = subprocess.Popen(
        [BROWNOUT, "mcp-stdio", "--client-write-timeout-s", "1", "--", *CHATTY],
        stdin=subprocess.PIPE,  # kept open: the client has not left, it only stopped reading
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + 15
    while not (server := descendants(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if client == "closed its end":
        proc.stdout.close()
    try:
        status = proc.wait(timeout=30)
    finally:
        proc.kill()
        for pid in wait_gone(server, timeout_s=3):
            os.kill(pid, 9)
    err = proc.stderr.read().decode()
    reason = "read nothing for 1 s" if client == "reads nothing" else "closed its end of stdout"
    assert f"brownout: the MCP client {reason}: the server was stopped" in err, err
    assert "Traceback" not in err and status == 143  # the server's status: it got SIGTERM
    assert server and wait_gone(server) == set()
