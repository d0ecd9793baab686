"""Spans, invariants and OTLP export in a second process (`proxy.analysis: process`).

The proxy's event loop carries every exchange's bytes. Judging a finished LLM exchange (its span and
OTLP encoding, nine invariants) costs that loop a large share of what relaying it costs. With
`analysis: process` the proxy prices each finished exchange, counts and logs it as inline, and hands
it to a child process (proxy/analysis_worker.py, on the proxy's own interpreter), which builds and
exports its span and runs the invariants. The child writes back only what the proxy needs: the
violations it found (at once), and every few tens of milliseconds how many exchanges it has judged and
how many sessions are open, so the proxy's loop is not woken once per exchange. The proxy counts,
logs, keeps for the control API and announces those violations as it does inline. Sessions live in
the child, which closes idle ones on its own clock.

Nothing is dropped silently. With `analysis_max_queued` exchanges waiting, one more is not judged and
is counted in brownout_invariant_checks_dropped_total, as are those waiting when the child dies. A
child that dies is logged and counted as an internal error, and the proxy judges inline from then on.
A child that fails to start (it never said it was ready) hands back what it was given, to be judged
inline, nothing lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.invariants.records import Violation
from brownout.proxy.analysis_frames import Frames, exchange_frame, frame, portable
from brownout.proxy.config import BrownoutConfig

__all__ = ["AnalysisFailure", "AnalysisProcess", "config_data"]

log = logging.getLogger(__name__)

FLUSH_S = 0.01  # exchanges wait at most this long to be handed over
FLUSH_FRAMES = 64  # or until this many wait


class AnalysisFailure(Exception):
    """A failure the analysis process contained and reported (its traceback is in its own log)."""


def config_data(config: BrownoutConfig) -> dict[str, Any]:
    """The config as the JSON data it was read from: the child validates it again, plugins and all."""
    return config.model_dump(mode="json", exclude_unset=True, by_alias=True)


class AnalysisProcess(asyncio.Protocol):
    """The proxy's end of its analysis process: hand finished exchanges over; violations come back."""

    def __init__(
        self,
        config: BrownoutConfig,
        *,
        guard: Guard,
        found: Callable[[list[Violation]], None],
        lost: Callable[[list[Exchange], int], None],
        dropped: Callable[[int], None],
    ) -> None:
        """`found(violations)`: what the child found, on exchanges or closing sessions. `lost(exchanges,
        n)`: the child is gone; `exchanges` it never started on (to judge inline, nothing repeated), or `n`
        it had unjudged. `dropped(n)`: spans its OTLP export lost."""
        self.guard = guard
        self.max_queued = config.proxy.analysis_max_queued
        self._config = config_data(config)
        self._found, self._lost, self._dropped = found, lost, dropped
        self.submitted = 0  # exchanges handed over
        self.judged = 0  # of those, judged (as the child last said)
        self._unready: list[Exchange] = []  # handed over before the child said it was ready
        self._frames = Frames()
        self._out: list[bytes] = []  # frames to write: at the next flush, or once the transport exists
        self._flushing: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._gone: asyncio.Event | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = False
        self.closing = False
        self.alive = False
        # What the child last reported.
        self.sessions_active = 0
        self.otlp_exported = 0
        self._otlp_dropped = 0

    @property
    def backlog(self) -> int:
        """Exchanges handed over and not judged yet (as far as the child has said)."""
        return self.submitted - self.judged

    def start(self) -> None:
        """On the proxy's loop: start the child and hand it the config."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "brownout.proxy.analysis_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # What this process can import (plugins, custom invariants), the child can too.
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.alive = True
        self._gone = asyncio.Event()
        self._write(frame(("config", self._config)), now=True)
        ours.setblocking(False)
        task = loop.create_task(loop.create_connection(lambda: self, sock=ours))
        task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            self.connection_lost(None)  # no socket to the child: as if it had gone

    # --- to the child --------------------------------------------------------------------

    def submit(self, exchange: Exchange) -> bool:
        """Hand a finished (priced) exchange over; False when it cannot be: the child is gone, or
        max_queued wait for it."""
        if not self.alive or self.closing or self.backlog >= self.max_queued:
            return False
        try:
            data = exchange_frame(exchange)
        except ValueError:  # a value marshal does not write, as a live object a component left in a note
            try:
                data = frame(("x", exchange))
            except Exception:  # noqa: BLE001 - whatever a note holds; the notes the child reads are plain
                data = frame(("x", portable(exchange)))
        self.submitted += 1
        if not self.ready:
            self._unready.append(exchange)
        self._write(data)
        return True

    def reload(self, config: BrownoutConfig) -> None:
        """New invariants and content capture, as inline (the child keeps its sessions)."""
        if self.alive and not self.closing:
            self._write(frame(("reload", config_data(config))), now=True)

    def _write(self, data: bytes, *, now: bool = False) -> None:
        """Exchanges go out in batches, every FLUSH_S: a write wakes the child, and a wake-up per
        exchange cost the proxy's loop more than the encoding (measured on a 2-core VM)."""
        self._out.append(data)
        if now or len(self._out) >= FLUSH_FRAMES:
            self._flush()
        elif self._flushing is None:
            self._flushing = asyncio.get_running_loop().call_later(FLUSH_S, self._flush)

    def _flush(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        if self._transport is not None and self._out:
            out, self._out = self._out, []
            self._transport.write(b"".join(out))

    async def close(self, timeout_s: float) -> None:
        """Close every session and flush the spans in the child, take its last answers, and stop it."""
        if not self.alive or self._gone is None:
            return
        self.closing = True
        self._write(frame(("close", timeout_s)), now=True)
        try:
            await asyncio.wait_for(self._gone.wait(), timeout_s + 2.0)
        except TimeoutError:
            log.error("brownout's analysis process did not stop within %.0f s; killed", timeout_s + 2.0)
            if self._transport is not None:
                self._transport.abort()
        if self.proc is not None:
            try:
                await asyncio.to_thread(self.proc.wait, 2.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    # --- from the child ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._frames.feed(data)
        except Exception as exc:  # noqa: BLE001 - a broken stream ends the child, never the proxy
            self.guard.failed("analysis", exc, "reading the analysis process's answers")
            if self._transport is not None:
                self._transport.abort()
            return
        for message in messages:
            try:
                self._receive(message)
            except Exception as exc:  # noqa: BLE001 - as in Guard.call: traffic first
                self.guard.failed("analysis", exc, f"an answer of the analysis process ({message[0]})")

    def _receive(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "v":
            _, violations, stats = message
            self._stats(stats)
            if violations:
                self._found(violations)
        elif kind == "err":
            _, component, text, context = message
            self.guard.failed(component, AnalysisFailure(text), f"{context}, in the analysis process", trace=False)
        elif kind == "ready":
            self.ready = True
            self._unready.clear()
        elif kind == "fail":
            log.error("brownout's analysis process could not start: %s; judging inline", message[1])

    def _stats(self, stats: Sequence[int]) -> None:
        self.judged, self.sessions_active, self.otlp_exported, dropped = stats
        if dropped > self._otlp_dropped:
            self._dropped(dropped - self._otlp_dropped)
        self._otlp_dropped = dropped

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.alive:
            return
        self.alive = False
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        if self._gone is not None:
            self._gone.set()
        unjudged, unready = self.backlog, self._unready
        self._unready = []
        if not self.closing:
            code = self.proc.poll() if self.proc is not None else None
            self.guard.failed(
                "analysis",
                AnalysisFailure(f"the analysis process exited (code {code})"),
                f"{unjudged} exchanges unjudged; judging inline from now on",
                trace=False,
            )
        self._lost(unready, 0 if unready else unjudged)
