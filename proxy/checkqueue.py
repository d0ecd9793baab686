"""Async jobs run in order per key, a bounded number at once, from a bounded queue.

With a shared session store the invariant checks of a finished exchange take a round trip or two,
so they run as tasks after the response. Two exchanges of one session must not race each other in
one process (they would only conflict on the store and retry), so a session's jobs run one after
another, in the order they were submitted; different sessions run concurrently, at most
`max_running` at once. A job that finds `max_queued` jobs waiting is not queued: `submit` says so
and the caller counts it, so nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

__all__ = ["OrderedJobs"]

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


class OrderedJobs:
    """Jobs keyed by session: in order within a key, concurrent across keys, bounded throughout."""

    def __init__(self, *, max_running: int = 64, max_queued: int = 10_000) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be >= 1, got {max_running}")
        if max_queued < 1:
            raise ValueError(f"max_queued must be >= 1, got {max_queued}")
        self.max_running = max_running
        self.max_queued = max_queued
        self.queued = 0  # submitted, not yet started
        self._jobs: dict[str, deque[Job]] = {}  # per key, while it has jobs or one is running
        self._ready: deque[str] = deque()  # keys with jobs, waiting for a running slot
        self._running: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def running(self) -> int:
        return len(self._running)

    def submit(self, key: str, job: Job) -> bool:
        """Queue `job` after the key's earlier ones; False (not queued) when max_queued jobs are waiting."""
        if self.queued >= self.max_queued:
            return False
        self.queued += 1
        self._idle.clear()
        jobs = self._jobs.get(key)
        if jobs is not None:
            jobs.append(job)
            return True
        # Queued before the task starts: an eager task factory runs it up to its first wait right here.
        self._jobs[key] = deque((job,))
        if len(self._running) < self.max_running:
            self._start(key)
        else:
            self._ready.append(key)
        return True

    def _start(self, key: str) -> None:
        self._running.add(key)
        task = asyncio.get_running_loop().create_task(self._drain(key), name=f"brownout-checks-{len(self._tasks)}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, key: str) -> None:
        jobs = self._jobs[key]
        try:
            while jobs:
                job = jobs.popleft()
                self.queued -= 1
                try:
                    await job()
                except Exception:  # the jobs contain their own errors; this keeps the key's queue going
                    log.exception("brownout: an invariant check job failed")
        finally:
            self.queued -= len(jobs)  # left behind when cancelled (the loop is closing)
            del self._jobs[key]
            self._running.discard(key)
            if self._ready:
                self._start(self._ready.popleft())
            elif not self._running:
                self._idle.set()

    async def join(self, timeout_s: float) -> int:
        """Wait (at most timeout_s) for every queued and running job; how many were still queued then."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            pass
        return self.queued
