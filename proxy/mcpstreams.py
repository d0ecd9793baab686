"""The MCP subscription streams each session has open: the handshake era's GET stream and 2026-07-28
`subscriptions/listen` streams, which carry the server's notifications for as long as they last.

Two things need them while they are open, not when they end:
- the invariants: a notification on such a stream (timed as it passed, by the wire format) is handed
  to the session's next exchange, so `mcp_tools` judges a call by a `list_changed` the client had
  already received, as it does on stdio;
- faults: a 2026-07-28 client hears of list changes only on a listen stream, so a rug pull that
  announces one has it written onto the session's open listen streams (those routed through the relay,
  which can put an event between upstream's). Each exchange is told which lists its session hears of
  (`notes["mcp_listening"]`), so a fault with no stream to speak on is skipped, not silently lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from brownout.core.exchange import Exchange
from brownout.core.wire.mcp_messages import SUBSCRIPTION_STREAMS, listen_notification

__all__ = ["LISTEN_INBOX_MAX", "McpStreams", "McpVersions"]

log = logging.getLogger(__name__)

LISTEN_INBOX_MAX = 64  # announcements waiting for a listen stream to reach an event boundary
_VERSIONS_KEPT = 4096  # MCP sessions whose negotiated version is remembered


@dataclass(slots=True)
class _Stream:
    exchange: Exchange
    cut: Callable[[], None] | None = None  # resets the client's connection
    inbox: asyncio.Queue[bytes] | None = None  # set once the stream goes through the relay


def _sse(message: dict[str, object]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


class McpStreams:
    """Open subscription streams by session; everything here runs on the proxy's event loop."""

    def __init__(self) -> None:
        self._open: dict[str, dict[str, _Stream]] = {}  # session -> exchange id -> stream

    def __len__(self) -> int:
        return sum(len(streams) for streams in self._open.values())

    def begin(self, exchange: Exchange, cut: Callable[[], None] | None = None) -> None:
        """A new MCP exchange: it takes the notifications its session's open streams carried so far, learns
        which lists the session hears of, and is kept if it is a subscription stream itself."""
        streams = self._open.get(exchange.session)
        if streams:
            handed: list[tuple[str, float]] = []
            listening: set[str] = set()
            for stream in streams.values():
                passed = stream.exchange.notes.get("notifications_before")
                if passed:
                    handed += passed
                    passed.clear()
                if stream.inbox is not None:
                    listening.update(stream.exchange.notes.get("mcp_listen") or ())
            if handed:
                before = exchange.notes.setdefault("notifications_before", [])
                before[:0] = sorted(handed, key=lambda note: note[1])
            if listening:
                exchange.notes["mcp_listening"] = sorted(listening)
        if exchange.operation in SUBSCRIPTION_STREAMS:
            self._open.setdefault(exchange.session, {})[exchange.id] = _Stream(exchange, cut)

    def attach(self, exchange: Exchange, inbox: asyncio.Queue[bytes]) -> None:
        """Events put in `inbox` reach this listen stream's client (the relay that carries it reads them)."""
        stream = self._open.get(exchange.session, {}).get(exchange.id)
        if stream is not None:
            stream.inbox = inbox

    def end(self, exchange: Exchange) -> None:
        streams = self._open.get(exchange.session)
        if streams is not None and streams.pop(exchange.id, None) is not None and not streams:
            del self._open[exchange.session]

    def cut(self, exchange: Exchange, scope: str, why: str) -> int:
        """The failure of `exchange` takes down its "server" (every stream any session has open to it) or its
        MCP "session" (that session's streams): they end with their connection."""
        if scope == "server":
            ended = [s for ss in self._open.values() for s in ss.values() if s.exchange.upstream == exchange.upstream]
        else:
            session = exchange.notes.get("mcp_session_id")
            mine = self._open.get(exchange.session, {}).values()
            ended = [s for s in mine if session and s.exchange.notes.get("mcp_session_id") == session]
        for stream in ended:
            ex = stream.exchange
            ex.error_type, ex.error_message = "connection", why
            if stream.cut is not None:
                stream.cut()
        return len(ended)

    def announce(self, session: str, method: str) -> int:
        """Write `method` (`notifications/<list>/list_changed`) onto the session's listen streams that asked
        for that list; how many got it."""
        which = method.split("/")[1] if method.count("/") == 2 else ""
        sent = 0
        for stream in self._open.get(session, {}).values():
            notes = stream.exchange.notes
            if stream.inbox is None or which not in (notes.get("mcp_listen") or ()):
                continue
            try:
                stream.inbox.put_nowait(_sse(listen_notification(method, notes.get("jsonrpc_id"))))
                sent += 1
            except asyncio.QueueFull:
                log.info("listen stream %s: too many announcements waiting; one dropped", stream.exchange.id)
        return sent


class McpVersions:
    """The protocol version each handshake-era HTTP session negotiated, for its requests that do not say it
    (2025-03-26 clients send no MCP-Protocol-Version header): bounded, the oldest sessions forgotten first."""

    def __init__(self, keep: int = _VERSIONS_KEPT) -> None:
        self._keep = keep
        self._by_session: dict[str, str] = {}

    def learn(self, exchange: Exchange) -> None:
        """An answered `initialize`: the session id the server handed out and the version it chose."""
        session = exchange.response_headers.get("mcp-session-id")
        version = exchange.notes.get("mcp_protocol_version")
        if exchange.mcp_method != "initialize" or not session or not isinstance(version, str):
            return
        self._by_session[session] = version
        while len(self._by_session) > self._keep:
            del self._by_session[next(iter(self._by_session))]

    def fill(self, exchange: Exchange) -> None:
        """A request of a known session that names no version gets the one its session negotiated."""
        session = exchange.notes.get("mcp_session_id")
        if session and "mcp_protocol_version" not in exchange.notes and session in self._by_session:
            exchange.notes["mcp_protocol_version"] = self._by_session[session]
