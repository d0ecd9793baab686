"""Work nobody waits on, rationed to a share of the event loop while live traffic needs the rest.

When a realtime generation ends, its spans, invariants and exporters run on the loop that relays every
session's events, and they cost about as much as relaying one event (0.5 ms on the benchmark machine). One at a time
they are lost in the traffic; but generations end together when many sessions answer one moment (200
synchronized sessions: 200 completions in 100 ms, 0.1 s of work), and run as they come, they hold up
every other session's events for that long. Rationed, they take at most `budget_s` of every
`window_s` while a backlog lasts (2 ms of 10 by default): an event waits behind them for 2 ms at most.
Work that has waited `max_delay_s` runs at once, so a backlog stays bounded when the loop is never idle.

While the budget lasts (the usual case), work runs on the loop's next turn, as `call_soon` would run it.
Work runs in the order it was submitted; `flush` runs what is left (shutdown). A failure is contained by
the guard and the next piece of work still runs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from brownout.core.guard import Guard

__all__ = ["Rationed"]

BUDGET_S = 0.002
WINDOW_S = 0.010
MAX_DELAY_S = 1.0


class Rationed:
    """A FIFO of callbacks, run on the loop at most `budget_s` per `window_s` (older than `max_delay_s`: at once)."""

    def __init__(
        self,
        guard: Guard,
        *,
        component: str,
        budget_s: float = BUDGET_S,
        window_s: float = WINDOW_S,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        if not 0 < budget_s <= window_s:
            raise ValueError(f"budget_s must be in (0, window_s], got {budget_s}")
        if max_delay_s < 0:
            raise ValueError(f"max_delay_s must be >= 0, got {max_delay_s}")
        self.guard = guard
        self.component = component
        self.budget_s = budget_s
        self.window_s = window_s
        self.max_delay_s = max_delay_s
        self.deferred = 0  # times the backlog waited for a later window
        self._queue: deque[tuple[float, Callable[..., Any], tuple[Any, ...]]] = deque()
        self._window_end = 0.0
        self._spent = 0.0
        self._handle: asyncio.Handle | None = None

    @property
    def pending(self) -> int:
        return len(self._queue)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on the loop after the work submitted before it, within the ration."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no running loop (driven synchronously, e.g. by a test harness)
            self._run(fn, args)
            return
        self._queue.append((loop.time(), fn, args))
        if self._handle is None:
            self._schedule(loop)

    def flush(self) -> int:
        """Run everything still queued, now (shutdown); how much ran."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        n = 0
        while self._queue:
            _, fn, args = self._queue.popleft()
            self._run(fn, args)
            n += 1
        return n

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        if now >= self._window_end or self._spent < self.budget_s or self._overdue(now):
            self._handle = loop.call_soon(self._drain)
        else:
            self.deferred += 1
            self._handle = loop.call_at(self._window_end, self._drain)

    def _drain(self) -> None:
        self._handle = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now >= self._window_end:
            self._window_end, self._spent = now + self.window_s, 0.0
        while self._queue and (self._spent < self.budget_s or self._overdue(now)):
            _, fn, args = self._queue.popleft()
            self._run(fn, args)
            after = loop.time()
            self._spent += after - now
            now = after
        if self._queue:
            self._schedule(loop)

    def _overdue(self, now: float) -> bool:
        return bool(self._queue) and now - self._queue[0][0] >= self.max_delay_s

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.guard.call(self.component, fn, *args, context=f"{self.component}: deferred work")
