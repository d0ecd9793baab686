"""A bounded batching span processor that counts every span it cannot deliver.

Hand-written on the SDK's public interfaces (`SpanProcessor`, `SpanExporter.export`) because the
SDK's BatchSpanProcessor drops spans from its full queue without telling anyone but a log line:
its counts live in private attributes that change between releases. Here a full queue, a span
offered after shutdown and a failed export each reach `on_dropped`, so brownout can publish
`brownout_export_dropped_total{exporter="otlp"}`, whatever SDK version is installed.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["BoundedBatchProcessor"]

log = logging.getLogger(__name__)


class BoundedBatchProcessor(SpanProcessor):
    """Queues ended spans (at most `max_queue_size`) and exports them in batches from one thread."""

    def __init__(
        self,
        exporter: SpanExporter,
        on_dropped: Callable[[int], None],
        *,
        max_queue_size: int = 2048,
        max_export_batch_size: int = 512,
        schedule_delay_millis: float = 1000,
        encode: Callable[[ReadableSpan], Any] | None = None,
    ) -> None:
        """With `encode`, each span is encoded as it ends (on the thread that ends it) and batches go to
        `exporter.export_encoded`: the worker thread then only sends bytes, so it barely competes with
        the event loop for the GIL, and the queue holds bytes instead of span objects for the collector
        to walk."""
        if max_queue_size < 1 or max_export_batch_size < 1 or schedule_delay_millis <= 0:
            raise ValueError("max_queue_size, max_export_batch_size and schedule_delay_millis must be positive")
        self.exporter = exporter
        self._on_dropped = on_dropped
        self._max_queue = max_queue_size
        self._batch = min(max_export_batch_size, max_queue_size)
        self._delay_s = schedule_delay_millis / 1000
        self._encode = encode
        self._queue: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition()
        self._flush_requests: list[threading.Event] = []
        self._stopped = False
        self._worker = threading.Thread(target=self._run, name="brownout-otlp-batch", daemon=True)
        self._worker.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def exporting(self) -> bool:
        """The worker is still running (an export outlived a bounded shutdown)."""
        return self._worker.is_alive()

    # on_start stays SpanProcessor's: a processor quiet on start lets brownout end its spans in one step
    # (core/span_emit.py).

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is None or not span.context.trace_flags.sampled:
            return
        item: Any = span
        if self._encode is not None and not self._stopped and len(self._queue) < self._max_queue:
            try:
                item = self._encode(span)
            except (TypeError, ValueError, AttributeError, OverflowError):
                log.debug("span encoding failed", exc_info=True)
                self._on_dropped(1)
                return
        with self._cond:
            if self._stopped or len(self._queue) >= self._max_queue:
                dropped = True
            else:
                dropped = False
                self._queue.append(item)
                if len(self._queue) >= self._batch:
                    self._cond.notify()
        if dropped:
            self._on_dropped(1)

    def _take(self) -> list[Any]:
        n = min(self._batch, len(self._queue))
        return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stopped and len(self._queue) < self._batch and not self._flush_requests:
                    self._cond.wait(self._delay_s)
                batch = self._take()
                flushes = [] if self._queue else self._flush_requests
                if flushes:
                    self._flush_requests = []
                stop = self._stopped and not self._queue
            if batch:
                self._export(batch)
            for done in flushes:
                done.set()
            if stop:
                return

    def _export(self, batch: list[Any]) -> None:
        n = len(batch)
        try:
            if self._encode is not None:
                try:
                    self.exporter.export_encoded(batch)  # type: ignore[attr-defined]
                finally:
                    # A failed send leaves exceptions in reference cycles (urllib3's) whose tracebacks hold
                    # every frame of this call, and so this `batch`, until a full collection. The encoded
                    # spans (one per exchange) are let go of here instead; the exporter keeps none.
                    batch.clear()
            else:
                self.exporter.export(batch)  # a CountingSpanExporter counts a failed export itself
        except Exception:
            log.debug("span export raised", exc_info=True)
            self._on_dropped(n)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now; False when `timeout_millis` passed first."""
        done = threading.Event()
        with self._cond:
            if not self._worker.is_alive():
                return not self._queue
            self._flush_requests.append(done)
            self._cond.notify()
        return done.wait(timeout_millis / 1000)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop taking spans, export what is queued (bounded by `timeout_s`), count what is left."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._cond.notify()
        self._worker.join(max(0.0, deadline - time.monotonic()))
        if self._worker.is_alive():
            with self._cond:
                left = len(self._queue)
                self._queue.clear()
            if left:
                self._on_dropped(left)
                log.warning(
                    "OTLP shutdown timed out after %.1fs with %d spans queued (counted as dropped)", timeout_s, left
                )
        else:
            self.exporter.shutdown()
