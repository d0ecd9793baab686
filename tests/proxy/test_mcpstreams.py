"""The open MCP subscription streams of each session: notifications handed on, announcements, cuts."""

from __future__ import annotations

import asyncio
import json

from brownout.core.exchange import Exchange
from brownout.proxy.mcpstreams import McpStreams, McpVersions


def stream(i: int, operation: str, session: str = "s", *, mcp_session: str | None = None, port: int = 80) -> Exchange:
    ex = Exchange(id=f"x{i}", session=session, provider="mcp", operation=operation, host="tools.local", port=port)
    ex.mcp_method = None if operation in ("server_stream", "session_end") else operation
    if mcp_session:
        ex.notes["mcp_session_id"] = mcp_session
    return ex


def test_notifications_on_open_streams_go_to_the_next_exchange_once() -> None:
    streams = McpStreams()
    get = stream(1, "server_stream")
    streams.begin(get)
    get.notes.setdefault("notifications_before", []).append(("notifications/tools/list_changed", 5.0))
    call = stream(2, "tools/call")
    streams.begin(call)
    assert call.notes["notifications_before"] == [("notifications/tools/list_changed", 5.0)]
    later = stream(3, "tools/call")
    streams.begin(later)
    assert "notifications_before" not in later.notes and get.notes["notifications_before"] == []
    streams.end(get)
    assert len(streams) == 0


def test_announcements_reach_listen_streams_that_asked_for_that_list() -> None:
    streams = McpStreams()
    listen = stream(1, "subscriptions/listen")
    listen.notes.update(mcp_listen=["tools"], jsonrpc_id="listen-1")
    streams.begin(listen)
    call = stream(2, "tools/call")
    streams.begin(call)
    assert "mcp_listening" not in call.notes  # not through the relay: brownout cannot speak on it
    inbox: asyncio.Queue[bytes] = asyncio.Queue()
    streams.attach(listen, inbox)
    again = stream(3, "tools/call")
    streams.begin(again)
    assert again.notes["mcp_listening"] == ["tools"]
    assert streams.announce("s", "notifications/prompts/list_changed") == 0
    assert streams.announce("s", "notifications/tools/list_changed") == 1
    event = inbox.get_nowait()
    assert event.startswith(b"event: message\ndata: ") and event.endswith(b"\n\n")
    assert json.loads(event.split(b"data: ", 1)[1]) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
    }


def test_a_gone_server_cuts_every_stream_to_it_and_a_gone_session_its_own() -> None:
    streams = McpStreams()
    cut: list[str] = []
    mine = stream(1, "server_stream", mcp_session="a")
    theirs = stream(2, "server_stream", "other", mcp_session="b")
    elsewhere = stream(3, "server_stream", "other", mcp_session="c", port=81)
    for ex in (mine, theirs, elsewhere):
        streams.begin(ex, lambda ex=ex: cut.append(ex.id))
    assert streams.cut(stream(4, "tools/call", mcp_session="a"), "session", "the session went away") == 1
    assert cut == ["x1"] and mine.error_type == "connection"
    assert streams.cut(stream(5, "tools/call", mcp_session="z"), "server", "the server went away") == 2
    assert cut == ["x1", "x1", "x2"] and elsewhere.error_type is None


def test_a_session_without_version_headers_gets_its_handshake_version() -> None:
    versions = McpVersions(keep=1)
    init = stream(1, "initialize")
    init.response_headers["mcp-session-id"] = "a"
    init.notes["mcp_protocol_version"] = "2025-03-26"
    versions.learn(init)
    later = stream(2, "tools/list", mcp_session="a")
    versions.fill(later)
    assert later.notes["mcp_protocol_version"] == "2025-03-26"
    other = stream(3, "initialize")
    other.response_headers["mcp-session-id"] = "b"
    other.notes["mcp_protocol_version"] = "2025-06-18"
    versions.learn(other)  # keep=1: the oldest session is forgotten
    forgotten = stream(4, "tools/list", mcp_session="a")
    versions.fill(forgotten)
    assert "mcp_protocol_version" not in forgotten.notes
