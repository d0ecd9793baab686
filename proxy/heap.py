"""brownout's say over CPython's cyclic garbage collector: none in a program that embeds the proxy; in
`brownout run`, whose process is brownout's own, the long-lived heap is kept out of the collector's reach.

A collection holds the GIL for as long as it walks, whatever thread triggers it, so every thread waits,
the event loop too. Building a config of thousands of rules allocates hundreds of thousands of objects
that live on: collections set off while it is built, or soon after, walk them all (hundreds of
milliseconds each, measured on a 10,000-rule config). In brownout's own process the collector is
paused while a reloaded config is built and swapped in, and what then lives on is frozen with the
start-up heap (see `proxy.serve.settle_heap`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["building", "let_go", "settle"]


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
