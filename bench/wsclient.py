"""Realtime sessions from the `websockets` client: each output delta's lateness against its send stamp.

A session connects to bench/wsupstream.py (directly or through a proxy in reverse mode), reads
`session.created`, then asks for `generations` generations one after another (`response.create`) and
reads each to its `response.done`. Every delta's lateness is the time the client read it minus the
stamp the upstream put in it. Sessions open over a ramp and can be spread over several processes, so
the client is not what makes events late (the `direct` path shows its own floor).
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from bench.sseclient import lateness_summary, spread_ms

__all__ = ["SessionOutcome", "collect", "summarise"]

_CREATE = json.dumps({"type": "response.create"})


@dataclass
class SessionOutcome:
    """One session: the deltas it got, each one's lateness, and whether every generation ended."""

    expected: int
    delivered: int = 0
    lateness_s: list[float] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # each delta's place in its generation, from 0
    complete: bool = False
    error: str | None = None
    connect_s: float | None = None  # from starting to connect to session.created


async def _one(url: str, generations: int, out: SessionOutcome, start_at: float | None) -> None:
    started = time.monotonic()
    try:
        async with connect(url, compression=None, max_size=None, open_timeout=60, ping_interval=None) as ws:
            await ws.recv()  # session.created
            out.connect_s = time.monotonic() - started
            if start_at is not None:  # every session open first: the connect storm is not event lateness
                await asyncio.sleep(max(0.0, start_at - time.time()))
            for _ in range(generations):
                await ws.send(_CREATE)
                position = 0
                while True:
                    raw = await ws.recv()
                    now = time.time()
                    doc = json.loads(raw)
                    kind = doc.get("type")
                    if kind == "response.output_text.delta":
                        out.delivered += 1
                        out.lateness_s.append(now - doc["t"])
                        out.positions.append(position)
                        position += 1
                    elif kind == "response.done":
                        break
            out.complete = True
    except (OSError, TimeoutError, WebSocketException, ValueError, KeyError) as e:  # a measured outcome, not a crash
        out.error = type(e).__name__


async def _sessions(
    url: str, n: int, events: int, generations: int, ramp_s: float, start: tuple[float, float] | None
) -> list[SessionOutcome]:
    outcomes = [SessionOutcome(events * generations) for _ in range(n)]
    tasks = []
    for i, out in enumerate(outcomes):
        # Phases spread over one event interval: independent sessions do not send in lockstep.
        start_at = None if start is None else start[0] + start[1] * i / n
        tasks.append(asyncio.create_task(_one(url, generations, out, start_at)))
        if n > 1 and ramp_s > 0:
            await asyncio.sleep(ramp_s / n)
    await asyncio.gather(*tasks)
    return outcomes


def _client(
    url: str, n: int, events: int, generations: int, ramp_s: float, start: tuple[float, float] | None = None
) -> tuple[list[SessionOutcome], float]:
    """One client process's share: its outcomes and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    outcomes = asyncio.run(_sessions(url, n, events, generations, ramp_s, start))
    after = resource.getrusage(resource.RUSAGE_SELF)
    return outcomes, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def collect(
    url: str,
    sessions: int,
    events: int,
    generations: int = 1,
    *,
    processes: int = 1,
    ramp_s: float = 1.0,
    start: tuple[float, float] | None = None,
) -> tuple[list[SessionOutcome], list[float]]:
    """Run `sessions` sessions against `url`, split over `processes`; outcomes and each client's CPU seconds.

    `start` (a Unix time, a spread in seconds): sessions open over the ramp, then wait for that time, plus
    their phase within the spread, before their first generation."""
    shares = [sessions // processes + (1 if i < sessions % processes else 0) for i in range(processes)]
    if processes == 1:
        parts = [_client(url, sessions, events, generations, ramp_s, start)]
    else:
        with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_client, url, n, events, generations, ramp_s, start) for n in shares if n]
            parts = [f.result() for f in futures]
    return [o for outcomes, _ in parts for o in outcomes], [round(cpu, 2) for _, cpu in parts]


# Where in a generation a delta sits: its first deltas follow the burst of sessions asking for a response
# at once, its last ones the burst of generations ending and their sessions closing, the middle ones
# neither.
EDGE_FIRST = 3
EDGE_LAST = 2


def by_position(outcomes: list[SessionOutcome], events: int) -> dict[str, dict[str, float | None]]:
    """Lateness of the first `EDGE_FIRST` deltas of each generation, of its last `EDGE_LAST`, and of the
    ones between (`events` deltas a generation)."""
    groups: dict[str, list[float]] = {"first": [], "middle": [], "last": []}
    for o in outcomes:
        for late, position in zip(o.lateness_s, o.positions, strict=True):
            edge = "first" if position < EDGE_FIRST else "last" if position >= events - EDGE_LAST else "middle"
            groups[edge].append(late)
    return {edge: spread_ms(values) for edge, values in groups.items()}


def summarise(outcomes: list[SessionOutcome], late_ms: float) -> dict[str, Any]:
    """Delivery and lateness over every session of one path."""
    errors: dict[str, int] = {}
    for o in outcomes:
        if o.error:
            errors[o.error] = errors.get(o.error, 0) + 1
    return {
        "sessions": len(outcomes),
        "sessions_complete": sum(o.complete for o in outcomes),
        "events_expected": sum(o.expected for o in outcomes),
        "events_delivered": sum(o.delivered for o in outcomes),
        "errors": errors,
        "lateness": lateness_summary([x for o in outcomes for x in o.lateness_s], late_ms),
        "connect": spread_ms([o.connect_s for o in outcomes if o.connect_s is not None]),
    }
