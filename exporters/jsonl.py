"""Append-only JSONL logs: violations, decisions, exchange summaries. One record per line.

`write` runs on the proxy's event loop and only enqueues; one thread per file serialises, writes
and flushes in batches, so a slow or stalled disk never stalls traffic. The queue is bounded: a
record that does not fit, or that cannot be written (a full disk, an unwritable path), is counted
as an export drop and logged once through the Guard. `close` writes everything queued, fsyncs
and closes: shutdown loses no line that was handed over.

The file is watched the way `logging.handlers.WatchedFileHandler` watches it (that handler does
the watching here): a log moved away (logrotate's `mv`) or deleted is reopened at its configured
path before the next write, its directory recreated if it was removed.
"""

from __future__ import annotations

import io
import json
import logging
import logging.handlers
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from brownout.core.exchange import Exchange, RealtimeInfo
from brownout.core.guard import Guard
from brownout.core.shapes import arguments_shape
from brownout.core.span_join import agent_fields

__all__ = ["JsonlWriter", "exchange_summary"]

log = logging.getLogger(__name__)

COMPONENT = "exporter:jsonl"
_STOP = object()  # queued by close(): write what came before, then finish


class _WatchedFile(logging.handlers.WatchedFileHandler):
    """A WatchedFileHandler used as a file: it recreates a removed directory and raises what it could not write."""

    def __init__(self, path: Path) -> None:
        # backslashreplace: a lone surrogate in a record becomes a JSON \\u escape instead of failing the batch.
        super().__init__(path, encoding="utf-8", errors="backslashreplace", delay=True)
        self._error: BaseException | None = None
        self._syncable = False

    def _open(self) -> io.TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        stream = super()._open()
        # A delayed first open skips the handler's own stat: without it, the next write would reopen.
        st = os.fstat(stream.fileno())
        self.dev, self.ino = st.st_dev, st.st_ino
        self._syncable = stat.S_ISREG(st.st_mode)  # a pipe or a device cannot be fsynced (EINVAL)
        return stream

    def handleError(self, record: logging.LogRecord) -> None:
        self._error = sys.exc_info()[1]  # instead of a traceback on stderr: append() raises it

    def append(self, text: str, *, fsync: bool) -> None:
        """Write `text` and a newline, flush (and fsync); raises OSError when it could not."""
        self._error = None
        try:
            self.emit(logging.makeLogRecord({"msg": text}))  # reopens a moved or deleted file first
            if self._error is None and fsync:
                self._sync()
        except (OSError, ValueError) as e:
            self._error = e
        if self._error is not None:
            self.discard()
            raise self._error if isinstance(self._error, OSError) else OSError(str(self._error))

    def discard(self) -> None:
        """Drop the stream after a failure: the next write opens the path afresh (the disk may be back)."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass  # its buffer held the lines that failed: they are counted already

    def _sync(self) -> None:
        if self.stream is not None and self._syncable:
            os.fsync(self.stream.fileno())

    def finish(self) -> None:
        """Flush, fsync and close."""
        try:
            if self.stream is not None:
                self.stream.flush()
                self._sync()
        finally:
            self.close()


class JsonlWriter:
    """An append-only JSONL file: a bounded queue in front of one writer thread; `write` never blocks or raises."""

    def __init__(
        self,
        path: str | Path,
        *,
        guard: Guard | None = None,
        on_dropped: Callable[[int], None] = lambda n: None,
        fsync: bool = False,
        max_queue_size: int = 10_000,
        batch_size: int = 512,
    ) -> None:
        if max_queue_size < 1 or batch_size < 1:
            raise ValueError("max_queue_size and batch_size must be positive")
        self.path = Path(path)
        self.fsync = fsync
        self.guard = guard or Guard()
        self._on_dropped = on_dropped
        self._batch = batch_size
        self._queue: queue.Queue[Any] = queue.Queue(max_queue_size)
        self._file = _WatchedFile(self.path)
        self._closed = False
        self.written = 0
        self.dropped = 0
        self._count_lock = threading.Lock()  # drops are counted on the caller's thread and the writer's
        self._thread = threading.Thread(target=self._run, name=f"brownout-jsonl-{self.path.name}", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Records waiting for the writer thread."""
        return self._queue.qsize()

    def write(self, record: Mapping[str, Any]) -> bool:
        """Queue one record for the writer thread; False (and a counted drop) when it cannot be taken."""
        if self._closed:
            self._lost(1, ValueError(f"{self.path} is closed"))
            return False
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self._lost(1, OverflowError(f"{self._queue.maxsize} lines wait for {self.path}: the disk is too slow"))
            return False
        return True

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every record queued so far is written (or dropped); False when time ran out."""
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, fsync and close (bounded by `timeout_s`; idempotent). Later writes
        count as drops, as do lines still queued when a stalled disk outlasts the bound."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            pass  # the disk is stalled; the join below times out too and counts what is left
        self._thread.join(max(0.0, deadline - time.monotonic()))
        left = self._take_left()
        if left:  # a stalled disk, or writes that raced with close
            self._lost(left, TimeoutError(f"{left} lines for {self.path} were still queued at close"))

    def _take_left(self) -> int:
        left = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return left
            if isinstance(item, threading.Event):
                item.set()
            elif item is not _STOP:
                left += 1

    # --- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < self._batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            records = [item for item in batch if item is not _STOP and not isinstance(item, threading.Event)]
            if records:
                self._append(records)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
        try:
            self._file.finish()
        except (OSError, ValueError) as e:
            self.guard.lost(COMPONENT, e, f"closing {self.path}")

    def _append(self, records: list[Any]) -> None:
        lines = []
        for record in records:
            line = self.guard.call(COMPONENT, _dumps, record, context=f"a record for {self.path}")
            if line is None:  # a record that is no JSON: a bug, counted by the guard and as a drop
                self._count(1)
            else:
                lines.append(line)
        if not lines:
            return
        try:
            self._file.append("\n".join(lines), fsync=self.fsync)
        except OSError as e:
            self._lost(len(lines), e)
            return
        self.written += len(lines)

    def _lost(self, n: int, exc: BaseException) -> None:
        self._count(n)
        self.guard.lost(COMPONENT, exc, str(self.path))

    def _count(self, n: int) -> None:
        with self._count_lock:
            self.dropped += n
        self.guard.call(COMPONENT, self._on_dropped, n, context="counting dropped lines")


def _dumps(record: Any) -> str:
    return json.dumps(record, separators=(",", ":"), default=str, ensure_ascii=False)


def exchange_summary(exchange: Exchange) -> dict[str, Any]:
    """One exchange as a log line: ids, routing, timing, usage, faults. No bodies, headers or messages."""
    t = exchange.timings
    summary: dict[str, Any] = {
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
        "mcp_method": exchange.mcp_method,
        "mcp_era": exchange.mcp_era,
        "status": exchange.status,
        "status_class": exchange.status_class,
        "error_type": exchange.error_type,
        "duration_s": t.duration_s,
        "ttfc_s": t.ttfc_s,
        "input_tokens": exchange.usage.input_tokens,
        "output_tokens": exchange.usage.output_tokens,
        "cache_read_tokens": exchange.usage.cache_read_tokens,  # of input_tokens
        "cache_write_tokens": exchange.usage.cache_write_tokens,  # of input_tokens
        "cost": _cost(exchange),
        "finish_reasons": list(exchange.finish_reasons),
        "retry_count": exchange.retry_count,
        "stream_complete": exchange.stream_complete,
        "replayed": exchange.replayed,  # answered from a recorded cassette, not by the upstream
        "request_bytes": exchange.request_bytes,
        "response_bytes": exchange.response_bytes,
        "tool_calls": [c.name for c in exchange.tool_calls],
        # The arguments' structure with type names for values (values can hold secrets), per call.
        "tool_call_shapes": [arguments_shape(c.arguments, capped=c.capped) for c in exchange.tool_calls],
        "tools_declared": [t.name for t in exchange.tools_declared],
        # Fault params can hold injected text; rule and fault type are enough to correlate.
        "faults": [{"rule": f.rule, "fault": f.fault, "at": f.at} for f in exchange.faults],
    }
    if exchange.realtime is not None:  # only on realtime exchanges: other lines stay as they were
        summary["realtime"] = _realtime(exchange.realtime)
    summary.update(agent_fields(exchange, "agent_"))  # joined to the agent's own span: agent_span_id, ...
    return summary


def _realtime(info: RealtimeInfo) -> dict[str, Any]:
    """A realtime session's facts (kind "session") or a generation's (kind "generation")."""
    if info.kind != "session":
        return {"kind": info.kind, "session_id": info.session_id, "status": info.status}
    return {
        "kind": info.kind,
        "session_id": info.session_id,
        "close_code": info.close_code,
        "closed_by": info.closed_by,
        "generations": info.generations,
        "events_client": info.events_client,
        "events_server": info.events_server,
        "errors": info.errors,
        "last_error": info.last_error,
        "resumption_offered": info.resumption_offered,
        "resumption_used": info.resumption_used,
    }


def _cost(exchange: Exchange) -> dict[str, Any] | None:
    cost = exchange.cost
    if cost is None:
        return None
    return {"total": cost.total, "input": cost.input, "output": cost.output, "currency": cost.currency}
