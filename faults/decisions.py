"""The decision log: one record per (exchange, matching rule), kept and fanned out.

Sinks are plain callables taking a `Decision`; the exporters register theirs (the JSONL
decision log, Prometheus counters). A sink that raises is contained by the guard (component
"decisions"); the caller (the request path) never sees the exception.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from brownout.core.guard import Guard
from brownout.faults.schedule import OUTCOMES

__all__ = ["Decision", "DecisionLog", "DecisionSink"]


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


DecisionSink = Callable[[Decision], None]


class DecisionLog:
    """Keeps the last `ring_size` decisions and calls the sinks with each."""

    def __init__(self, *, ring_size: int | None = 1000, guard: Guard | None = None) -> None:
        if ring_size is not None and ring_size < 0:
            raise ValueError(f"ring_size must be >= 0, got {ring_size}")
        self._ring: deque[Decision] | None = deque(maxlen=ring_size) if ring_size else None
        self._sinks: list[DecisionSink] = []
        self.guard = guard if guard is not None else Guard()
        self.counts: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))

    def add_sink(self, sink: DecisionSink) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: DecisionSink) -> None:
        self._sinks.remove(sink)

    def record(self, decision: Decision) -> None:
        """Keep and fan out one decision; a failing sink is contained by the guard."""
        self.counts[decision.outcome] += 1
        if self._ring is not None:
            self._ring.append(decision)
        for sink in self._sinks:
            self.guard.call("decisions", sink, decision, context=getattr(sink, "__qualname__", repr(sink)))

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
