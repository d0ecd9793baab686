"""Bookkeeping that yields to traffic: work run when the event loop would otherwise wait for I/O.

A finished exchange's bookkeeping (price, metrics, logs, listeners; inline also its span and
invariants) used to run on the loop's next turn, right after its answer was written. The loop is
idle at that moment, but only until the client's next request arrives: an agent that calls again at
once (a load test, a tool loop, several agents on one proxy) found the loop busy with the last
exchange's bookkeeping, and its request waited for it. Here that work waits until the loop is about
to block on I/O after at least one more I/O event (the next request has been read and forwarded,
and the loop is waiting for the upstream's answer), or after IDLE_S without one (nobody is calling),
and at the latest MAX_S after it was queued (metrics, logs and violations stay current under a load
that never lets the loop idle). Work runs in the order it was queued, one item per idle moment,
and I/O that is waiting goes before each.

The moment the loop would block is seen by wrapping the `select` of the loop's selector
(`loop._selector`, asyncio's selector event loop, the default on Linux and macOS). A loop without one
(another event loop implementation) gets `call_soon` instead, as before: the same order, run at once.
One `IdleWork` serves every proxy on a loop; each keeps its own count of what it has queued.

In a process that is brownout's own, the cyclic garbage collector's passes are queued the same way
(`collect_when_idle`, proxy/heap.py): one is queued once enough objects wait for it.
"""

from __future__ import annotations

import collections
import time
from asyncio import AbstractEventLoop, TimerHandle
from collections.abc import Callable
from typing import Any

from brownout.proxy.heap import IdleCollections

__all__ = ["IDLE_S", "MAX_S", "IdleWork"]

IDLE_S = 0.001  # a client that sends nothing this long after its answer is not waiting on this loop
MAX_S = 0.02  # queued work never waits longer than this

Item = tuple[float, Callable[..., None], tuple[Any, ...]]


class IdleWork:
    """The work queue of one event loop, run when the loop would wait for I/O (see the module doc)."""

    def __init__(self, loop: AbstractEventLoop, select: Callable[[float | None], list[Any]]) -> None:
        self._loop = loop
        self._select = select
        self._items: collections.deque[Item] = collections.deque()
        self._moved = False  # an I/O event came in since the oldest queued item
        self._overdue: TimerHandle | None = None
        self._collections: IdleCollections | None = None
        self._collection_queued = False

    @classmethod
    def of(cls, loop: AbstractEventLoop) -> IdleWork | None:
        """The loop's queue, installed on first use; None for a loop without a selector to wrap."""
        selector = getattr(loop, "_selector", None)
        select = getattr(selector, "select", None)
        if select is None:
            return None
        installed = getattr(select, "__self__", None)
        if isinstance(installed, IdleWork):
            return installed
        work = cls(loop, select)
        selector.select = work.select  # type: ignore[union-attr]
        return work

    def __len__(self) -> int:
        return len(self._items)

    def add(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at the loop's next idle moment (MAX_S at the latest); on the loop's thread."""
        self._items.append((time.monotonic(), fn, args))
        if self._overdue is None:
            self._overdue = self._loop.call_later(MAX_S, self._run_overdue)

    def collect_when_idle(self, collections: IdleCollections | None) -> None:
        """Queue the collector's passes as they fall due (None: stop); `collections` must be started."""
        self._collections = collections

    def _collect(self) -> None:
        self._collection_queued = False
        if self._collections is not None:
            self._collections.collect()

    def run_now(self, owner: Callable[[Item], bool]) -> None:
        """Run at once, in order, the queued items `owner` claims (a proxy that stops takes its own)."""
        mine = [item for item in self._items if owner(item)]
        if not mine:
            return
        self._items = collections.deque(item for item in self._items if not owner(item))
        for item in mine:
            self._run(item)
        self._settle()

    # --- inside the loop ------------------------------------------------------------------

    def select(self, timeout: float | None = None) -> list[Any]:
        """The selector's `select`, as the loop calls it each turn (timeout 0 while it has callbacks ready)."""
        collections = self._collections
        if collections is not None and not self._collection_queued and collections.due():
            self._collection_queued = True
            self.add(self._collect)
        if not self._items:
            return self._select(timeout)
        if timeout is not None and timeout <= 0:
            events = self._select(timeout)
            self._moved = self._moved or bool(events)
            return events
        # The loop would block: first any I/O that is waiting (it goes first), then one item.
        wait = 0.0 if self._moved else (IDLE_S if timeout is None else min(timeout, IDLE_S))
        events = self._select(wait)
        if events:
            self._moved = True
            return events
        if not self._moved and timeout is not None and timeout < IDLE_S:
            return events  # a timer is due before IDLE_S is up: the loop runs it and comes back
        self._run(self._items.popleft())
        self._settle()
        return []  # the loop goes on with its timers and ready callbacks, then comes back here

    def _run_overdue(self) -> None:
        self._overdue = None
        due = time.monotonic() - MAX_S * 0.9
        while self._items and self._items[0][0] <= due:
            self._run(self._items.popleft())
        self._settle()

    def _settle(self) -> None:
        if self._items:
            if self._overdue is None:
                self._overdue = self._loop.call_later(MAX_S, self._run_overdue)
            return
        self._moved = False
        if self._overdue is not None:
            self._overdue.cancel()
            self._overdue = None

    def _run(self, item: Item) -> None:
        _, fn, args = item
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - as for a call_soon callback: reported, the loop goes on
            self._loop.call_exception_handler({"message": f"Exception in idle callback {fn!r}", "exception": exc})
