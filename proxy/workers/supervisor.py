"""The worker processes of `brownout run --workers N`: start them, restart one that dies, stop them all.

Each worker is `python -m brownout.proxy.workers.worker` (proxy/workers/worker.py) in a session of
its own, so a Ctrl-C at the terminal reaches the supervisor alone, which then stops every worker the
way `brownout run` stops: SIGTERM drains, a second one cuts what is still in flight.

A worker that dies on its own (a crash, the OOM killer) is restarted, after a short backoff that
grows with each death; one that dies `max_restarts` times within `restart_window_s` is given up,
and when no worker is left the supervisor says so and its caller exits non-zero. A worker that
fails while the fleet starts is not retried: start-up failures (a bad option, a port) repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from brownout.proxy.workers.spec import WorkerSpec

__all__ = ["Supervisor", "WorkerStartError", "WorkerState"]

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class WorkerState:
    """One worker as the supervisor's endpoints see it (a snapshot; the process may have moved on)."""

    index: int
    pid: int | None = None
    alive: bool = False
    restarts: int = 0
    metrics_url: str | None = None
    control_url: str | None = None


class WorkerStartError(RuntimeError):
    """A worker exited (or hung) before it listened, while the fleet started."""


@dataclass(eq=False)
class _Process:
    proc: asyncio.subprocess.Process
    channel: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    counts: dict[str, Any] | None = None  # the worker's summary counts, sent when it stopped


@dataclass(eq=False)
class _Slot:
    index: int
    process: _Process | None = None
    restarts: int = 0
    deaths: deque[float] = dataclasses.field(default_factory=deque)
    given_up: bool = False


def _describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


