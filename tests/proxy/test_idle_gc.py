"""The cyclic collector's passes wait for an idle moment of the event loop (proxy/heap.py,
proxy/idlework.py) instead of landing wherever an allocation crosses the threshold."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from brownout.proxy import heap
from brownout.proxy.idlework import IdleWork

pytestmark = pytest.mark.skipif(not heap.IdleCollections.supported(), reason="CPython before 3.14 only")


@pytest.fixture
def passes() -> Iterator[list[tuple[int, bool]]]:
    """(generation, whether the loop was busy) for every collector pass while the test runs."""
    seen: list[tuple[int, bool]] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append((info["generation"], BUSY[0]))

    gc.collect()
    gc.callbacks.append(on_gc)
    try:
        yield seen
    finally:
        gc.callbacks.remove(on_gc)


BUSY = [False]


def _garbage(n: int) -> None:
    """`n` objects in reference cycles: only the collector frees them."""
    for _ in range(n):
        cycle: list[Any] = []
        cycle.append(cycle)


def test_start_raises_the_threshold_to_a_backstop_and_stop_restores_it() -> None:
    before = gc.get_threshold()
    collections = heap.IdleCollections()
    collections.start()
    try:
        assert gc.get_threshold() == (before[0] * heap.BACKSTOP, *before[1:])
    finally:
        collections.stop()
    assert gc.get_threshold() == before


def test_a_pass_collects_the_generation_cpython_would(passes: list[tuple[int, bool]]) -> None:
    collections = heap.IdleCollections()
    _, t1, t2 = collections.threshold
    collections.collect()
    for _ in range(t1 + 1):  # as many youngest passes as make the middle generation due
        gc.collect(0)
    collections.collect()
    assert [g for g, _ in passes] == [0] + [0] * (t1 + 1) + [1]
    passes.clear()
    for _ in range(t2 + 1):  # and as many middle passes as make the oldest due
        for _ in range(t1 + 1):
            gc.collect(0)
        collections.collect()
    assert passes[-1][0] == 2 and [g for g, _ in passes].count(2) == 1


async def _busy_then_idle(collections: heap.IdleCollections) -> None:
    loop = asyncio.get_running_loop()
    work = IdleWork.of(loop)
    assert work is not None
    work.collect_when_idle(collections)
    try:
        BUSY[0] = True
        try:
            _garbage(3 * collections.threshold[0])  # past the usual threshold, short of the backstop
        finally:
            BUSY[0] = False
        await asyncio.sleep(0.05)  # the loop waits for I/O: an idle moment
    finally:
        work.collect_when_idle(None)


def test_the_pass_falls_due_while_the_loop_is_busy_and_runs_when_it_idles(passes: list[tuple[int, bool]]) -> None:
    collections = heap.IdleCollections()
    collections.start()
    try:
        asyncio.run(_busy_then_idle(collections))
    finally:
        collections.stop()
    assert passes, "no pass ran"
    assert all(not busy for _, busy in passes), passes
    assert gc.get_count()[0] < collections.threshold[0]


def test_without_it_the_pass_lands_in_the_middle_of_the_work(passes: list[tuple[int, bool]]) -> None:
    BUSY[0] = True
    try:
        _garbage(3 * gc.get_threshold()[0])
    finally:
        BUSY[0] = False
    assert any(busy for _, busy in passes)  # what the idle collections prevent
