"""What a block of code leaves that only CPython's cyclic collector would free."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def saved_garbage() -> Iterator[list[object]]:
    """Yields a list that, once the block ends, holds every object the block left in unreachable reference
    cycles (the collector is off during the block, then `DEBUG_SAVEALL` keeps what it would have freed)."""
    found: list[object] = []
    gc.collect()
    gc.disable()
    try:
        yield found
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
