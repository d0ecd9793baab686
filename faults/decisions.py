"""The decision log: one record per (exchange, matching rule), kept, fanned out and written.

Sinks are plain callables taking a `Decision`; the exporters register theirs (a JSONL file,
Prometheus counters). A sink that raises is counted in `sink_errors` and logged once per
sink; the caller (the request path) never sees the exception.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from brownout.faults.schedule import OUTCOMES

__all__ = ["Decision", "DecisionLog", "DecisionSink"]

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Decision:
    """Whether one rule fired for one exchange, and why."""

    exchange_id: str
    session: str
    rule: str
    outcome: str  # one of faults.schedule.OUTCOMES
    reason: str
    counter: int  # match number in the rule's scope (0 when not counted, e.g. paused)
    at: float  # clock() when decided
    fault: str = ""  # fault type of the rule
    index: int = 0  # match number within the session: with seed and rule, keys the draw

    @property
    def fired(self) -> bool:
        return self.outcome == "fired"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)


DecisionSink = Callable[[Decision], None]


class DecisionLog:
    """Keeps the last `ring_size` decisions, calls sinks, and optionally appends JSONL to `path`."""

    def __init__(self, *, ring_size: int | None = 1000, path: str | Path | None = None) -> None:
        if ring_size is not None and ring_size < 0:
            raise ValueError(f"ring_size must be >= 0, got {ring_size}")
        self._ring: deque[Decision] | None = deque(maxlen=ring_size) if ring_size else None
        self._sinks: list[DecisionSink] = []
        self._file: IO[str] | None = None
        self._lock = threading.Lock()  # the file may be written from relay threads too
        self.counts: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))
        self.sink_errors: Counter[str] = Counter()
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def add_sink(self, sink: DecisionSink) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: DecisionSink) -> None:
        self._sinks.remove(sink)

    def record(self, decision: Decision) -> None:
        """Keep, write and fan out one decision; never raises."""
        self.counts[decision.outcome] += 1
        if self._ring is not None:
            self._ring.append(decision)
        if self._file is not None:
            try:
                with self._lock:
                    self._file.write(decision.to_json() + "\n")
                    self._file.flush()  # per line: a crash loses at most the line being written
            except (OSError, ValueError) as e:
                self._sink_failed("file", e)
        for sink in self._sinks:
            try:
                sink(decision)
            except Exception as e:  # a broken sink must not touch traffic
                self._sink_failed(getattr(sink, "__qualname__", repr(sink)), e)

    def _sink_failed(self, name: str, exc: BaseException) -> None:
        first = not self.sink_errors[name]
        self.sink_errors[name] += 1
        if first:
            log.error("decision sink %s failed (counted; further failures logged at debug)", name, exc_info=exc)
        else:
            log.debug("decision sink %s failed again: %s", name, exc)

    def recent(self) -> list[Decision]:
        """The kept decisions, oldest first."""
        return list(self._ring) if self._ring is not None else []

    def __iter__(self) -> Iterator[Decision]:
        return iter(self.recent())

    def __len__(self) -> int:
        return len(self._ring) if self._ring is not None else 0

    def clear(self) -> None:
        if self._ring is not None:
            self._ring.clear()

    def close(self) -> None:
        """Close the JSONL file (idempotent)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
