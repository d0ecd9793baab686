"""The analysis process (`proxy.analysis: process`): spans, invariants and OTLP export of the
exchanges its proxy sends it. See proxy/analysis.py for the proxy's side.

    python -m brownout.proxy.analysis_worker FD     # FD: its end of a socket pair with the proxy

Messages in: ("config", data) once, then ("x", exchange), ("reload", data), ("close", timeout_s).
Messages out: ("ready",) or ("fail", why); ("v", violations, stats) at once when exchanges or closing
sessions break an invariant, else at most every STATS_EVERY_S when a count changed; contained
failures ("err", component, text, context). Stats are (exchanges judged, sessions active, spans
exported, spans dropped). It ends on "close" (after closing every session and flushing spans) or
when the proxy's end closes; Ctrl-C is the proxy's to handle, so SIGINT is ignored here.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

import pydantic
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.secrets import redact_keys
from brownout.core.semconv import resolve_semconv
from brownout.core.spans import SpanBuilder
from brownout.exporters.otlp import OtlpTracing
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner
from brownout.proxy.analysis_frames import Frames, frame
from brownout.proxy.config import BrownoutConfig

__all__ = ["Analysis", "main"]

log = logging.getLogger("brownout.analysis")

SWEEP_EVERY_S = 1.0
RECV_BYTES = 256 * 1024
STATS_EVERY_S = 0.05  # how stale the proxy's count of judged exchanges may get


class _ReportingGuard(Guard):
    """A guard that also tells the proxy what failed, so its counter and log show it."""

    def __init__(self) -> None:
        super().__init__()
        self.outbox: list[tuple[Any, ...]] = []

    def failed(self, component: str, exc: BaseException, context: str = "", **kwargs: Any) -> None:
        super().failed(component, exc, context, **kwargs)
        self.outbox.append(("err", component, _why(exc), context))


class Analysis:
    """What the inline pipeline does with a finished exchange, up to its violations."""

    def __init__(self, config: BrownoutConfig) -> None:
        self.guard = _ReportingGuard()
        settings = config.exporters.otlp.resolve(os.environ)
        self._dropped = 0
        self._lock = threading.Lock()
        self.tracing = OtlpTracing(settings, on_dropped=self._on_dropped) if settings is not None else None
        provider = (
            self.tracing.provider
            if self.tracing is not None
            else TracerProvider(resource=Resource.create({SERVICE_NAME: "brownout"}))
        )
        self.spans = SpanBuilder(
            provider,
            capture_content=config.proxy.capture_content,
            semconv=resolve_semconv(config.exporters.semconv, os.environ),
        )
        self.invariants = InvariantRunner(
            config.invariants, guard=self.guard, types=config.catalogue.invariants, idle_s=config.proxy.session_idle_s
        )
        self.judged = 0
        self._said = self.stats()  # the stats the proxy has

    def _on_dropped(self, n: int) -> None:
        with self._lock:
            self._dropped += n

    def stats(self) -> tuple[int, int, int, int]:
        exported = self.tracing.exporter.exported if self.tracing is not None else 0
        with self._lock:
            return self.judged, self.invariants.sessions_active, exported, self._dropped

    def judge(self, exchange: Exchange) -> list[Violation]:
        """Its span (exported) and the invariants' verdict; the proxy priced it."""
        violations = self.invariants.check_exchange(self.spans, exchange)
        self.judged += 1
        return violations

    def report(self, violations: list[Violation]) -> tuple[Any, ...] | None:
        """What to tell the proxy: the violations, with the stats; None when there is nothing new."""
        stats = self.stats()
        if not violations and stats == self._said:
            return None
        self._said = stats
        return ("v", violations, stats)

    def reload(self, config: BrownoutConfig) -> None:
        self.invariants.reload(config.invariants, config.catalogue.invariants)
        self.spans.capture_content = config.proxy.capture_content

    def sweep(self, *, close_all: bool = False) -> list[Violation]:
        """Close idle sessions (all of them with close_all): what their session-end checks found."""
        fn = self.invariants.close_all if close_all else self.invariants.sweep
        return self.guard.call("invariants", fn, default=[]) or []

    def close(self, timeout_s: float) -> tuple[Any, ...]:
        found = self.sweep(close_all=True)
        if self.tracing is not None:
            self.guard.call("otlp", self.tracing.shutdown, timeout_s)
        return ("v", found, self.stats())


def serve(sock: socket.socket) -> int:
    """Answer the proxy until it says close or goes away."""
    frames = Frames()
    analysis: Analysis | None = None
    found: list[Violation] = []
    now = time.monotonic()
    next_sweep, next_stats = now + SWEEP_EVERY_S, now + STATS_EVERY_S
    while True:
        timeout = max(0.0, min(next_sweep, next_stats) - time.monotonic())
        readable, _, _ = select.select([sock], [], [], timeout)
        out: list[tuple[Any, ...]] = []
        stop = False
        if readable:
            data = sock.recv(RECV_BYTES)
            if not data:
                return 0  # the proxy is gone: nobody is left to tell
            for message in frames.feed(data):
                kind = message[0]
                if kind == "x" and analysis is not None:
                    found += analysis.judge(message[1])
                elif kind == "config":
                    try:
                        analysis = Analysis(BrownoutConfig.model_validate(message[1]))
                    except Exception as exc:  # noqa: BLE001 - any reason is the proxy's to hear
                        sock.sendall(frame(("fail", _why(exc))))
                        return 1
                    out.append(("ready",))
                    gc.collect()
                    gc.freeze()  # the heap built so far lives as long as the process: no collection walks it
                elif kind == "reload" and analysis is not None:
                    analysis.guard.call("invariants", analysis.reload, BrownoutConfig.model_validate(message[1]))
                elif kind == "close":
                    if analysis is not None:
                        out.append(analysis.close(float(message[1])))
                    stop = True
                    break
        now = time.monotonic()
        if analysis is not None and not stop:
            if now >= next_sweep:
                next_sweep = now + SWEEP_EVERY_S
                found += analysis.sweep()
            if found or now >= next_stats:
                next_stats = now + STATS_EVERY_S
                if (said := analysis.report(found)) is not None:
                    out.append(said)
                found = []
        if analysis is not None and analysis.guard.outbox:
            out.extend(analysis.guard.outbox)
            analysis.guard.outbox.clear()
        if out:
            sock.sendall(b"".join(frame(m) for m in out))
        if stop:
            return 0


def _why(exc: BaseException) -> str:
    """What failed, for the proxy's log: a config error's fields and messages without the values it was
    given (they can be credentials), and no API key of a known format."""
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
    return redact_keys(f"{type(exc).__name__}: {exc}")


def _yield_to_traffic() -> None:
    """Never take a core from the proxy when it has traffic: a batch process (Linux) is not let
    preempt a process it wakes, as it would the proxy each time it hands an exchange over."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:
            log.debug("SCHED_BATCH refused", exc_info=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _yield_to_traffic()
    logging.basicConfig(level=logging.WARNING, format="brownout analysis: %(levelname)s %(name)s: %(message)s")
    sock = socket.socket(fileno=int(args[0]))
    try:
        return serve(sock)
    except (BrokenPipeError, ConnectionResetError):
        return 0  # the proxy went away mid-answer
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
