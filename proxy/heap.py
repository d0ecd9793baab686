"""brownout's say over CPython's cyclic garbage collector: none in a program that embeds the proxy; in
`brownout run`, whose process is brownout's own, the long-lived heap is kept out of the collector's reach.

A collection holds the GIL for as long as it walks, whatever thread triggers it, so every thread waits,
the event loop too. Building a config of thousands of rules allocates hundreds of thousands of objects
that live on: collections set off while it is built, or soon after, walk them all (hundreds of
milliseconds each, measured on a 10,000-rule config). In brownout's own process the collector is
paused while a reloaded config is built and swapped in, and what then lives on is frozen with the
start-up heap (see `proxy.serve.settle_heap`).

In that process the young generations are also collected when the event loop is idle (`IdleCollections`,
run by proxy/idlework.py) rather than wherever an allocation happens to cross the threshold, which under
traffic is as often as not in the middle of relaying an answer.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["BACKSTOP", "IdleCollections", "building", "let_go", "settle"]

BACKSTOP = 4  # the collector's own threshold while collections wait for idle moments, times its usual one


def settle() -> None:
    """Collect, then move everything alive out of the collector's reach (it is still freed when unused)."""
    gc.collect()
    gc.freeze()


@contextmanager
def building(owned: bool) -> Iterator[None]:
    """No collection while the block builds and swaps in a config; then what lives on is frozen. Only
    when the process is brownout's own (`owned`), and the collector was on: a host keeps its policy.

    Building a config leaves no cyclic garbage (tests/reliability/test_deep_and_big_configs.py), so
    freezing keeps nothing that would otherwise have been collected; the old config is freed as usual."""
    if not owned or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


def let_go(items: list[Any]) -> None:
    """Drop `items` one at a time (the last first). Dropped at once, the old config and rules of a large
    config are freed in one go, holding the GIL, so every thread and the event loop too, for tens of
    milliseconds; one at a time, each frees little, and other threads get their turn between them."""
    while items:
        items.pop()


class IdleCollections:
    """The cyclic collector's young-generation passes, moved to the event loop's idle moments.

    Relaying an exchange leaves objects in reference cycles (mitmproxy's flow and layer objects; brownout's
    own are freed by reference count, see proxy/messagecheck.py and `_unhook` in proxy/responses.py), so
    CPython collects every few dozen requests, pausing every thread for a millisecond or more (the
    youngest generation) or several (the middle one). Set off by whatever allocation crosses the
    threshold, those pauses land in the middle of requests. Here the collector's threshold is raised to
    BACKSTOP times its usual value (it still runs on its own should the loop never idle), and once the
    usual number of objects is waiting the loop collects at its next idle moment (proxy/idlework.py:
    within `MAX_S` at the latest). The generation collected is the one CPython would pick, so older
    generations are collected as often as before.

    Only on the CPython versions with this collector (before 3.14, whose incremental collector already
    bounds each pause), and only in a process that is brownout's own (`brownout run`)."""

    def __init__(self) -> None:
        self.threshold = gc.get_threshold()
        self.started = False

    @staticmethod
    def supported() -> bool:
        return sys.version_info < (3, 14) and sys.implementation.name == "cpython"

    def start(self) -> None:
        t0, t1, t2 = self.threshold
        if t0 > 0:  # a collector switched off by threshold stays off
            gc.set_threshold(t0 * BACKSTOP, t1, t2)
            self.started = True

    def stop(self) -> None:
        if self.started:
            gc.set_threshold(*self.threshold)
            self.started = False

    def due(self) -> bool:
        """Enough objects wait for the youngest generation's pass (and the collector is on)."""
        return self.started and gc.get_count()[0] > self.threshold[0] and gc.isenabled()

    def collect(self) -> None:
        """The pass CPython would make now: the oldest generation whose count is over its threshold."""
        _, t1, t2 = self.threshold
        _, passes0, passes1 = gc.get_count()  # gen0 passes since the last gen1 one; gen1 passes since gen2
        generation = 0
        if passes0 > t1:
            generation = 2 if passes1 > t2 else 1
        gc.collect(generation)
