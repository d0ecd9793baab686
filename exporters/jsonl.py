"""Append-only JSONL logs: violations, decisions, exchange summaries. One record per line.

Each line is written and flushed under a lock, so a crash loses at most the line being
written and lines from concurrent threads never interleave. Write failures are counted as
export drops and never raised into the request path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from brownout.core.exchange import Exchange

__all__ = ["JsonlWriter", "exchange_summary"]

log = logging.getLogger(__name__)


class JsonlWriter:
    """A thread-safe append-only JSONL file; `write` never raises."""

    def __init__(
        self, path: str | Path, *, on_dropped: Callable[[int], None] = lambda n: None, fsync: bool = False
    ) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._on_dropped = on_dropped
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._closed = False
        self.written = 0
        self.failures = 0

    def _open(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Line-buffered text mode plus an explicit flush: each record reaches the OS at once.
        return self.path.open("a", encoding="utf-8", buffering=1)

    def write(self, record: Mapping[str, Any]) -> bool:
        """Append one record; False (and a counted drop) when it could not be written."""
        try:
            line = json.dumps(record, separators=(",", ":"), default=str, ensure_ascii=False) + "\n"
        except (TypeError, ValueError) as e:
            return self._failed(e)
        with self._lock:
            if self._closed:
                return self._failed(ValueError(f"{self.path} is closed"))
            try:
                if self._file is None:
                    self._file = self._open()  # lazily: a bad path fails per record, not at startup
                self._file.write(line)
                self._file.flush()
                if self.fsync:
                    os.fsync(self._file.fileno())
            except (OSError, ValueError) as e:
                self._reset()  # reopen next time: the disk may come back
                return self._failed(e)
            self.written += 1
        return True

    def _reset(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):  # closing a file that already failed may fail again
                self._file.close()
            self._file = None

    def _failed(self, exc: BaseException) -> bool:
        self.failures += 1
        if self.failures == 1:
            log.error("JSONL log %s: write failed (counted in brownout_export_dropped_total): %s", self.path, exc)
        try:
            self._on_dropped(1)
        except Exception:
            log.debug("drop counter failed", exc_info=True)
        return False

    def close(self) -> None:
        """Flush, fsync and close (idempotent); later writes count as drops."""
        with self._lock:
            self._closed = True
            if self._file is not None:
                try:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError:
                    log.debug("fsync of %s failed", self.path, exc_info=True)
                self._reset()


def exchange_summary(exchange: Exchange) -> dict[str, Any]:
    """One exchange as a log line: ids, routing, timing, usage, faults. No bodies, headers or messages."""
    t = exchange.timings
    return {
        "id": exchange.id,
        "session": exchange.session,
        "timestamp": t.start,
        "method": exchange.method,
        "host": exchange.host,
        "port": exchange.port,
        "path": exchange.path,  # already redacted of query-string credentials by flowmodel
        "provider": exchange.provider,
        "operation": exchange.operation,
        "model": exchange.model,
        "stream": exchange.stream,
        "tool": exchange.tool_name,
        "status": exchange.status,
        "status_class": exchange.status_class,
        "error_type": exchange.error_type,
        "duration_s": t.duration_s,
        "ttfc_s": t.ttfc_s,
        "input_tokens": exchange.usage.input_tokens,
        "output_tokens": exchange.usage.output_tokens,
        "cost": _cost(exchange),
        "finish_reasons": list(exchange.finish_reasons),
        "retry_count": exchange.retry_count,
        "stream_complete": exchange.stream_complete,
        "request_bytes": exchange.request_bytes,
        "response_bytes": exchange.response_bytes,
        "tool_calls": [c.name for c in exchange.tool_calls],
        # Fault params can hold injected text; rule and fault type are enough to correlate.
        "faults": [{"rule": f.rule, "fault": f.fault, "at": f.at} for f in exchange.faults],
    }


def _cost(exchange: Exchange) -> dict[str, Any] | None:
    cost = exchange.cost
    if cost is None:
        return None
    return {"total": cost.total, "input": cost.input, "output": cost.output, "currency": cost.currency}
