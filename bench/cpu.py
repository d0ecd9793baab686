"""CPU per operation of two or more ways of doing the same work, measured side by side.

Each round runs every path once, one after the other, so a machine that slows down mid-run slows all
of them alike; the ratios within a round are what the in-process benches (otlp_encode, spans,
schemas) print.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

__all__ = ["interleaved"]


def interleaved(paths: dict[str, Callable[[], object]], ops: int, rounds: int = 3) -> Iterator[dict[str, float]]:
    """Per round, each path's CPU microseconds per operation (`run()` does `ops` of them)."""
    for _ in range(rounds):
        cost: dict[str, float] = {}
        for name, run in paths.items():
            start = time.process_time()
            run()
            cost[name] = (time.process_time() - start) / ops * 1e6
        yield cost
