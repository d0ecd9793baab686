"""Many concurrent SSE streams from asyncio protocols: each event's lateness against its send stamp.

The upstream's `/sse?stamp=1` writes `"t": <send time, Unix seconds>` into every event; lateness is
the client's receive time (taken when the bytes reach `data_received`) minus that stamp. Both ends
read the same clock on the same machine. Streams open one after another over a ramp, so a burst of
connections never overflows a listen backlog; lateness does not depend on when a stream started.

asyncio protocols and h11 rather than httpx: httpx costs about as much CPU per event as a proxy does,
and the client must not be what makes events late. Streams can be spread over several processes.
"""

from __future__ import annotations

import asyncio
import math
import re
import resource
import socket
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import h11

__all__ = ["StreamOutcome", "collect", "lateness_summary", "percentile", "raise_nofile", "spread_ms", "summarise"]

_EVENT = re.compile(rb'"i":(\d+),"t":([\d.]+)')


@dataclass
class StreamOutcome:
    """One stream: the event indexes it received, each event's lateness, and how it ended."""

    expected: int
    seen: set[int] = field(default_factory=set)
    lateness_s: list[float] = field(default_factory=list)
    status: int | None = None
    ended: bool = False  # the response ended cleanly (h11 EndOfMessage)
    error: str | None = None
    started: float | None = None  # Unix time the client began connecting
    first_event: float | None = None  # Unix time the first event arrived

    @property
    def complete(self) -> bool:
        return self.status == 200 and self.ended and len(self.seen) == self.expected


class _SseProtocol(asyncio.Protocol):
    """Reads one SSE response, parsing event blocks as they arrive."""

    def __init__(self, request: bytes, outcome: StreamOutcome, done: asyncio.Future[None]) -> None:
        self.request, self.out, self.done = request, outcome, done
        self.conn = h11.Connection(h11.CLIENT)
        self.pending = b""  # body bytes after the last complete event block
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = [("Host", "127.0.0.1"), ("Accept", "text/event-stream")]
        head = self.conn.send(h11.Request(method="GET", target=self.request, headers=headers))
        transport.write((head or b"") + (self.conn.send(h11.EndOfMessage()) or b""))

    def data_received(self, data: bytes) -> None:
        now = time.time()
        try:
            self.conn.receive_data(data)
            self._events(now)
        except h11.RemoteProtocolError as e:
            self._finish(f"protocol: {e}")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self._finish(type(exc).__name__ if exc else "closed before the end")

    def _events(self, now: float) -> None:
        while not self.done.done():
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Response):
                self.out.status = event.status_code
            elif isinstance(event, h11.Data):
                self._blocks(bytes(event.data), now)
            elif isinstance(event, h11.EndOfMessage):
                self.out.ended = True
                self._finish(None)
            elif isinstance(event, h11.ConnectionClosed):
                self._finish("closed before the end")

    def _blocks(self, data: bytes, now: float) -> None:
        buf = self.pending + data
        cut = buf.rfind(b"\n\n")
        if cut < 0:
            self.pending = buf
            return
        self.pending = buf[cut + 2 :]
        if self.out.first_event is None:
            self.out.first_event = now
        for m in _EVENT.finditer(buf, 0, cut):
            self.out.seen.add(int(m.group(1)))
            self.out.lateness_s.append(now - float(m.group(2)))

    def _finish(self, error: str | None) -> None:
        self.out.error = error
        if not self.done.done():
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()


async def _one(port: int, target: bytes, events: int, start_in_s: float, timeout_s: float) -> StreamOutcome:
    await asyncio.sleep(start_in_s)
    loop = asyncio.get_running_loop()
    outcome, done = StreamOutcome(events, started=time.time()), loop.create_future()
    try:
        transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: _SseProtocol(target, outcome, done), "127.0.0.1", port), timeout_s
        )
    except (OSError, TimeoutError) as e:
        outcome.error = f"connect: {type(e).__name__}"
        return outcome
    try:
        await asyncio.wait_for(done, timeout_s)
    except TimeoutError:
        outcome.error = "timeout"
        transport.abort()
    return outcome


async def _streams(port: int, streams: int, events: int, interval_ms: int, ramp_s: float) -> list[StreamOutcome]:
    target = b"/sse?events=%d&delay_ms=%d&stamp=1" % (events, interval_ms)
    timeout_s = ramp_s + events * interval_ms / 1000 + 60
    step = ramp_s / streams if streams else 0.0
    return await asyncio.gather(*(_one(port, target, events, i * step, timeout_s) for i in range(streams)))


def raise_nofile(need: int = 65536) -> int:
    """Raise this process's open-files soft limit toward `need` (children inherit it); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    return soft


def _client(port: int, streams: int, events: int, interval_ms: int, ramp_s: float) -> tuple[list[StreamOutcome], float]:
    """One client process's streams and the CPU seconds it spent."""
    raise_nofile(streams * 2 + 256)
    cpu0 = time.process_time()
    outcomes = asyncio.run(_streams(port, streams, events, interval_ms, ramp_s))
    return outcomes, time.process_time() - cpu0


def collect(
    port: int, streams: int, events: int, interval_ms: int, *, processes: int = 1, ramp_s: float = 1.0
) -> tuple[list[StreamOutcome], list[float]]:
    """Run `streams` SSE streams against the port, split over `processes`; outcomes and each client's CPU s."""
    shares = [streams // processes + (1 if i < streams % processes else 0) for i in range(processes)]
    if processes == 1:
        parts = [_client(port, streams, events, interval_ms, ramp_s)]
    else:
        with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_client, port, n, events, interval_ms, ramp_s) for n in shares if n]
            parts = [f.result() for f in futures]
    return [o for outcomes, _ in parts for o in outcomes], [round(cpu, 2) for _, cpu in parts]


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of values sorted ascending."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def spread_ms(values_s: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of durations in seconds, in ms."""
    ms = sorted(x * 1000 for x in values_s)
    return {"p50_ms": _r(percentile(ms, 50)), "p99_ms": _r(percentile(ms, 99)), "max_ms": _r(ms[-1] if ms else None)}


def lateness_summary(lateness_s: list[float], late_ms: float) -> dict[str, Any]:
    """p50, p99 and max lateness in ms, and how many events came later than `late_ms`."""
    late = sum(1 for x in lateness_s if x * 1000 > late_ms)
    return {**spread_ms(lateness_s), "late_events": late, "late_bound_ms": late_ms}


def summarise(outcomes: list[StreamOutcome], events: int, late_ms: float = 250.0) -> dict[str, Any]:
    """Delivery and lateness over every stream of one path."""
    errors: dict[str, int] = {}
    for o in outcomes:
        if o.error:
            errors[o.error] = errors.get(o.error, 0) + 1
    return {
        "streams": len(outcomes),
        "streams_complete": sum(1 for o in outcomes if o.complete),
        "events_expected": len(outcomes) * events,
        "events_delivered": sum(len(o.seen) for o in outcomes),
        "statuses": sorted({o.status for o in outcomes if o.status is not None}),
        "errors": errors,
        "lateness": lateness_summary([x for o in outcomes for x in o.lateness_s], late_ms),
        # From starting to connect to the first event: connection setup under load, not counted as lateness.
        "first_event": spread_ms([o.first_event - o.started for o in outcomes if o.first_event and o.started]),
    }