class Supervisor:
    """N worker processes built from `spec_for(index)`; see the module docstring for the policy."""

    def __init__(
        self,
        count: int,
        spec_for: Callable[[int], WorkerSpec],
        *,
        on_ready: Callable[[WorkerState], Awaitable[None]] | None = None,
        on_exit: Callable[[WorkerState], None] | None = None,
        max_restarts: int = 5,
        restart_window_s: float = 60.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        ready_timeout_s: float = READY_TIMEOUT_S,
        python: str = sys.executable,
    ) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.spec_for = spec_for
        self.on_ready = on_ready
        self.on_exit = on_exit
        self.max_restarts, self.restart_window_s = max_restarts, restart_window_s
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.ready_timeout_s = ready_timeout_s
        self.python = python
        self._slots = [_Slot(i) for i in range(count)]
        self._states: tuple[WorkerState, ...] = tuple(WorkerState(i) for i in range(count))
        self._tasks: set[asyncio.Task[None]] = set()
        self._starting = True
        self._stopping = False
        self.all_gone = asyncio.Event()  # set when every worker died and none will be restarted
        self.exit_codes: dict[int, int] = {}  # index -> the last exit code of its process, at the stop
        self.counts: list[dict[str, Any]] = []  # each stopped worker's summary counts

    # --- what other threads read -----------------------------------------------------------

    def workers(self) -> tuple[WorkerState, ...]:
        """Every worker slot as it stands (safe from any thread: a tuple replaced whole)."""
        return self._states

    def _publish(self) -> None:
        states = []
        for slot in self._slots:
            p = slot.process
            alive = p is not None and p.ready.is_set() and p.proc.returncode is None
            states.append(
                WorkerState(
                    index=slot.index,
                    pid=p.proc.pid if p is not None else None,
                    alive=alive,
                    restarts=slot.restarts,
                    metrics_url=p.info.get("metrics_url") if p is not None else None,
                    control_url=p.info.get("control_url") if p is not None else None,
                )
            )
        self._states = tuple(states)

    # --- start ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and wait until each listens; WorkerStartError (the others stopped) if one cannot."""
        for slot in self._slots:
            await self._spawn(slot)
        try:
            for slot in self._slots:
                await self._wait_ready(slot)
        except WorkerStartError:
            await self.stop(timeout_s=10.0)
            raise
        self._starting = False
        self._publish()

    async def _spawn(self, slot: _Slot) -> None:
        ours, theirs = socket.socketpair()
        spec = dataclasses.replace(self.spec_for(slot.index), channel_fd=theirs.fileno())
        try:
            proc = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                "brownout.proxy.workers.worker",
                spec.to_json(),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # Out of the terminal's session: its Ctrl-C is the supervisor's to pass on, once, and
                # no job control (a `stty tostop` terminal stopping a background writer) applies to workers.
                start_new_session=True,
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        process = _Process(proc, reader, writer)
        slot.process = process
        task = asyncio.create_task(self._watch(slot, process), name=f"brownout-worker-{slot.index}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait_ready(self, slot: _Slot) -> None:
        process = slot.process
        assert process is not None
        ready = asyncio.create_task(process.ready.wait())
        exited = asyncio.create_task(process.proc.wait())
        await asyncio.wait([ready, exited], timeout=self.ready_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        exited.cancel()
        if process.ready.is_set():
            return
        code = process.proc.returncode
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                process.proc.kill()
            raise WorkerStartError(f"worker {slot.index} did not listen within {self.ready_timeout_s:g} s")
        raise WorkerStartError(f"worker {slot.index} exited with {_describe(code)} before it listened")

    # --- watching ---------------------------------------------------------------------------

    async def _watch(self, slot: _Slot, process: _Process) -> None:
        while line := await process.channel.readline():
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("worker %d sent an unreadable message", slot.index)
                continue
            if message.get("event") == "ready":
                process.info = message
                process.ready.set()
                self._publish()
                if self.on_ready is not None and not self._stopping:
                    await self.on_ready(self._states[slot.index])
            elif message.get("event") == "stopped":
                process.counts = message.get("counts") or {}
        code = await process.proc.wait()
        process.writer.close()
        if process.counts is not None:
            self.counts.append(process.counts)
        state = self._states[slot.index]
        self._publish()
        if self.on_exit is not None and state.pid is not None:
            self.on_exit(state)
        if self._stopping or self._starting:
            self.exit_codes[slot.index] = code
            return
        self._died(slot, f"(pid {process.proc.pid}) exited with {_describe(code)}")

    def _died(self, slot: _Slot, how: str) -> None:
        now = time.monotonic()
        slot.deaths.append(now)
        while slot.deaths and slot.deaths[0] < now - self.restart_window_s:
            slot.deaths.popleft()
        if len(slot.deaths) > self.max_restarts:
            slot.given_up = True
            log.error(
                "worker %d %s, %d times in %g s: not restarted again",
                slot.index,
                how,
                len(slot.deaths),
                self.restart_window_s,
            )
            if all(s.given_up for s in self._slots):
                log.error("no worker left")
                self.all_gone.set()
            return
        delay = min(self.backoff_s * 2 ** (len(slot.deaths) - 1), self.max_backoff_s)
        log.warning("worker %d %s; restarting it in %.1f s", slot.index, how, delay)
        task = asyncio.create_task(self._restart(slot, delay), name=f"brownout-restart-{slot.index}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _restart(self, slot: _Slot, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if self._stopping:
            return
        slot.restarts += 1
        try:
            await self._spawn(slot)
        except OSError as e:
            self._died(slot, f"could not be started ({e})")
            return
        try:
            await self._wait_ready(slot)
        except WorkerStartError as e:
            # Its watch task sees the process end (_wait_ready ends one that hangs) and counts the death.
            log.warning("%s", e)

    # --- stop -------------------------------------------------------------------------------

    def signal_all(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` to every worker process still running."""
        for slot in self._slots:
            p = slot.process
            if p is not None and p.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.proc.send_signal(sig)

    async def stop(self, *, timeout_s: float, force: asyncio.Event | None = None) -> None:
        """SIGTERM every worker (each drains); SIGTERM again when `force` is set (each cuts what is in
        flight); SIGKILL whatever still runs after `timeout_s`. Returns once every process has exited."""
        self._stopping = True
        self.signal_all()
        pending = {t for t in self._tasks if not t.get_name().startswith("brownout-restart")}
        for t in self._tasks - pending:
            t.cancel()
        waits: set[asyncio.Future[Any]] = set(pending)
        forced = asyncio.ensure_future(force.wait()) if force is not None else None
        deadline = asyncio.get_running_loop().time() + timeout_s
        while waits:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                log.error("workers still running %g s after SIGTERM: killing them", timeout_s)
                self.signal_all(signal.SIGKILL)
                await asyncio.wait(waits, timeout=10)
                break
            candidates = waits | ({forced} if forced is not None and not forced.done() else set())
            done, _ = await asyncio.wait(candidates, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if forced is not None and forced in done:
                self.signal_all()  # the second signal: cut what is in flight
            waits -= done
        if forced is not None:
            forced.cancel()
