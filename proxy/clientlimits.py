"""Bounds on client connections: slow request headers, idle keep-alive, and a connection cap.

mitmproxy 12.2 bounds a connection only by inactivity (`tcp_timeout`, 600 s, reset by any byte
on either side), so a client trickling a header byte now and then (slowloris) or parking idle
keep-alive connections holds a descriptor as long as it likes, and nothing caps how many. This
addon adds the three bounds from its connection hooks (`client_connected`, `requestheaders`,
`http_connect`, `response`, `error`, `websocket_start`/`_end`, `tcp_start`,
`client_disconnected`): a timer runs only while a connection has no request in flight, so a long
stream or a slow upstream is never cut. A timed-out connection is closed the way mitmproxy's own
inactivity timeout closes it (`connkill.close_client`). `tcp_timeout` stays as mitmproxy's
outer bound for everything else (raw TCP tunnels, a stalled request body).

A connection over the cap is answered, not refused: its first request gets a 503 with a JSON
body naming the setting, `retry-after` and `x-brownout-error`, then the connection is closed. A
refused connection would look like the network failures brownout injects; a marked 503 cannot
be confused with them, and the SDKs retry it with backoff.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mitmproxy import connection, http, tcp

from brownout.proxy.config import ProxySettings
from brownout.proxy.connkill import close_client

__all__ = ["OVER_CAPACITY", "ClientLimits"]

log = logging.getLogger(__name__)

HEADER_TIMEOUT = "request_header_timeout"
IDLE_TIMEOUT = "client_idle_timeout"
OVER_CAPACITY = "max_client_connections"
FDS_PER_CONNECTION = 2  # the client's socket and, usually, one upstream


@dataclass(slots=True)
class _Conn:
    """One client connection: what it is waiting for."""

    over_cap: bool
    busy: set[str] = field(default_factory=set)  # flows (and WebSockets) in flight on it
    timer: asyncio.TimerHandle | None = None
    opaque: bool = False  # a raw TCP tunnel: no HTTP hooks will follow, only tcp_timeout applies


class ClientLimits:
    """A mitmproxy addon that closes slow and idle client connections and answers those over the cap."""

    def __init__(self, settings: ProxySettings, *, on_cut: Callable[[str], None] = lambda reason: None) -> None:
        self.settings = settings
        self._on_cut = on_cut
        self._conns: dict[str, _Conn] = {}
        self.served = 0  # connections within the cap, open now

    @property
    def open(self) -> int:
        """Client connections open now, those over the cap included."""
        return len(self._conns)

    def running(self) -> None:
        try:
            import resource  # Unix only
        except ImportError:
            return
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        need = FDS_PER_CONNECTION * self.settings.max_client_connections + 100
        if soft != resource.RLIM_INFINITY and soft < need:
            log.warning(
                "brownout: proxy.max_client_connections %d needs about %d file descriptors, the limit is %d "
                "(ulimit -n): raise it or lower the setting, or connections fail before the cap answers them",
                self.settings.max_client_connections,
                need,
                soft,
            )

    # --- connection lifecycle -----------------------------------------------------------

    def client_connected(self, client: connection.Client) -> None:
        if client.transport_protocol != "tcp":
            return
        conn = _Conn(over_cap=self.served >= self.settings.max_client_connections)
        if not conn.over_cap:
            self.served += 1
        self._conns[client.id] = conn
        self._arm(client.id, conn, self.settings.request_header_timeout_s, HEADER_TIMEOUT)

    def client_disconnected(self, client: connection.Client) -> None:
        conn = self._conns.pop(client.id, None)
        if conn is None:
            return
        self._disarm(conn)
        if not conn.over_cap:
            self.served -= 1

    # --- requests -----------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        conn = self._conns.get(flow.client_conn.id)
        if conn is None:
            return
        self._disarm(conn)
        conn.busy.add(flow.id)
        if conn.over_cap and flow.response is None:
            self._answer_over_capacity(flow)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        conn = self._conns.get(flow.client_conn.id)
        if conn is None:
            return
        if conn.over_cap:
            self._disarm(conn)
            self._answer_over_capacity(flow)
            return
        # The tunnel's first request (after a TLS handshake) must arrive in time too.
        self._arm(flow.client_conn.id, conn, self.settings.request_header_timeout_s, HEADER_TIMEOUT)

    def response(self, flow: http.HTTPFlow) -> None:
        self._done(flow.client_conn.id, flow.id)

    def error(self, flow: http.HTTPFlow) -> None:
        self._done(flow.client_conn.id, flow.id)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        conn = self._conns.get(flow.client_conn.id)
        if conn is not None:
            self._disarm(conn)
            conn.busy.add(f"ws:{flow.id}")

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self._done(flow.client_conn.id, f"ws:{flow.id}")

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        conn = self._conns.get(flow.client_conn.id)
        if conn is not None:
            conn.opaque = True
            self._disarm(conn)

    def _done(self, client_id: str, key: str) -> None:
        conn = self._conns.get(client_id)
        if conn is None:
            return
        conn.busy.discard(key)
        if not conn.busy:
            self._arm(client_id, conn, self.settings.client_idle_timeout_s, IDLE_TIMEOUT)

    def _answer_over_capacity(self, flow: http.HTTPFlow) -> None:
        cap = self.settings.max_client_connections
        body = {
            "error": {
                "message": f"brownout has {cap} client connections open (proxy.max_client_connections); retry shortly",
                "type": "brownout_over_capacity",
            }
        }
        headers = {"content-type": "application/json", "retry-after": "1", "x-brownout-error": OVER_CAPACITY}
        if flow.request.http_version.startswith("HTTP/1"):
            headers["connection"] = "close"  # one answer, then the descriptor is free again
        flow.response = http.Response.make(503, json.dumps(body), headers)
        self._on_cut(OVER_CAPACITY)

    # --- timers -------------------------------------------------------------------------

    def _arm(self, client_id: str, conn: _Conn, delay_s: float, reason: str) -> None:
        self._disarm(conn)
        if delay_s > 0 and not conn.opaque:
            conn.timer = asyncio.get_running_loop().call_later(delay_s, self._expire, client_id, reason)

    @staticmethod
    def _disarm(conn: _Conn) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def _expire(self, client_id: str, reason: str) -> None:
        conn = self._conns.get(client_id)
        if conn is None or conn.busy or conn.opaque:
            return
        conn.timer = None
        if close_client(client_id, f"brownout: {reason}"):
            log.debug("closed client connection %s: %s", client_id, reason)
            self._on_cut(reason)

    def snapshot(self) -> dict[str, Any]:
        """Client connections at this moment (for /status); named so none reads as a total since start."""
        return {
            "open_now": self.open,
            "over_cap_now": self.open - self.served,
            "max_open": self.settings.max_client_connections,
        }
