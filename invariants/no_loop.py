"""no_loop: the same tool call (name + canonical arguments) repeated, or A-B-A-B alternation."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic import Field, model_validator

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary, ToolCallView, canonical_arguments

__all__ = ["NoLoop", "NoLoopConfig"]

_REPORTED_MAX = 256


class NoLoopConfig(InvariantConfigBase):
    """`max_repeats` identical calls allowed within the last `window` calls; alternation of two calls."""

    type: Literal["no_loop"]
    severity: Severity = "warning"
    max_repeats: int = Field(3, ge=1, description="More identical calls than this within the window is a loop.")
    window: int = Field(20, ge=2, description="How many recent tool calls to look at.")
    alternation_cycles: int = Field(2, ge=0, description="A-B repeated this many times in a row; 0 disables.")

    @model_validator(mode="after")
    def _fits(self) -> NoLoopConfig:
        if self.alternation_cycles * 2 > self.window:
            raise ValueError("alternation_cycles * 2 must fit in window")
        return self


@dataclass
class _Track:
    # Model-requested calls and executed calls are separate sequences: an agent that executes
    # what the model asked for would otherwise count every call twice.
    sequences: dict[str, deque[tuple[str, str]]] = field(default_factory=dict)
    reported: set[object] = field(default_factory=set)


class NoLoop(Invariant[NoLoopConfig]):
    """Flags a tool call repeated with identical arguments, and two calls alternating."""

    type = "no_loop"
    Config = NoLoopConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        track: _Track = session.state_for(self.name, _Track)
        found: list[Violation] = []
        for source, calls in (("model", exchange.requested_calls), ("executed", _executed(exchange))):
            if not calls:
                continue
            seq = track.sequences.setdefault(source, deque(maxlen=self.config.window))
            for call in calls:
                key = (call.name, canonical_arguments(call.arguments))
                seq.append(key)
                found += self._repeats(track, source, seq, key, session, exchange)
                found += self._alternation(track, source, seq, session, exchange)
        return found

    def _repeats(
        self,
        track: _Track,
        source: str,
        seq: deque[tuple[str, str]],
        key: tuple[str, str],
        session: Session,
        exchange: ExchangeSummary,
    ) -> list[Violation]:
        count = seq.count(key)
        marker = ("repeat", source, key)
        if count <= self.config.max_repeats or marker in track.reported:
            return []
        self._mark(track, marker)
        return [
            self.violation(
                f"{source} tool call {key[0]!r} repeated {count} times with identical arguments "
                f"in the last {len(seq)} calls (max {self.config.max_repeats})",
                session,
                exchange,
                details={"tool": key[0], "count": count, "source": source},
            )
        ]

    def _alternation(
        self, track: _Track, source: str, seq: deque[tuple[str, str]], session: Session, exchange: ExchangeSummary
    ) -> list[Violation]:
        n = self.config.alternation_cycles * 2
        if n == 0 or len(seq) < n:
            return []
        tail = list(seq)[-n:]
        a, b = tail[0], tail[1]
        if a == b or any(tail[i] != (a if i % 2 == 0 else b) for i in range(n)):
            return []
        marker = ("alternation", source, frozenset((a, b)))
        if marker in track.reported:
            return []
        self._mark(track, marker)
        return [
            self.violation(
                f"{source} tool calls {a[0]!r} and {b[0]!r} alternate with identical arguments "
                f"{self.config.alternation_cycles} times in a row",
                session,
                exchange,
                details={"tools": [a[0], b[0]], "source": source},
            )
        ]

    @staticmethod
    def _mark(track: _Track, marker: object) -> None:
        if len(track.reported) < _REPORTED_MAX:
            track.reported.add(marker)

    def dump_state(self, state: _Track) -> dict[str, Any]:
        # Markers: ("repeat", source, call) and ("alternation", source, frozenset of two calls).
        reported = []
        for marker in state.reported:
            kind, source, what = cast(tuple[str, str, Any], marker)
            reported.append([kind, source, sorted(map(list, what)) if kind == "alternation" else list(what)])
        return {
            "sequences": {source: [list(call) for call in seq] for source, seq in state.sequences.items()},
            "reported": sorted(reported),
        }

    def load_state(self, data: dict[str, Any]) -> _Track:
        window = self.config.window
        track = _Track({s: deque(((n, a) for n, a in seq), maxlen=window) for s, seq in data["sequences"].items()})
        for kind, source, what in data["reported"]:
            calls = [(n, a) for n, a in what] if kind == "alternation" else None
            track.reported.add((kind, source, frozenset(calls) if calls is not None else (what[0], what[1])))
        return track


def _executed(exchange: ExchangeSummary) -> tuple[ToolCallView, ...]:
    return (exchange.executed_call,) if exchange.executed_call is not None else ()
