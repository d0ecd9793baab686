"""The stdio side's framing and process helpers: nothing dropped, exit statuses as a shell reports them."""

from __future__ import annotations

import asyncio

import pytest

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.mcpstdio.messages import remember
from brownout.proxy.mcpstdio.pipes import Frame, exit_code, frames, server_label
from brownout.proxy.mcpstdio.run import stdio_config


async def _frames(data: bytes, limit: int) -> list[Frame]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [f async for f in frames(reader)]


def test_lines_and_a_last_line_without_newline() -> None:
    got = asyncio.run(_frames(b'{"a":1}\n\n{"b":2}', limit=64))
    assert got == [Frame(b'{"a":1}'), Frame(b""), Frame(b'{"b":2}')]


def test_a_line_over_the_limit_passes_in_pieces() -> None:
    long = b'{"x":"' + b"y" * 100 + b'"}'
    got = asyncio.run(_frames(b"{}\n" + long + b"\n{}\n", limit=16))
    assert got[0] == Frame(b"{}") and got[-1] == Frame(b"{}")
    pieces = got[1:-1]
    assert len(pieces) > 1 and not any(p.whole for p in pieces)
    assert b"".join(p.data for p in pieces) == long + b"\n"  # every byte, the newline included


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-9, 137), (-15, 143), (None, 1)])
def test_exit_code(returncode: int | None, status: int) -> None:
    assert exit_code(returncode) == status


@pytest.mark.parametrize(
    ("command", "label"),
    [
        (["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "npx server-filesystem"),
        (["/usr/bin/python3", "weather.py"], "python3 weather.py"),
        (["python", "-c", "print(1)"], "python"),
        (["./server"], "server"),
    ],
)
def test_server_label(command: list[str], label: str) -> None:
    assert server_label(command) == label


def test_metrics_only_when_asked_for() -> None:
    assert not stdio_config(BrownoutConfig()).exporters.prometheus.enabled
    asked = stdio_config(BrownoutConfig(), "127.0.0.1:0").exporters.prometheus
    assert asked.enabled and asked.listen == "127.0.0.1:0"
    configured = BrownoutConfig.model_validate({"exporters": {"prometheus": {"listen": "127.0.0.1:9999"}}})
    assert stdio_config(configured).exporters.prometheus.enabled


@pytest.mark.parametrize(
    ("fault", "why"), [("session_expired", "no session to expire"), ("header_mismatch", "no headers")]
)
def test_faults_a_pipe_cannot_carry_are_refused(fault: str, why: str) -> None:
    config = BrownoutConfig.model_validate({"rules": [{"name": "r", "fault": {"type": fault}}]})
    with pytest.raises(ValueError, match=f"rule 'r': {fault} cannot act on a stdio MCP server: .*{why}"):
        stdio_config(config)


def test_server_notifications_kept_are_bounded_and_keep_list_changed() -> None:
    notes: list[tuple[str, float]] = []
    remember(notes, "notifications/tools/list_changed", 1.0, keep=3)
    for n in range(10):
        remember(notes, "notifications/message", 2.0 + n, keep=3)
    assert notes == [
        ("notifications/tools/list_changed", 1.0),
        ("notifications/message", 10.0),
        ("notifications/message", 11.0),
    ]
