"""Writes recorded exchanges to cassette files off the event loop: a bounded queue and one thread."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO

from brownout.proxy.record.cassette import Recorded, file_name, header
from brownout.proxy.record.files import open_to_write
from brownout.proxy.record.redact import scrub

__all__ = ["CassetteWriter"]

log = logging.getLogger(__name__)

_OPEN_FILES = 64  # sessions whose files stay open; older ones are closed and reopened for appending


def _version() -> str:
    try:
        return metadata.version("brownout")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class CassetteWriter:
    """One writer thread per record directory; `put` never blocks the caller.

    A session's file is started afresh the first time this writer sees the session, unless `append`
    (replay misses recorded next to the cassettes they missed): then new exchanges go after the old.
    """

    def __init__(
        self,
        directory: Path,
        *,
        append: bool = False,
        max_pending_bytes: int = 64 << 20,
        on_count: Callable[[int, int], None] = lambda written, dropped: None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.append = append
        self.max_pending = max_pending_bytes
        self.on_count = on_count
        self.written = 0
        self.dropped = 0
        self._pending = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Recorded, int] | None] = queue.SimpleQueue()
        self._files: OrderedDict[str, IO[str]] = OrderedDict()
        self._started: set[str] = set()
        self._seq: dict[str, int] = {}
        self._version = _version()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="brownout-cassette-writer", daemon=True)
        self._thread.start()

    def put(self, rec: Recorded) -> bool:
        """Queue one exchange; False (counted as dropped) when the queue holds too many bytes or is closed."""
        size = rec.held_bytes + 1024
        with self._lock:
            if self._closed or self._pending + size > self.max_pending:
                self.dropped += 1
                dropped = self.dropped
            else:
                self._pending += size
                dropped = 0
        if dropped:
            if dropped == 1 or dropped % 100 == 0:
                log.warning("cassette: writer is behind, %d exchange(s) not recorded so far", dropped)
            self.on_count(0, 1)
            return False
        self._queue.put((rec, size))
        return True

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) until everything queued so far is written; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._pending == 0:
                    return True
            time.sleep(0.005)
        return False

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (bounded wait), then close the files; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("cassette: writer did not finish within %.1f s; the last exchanges may be missing", timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            rec, size = item
            try:
                self._write(rec)
                self.written += 1
                self.on_count(1, 0)
            except (OSError, TypeError, ValueError) as e:
                self.dropped += 1
                log.error("cassette: cannot record an exchange of session %r: %s", rec.session, e)
                self.on_count(0, 1)
            finally:
                with self._lock:
                    self._pending -= size
        for f in self._files.values():
            f.close()
        self._files.clear()

    def _write(self, rec: Recorded) -> None:
        f = self._file(rec.session)
        seq = self._seq[rec.session] = self._seq.get(rec.session, 0) + 1
        rec.seq = seq
        scrub(rec)  # here, on the writer's thread: off the loop
        f.write(json.dumps(rec.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
        f.flush()  # a crash loses at most the exchange in hand

    def _file(self, session: str) -> IO[str]:
        f = self._files.get(session)
        if f is not None:
            self._files.move_to_end(session)
            return f
        path = self.directory / file_name(session)
        fresh = session not in self._started and not self.append
        f = open_to_write(path, append=not fresh)  # never through a link: it could lead anywhere
        if not fresh and session not in self._seq:
            self._seq[session] = _last_seq(path)
        if fresh or f.tell() == 0:
            created = datetime.now(UTC).isoformat(timespec="seconds")
            f.write(json.dumps(header(session, created, self._version), separators=(",", ":")) + "\n")
        self._started.add(session)
        self._files[session] = f
        while len(self._files) > _OPEN_FILES:
            _, old = self._files.popitem(last=False)
            old.close()
        return f


def _last_seq(path: Path) -> int:
    """The highest `seq` already in a file we append to, so numbering goes on."""
    last = 0
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.startswith('{"seq":'):
                    try:
                        last = max(last, int(json.loads(line).get("seq", 0)))
                    except ValueError:
                        continue
    except OSError:
        return 0
    return last
