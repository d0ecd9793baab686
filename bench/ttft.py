"""Streaming timing: time to the first SSE event bytes and to the end of the stream."""

from __future__ import annotations

import itertools
import socket
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import h11

__all__ = ["TtftResult", "keepalive_ttfts", "measure_ttft", "one_stream"]


@dataclass
class TtftResult:
    """Medians over several runs of one SSE stream."""

    runs: int
    events: int
    delay_ms: int
    ttft_ms: float  # request sent -> first body bytes carrying `data:`, fresh connection each time
    total_ms: float  # request sent -> end of the response
    ttft_keepalive_ms: float  # the same over one kept-alive connection, as SDK clients (httpx pools) do
    ttft_ms_all: list[float]
    gaps_ms: list[float]  # median arrival gap between successive events (chunk timing preserved?)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_stream(port: int, events: int, delay_ms: int, timeout_s: float = 30.0) -> tuple[float, float, list[float]]:
    """One GET /sse over a fresh connection: (ttft_ms, total_ms, arrival times of event bytes in ms)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _stream_on(sock, h11.Connection(h11.CLIENT), port, events, delay_ms)


def _stream_on(
    sock: socket.socket, conn: h11.Connection, port: int, events: int, delay_ms: int
) -> tuple[float, float, list[float]]:
    target = f"/sse?events={events}&delay_ms={delay_ms}"
    request = conn.send(
        h11.Request(
            method="GET", target=target, headers=[("Host", f"127.0.0.1:{port}"), ("Accept", "text/event-stream")]
        )
    )
    end = conn.send(h11.EndOfMessage())
    t0 = time.perf_counter()
    sock.sendall(request + (end or b""))
    first: float | None = None
    arrivals: list[float] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(65536))
            continue
        if isinstance(event, h11.Data):
            now = (time.perf_counter() - t0) * 1000
            # One arrival per event block, so a buffered body shows as one burst.
            arrivals.extend([now] * bytes(event.data).count(b"data:"))
            if first is None and b"data:" in event.data:
                first = now
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
        elif isinstance(event, h11.Response) and event.status_code != 200:
            raise RuntimeError(f"/sse answered {event.status_code}")
    total = (time.perf_counter() - t0) * 1000
    if first is None:
        raise RuntimeError("the stream carried no events")
    return first, total, arrivals


def keepalive_ttfts(port: int, runs: int, events: int = 3, delay_ms: int = 20, timeout_s: float = 30.0) -> list[float]:
    """Time to first event of `runs` streams one after another over a single kept-alive connection."""
    conn = h11.Connection(h11.CLIENT)
    out: list[float] = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(runs + 1):
            first, _, _ = _stream_on(sock, conn, port, events, delay_ms)
            out.append(first)
            conn.start_next_cycle()
    return out[1:]  # the first stream also opened the proxy's upstream connection


def measure_ttft(port: int, runs: int = 10, events: int = 10, delay_ms: int = 100) -> TtftResult:
    ttfts, totals, gaps = [], [], []
    for _ in range(runs):
        first, total, arrivals = one_stream(port, events, delay_ms)
        ttfts.append(first)
        totals.append(total)
        if len(arrivals) > 1:
            gaps.append(statistics.median(b - a for a, b in itertools.pairwise(arrivals)))
    keepalive = statistics.median(keepalive_ttfts(port, runs))
    return TtftResult(
        runs,
        events,
        delay_ms,
        statistics.median(ttfts),
        statistics.median(totals),
        keepalive,
        [round(t, 2) for t in ttfts],
        [round(g, 2) for g in gaps],
    )
