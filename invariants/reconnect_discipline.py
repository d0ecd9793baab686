"""reconnect_discipline: after a realtime session is closed on it or dropped, the agent reconnects with backoff,
not too often, and resumes where the provider offered resumption.

A connect attempt is a realtime session's exchange (operation `realtime_session`), accepted or refused. It is a
reconnect when the session's previous attempt was accepted and then ended by the other side: closed by the
server (or by brownout's fault standing in for it) or dropped. An agent that closes its own session and opens
another starts a new conversation, not a reconnect. A refused upgrade is an HTTP answer: the attempts after it
are retry_discipline's to judge. Sessions are reported when they end, so a reconnect is judged when it ends.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.core.wire.realtime import SESSION_OPERATION
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["ReconnectDiscipline", "ReconnectDisciplineConfig"]

_ATTEMPTS_MAX = 64  # connect attempts remembered per session
_WINDOW_S = 60.0
_OVERLAP_SLACK_S = 0.001


class ReconnectDisciplineConfig(InvariantConfigBase):
    """Per brownout session (the agent); times in milliseconds."""

    type: Literal["reconnect_discipline"]
    min_backoff_ms: float = Field(
        250.0, ge=0, description="A reconnect sooner than this after the session ended did not back off."
    )
    max_per_min: int = Field(5, ge=1, description="Reconnects allowed within any 60 seconds.")
    resumption: bool = Field(True, description="Where the ended session offered resumption, the reconnect uses it.")


@dataclass(slots=True)
class _Attempt:
    summary: ExchangeSummary  # light
    ended_badly: bool  # accepted, then closed by the other side or dropped
    offered: bool  # the server offered to resume it
    used: bool  # it resumed an earlier session
    code: Any
    reconnect: bool = False


@dataclass
class _State:
    attempts: deque[_Attempt] = field(default_factory=lambda: deque(maxlen=_ATTEMPTS_MAX))
    reported_storm_until: float = 0.0


class ReconnectDiscipline(Invariant[ReconnectDisciplineConfig]):
    """Flags a reconnect without backoff, more than max_per_min reconnects a minute, and a fresh start where
    resumption was offered."""

    type = "reconnect_discipline"
    Config = ReconnectDisciplineConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        attrs = span.attributes
        if attrs.get("brownout.operation") != SESSION_OPERATION:
            return []
        closed_by = attrs.get("brownout.realtime.closed_by")
        attempt = _Attempt(
            exchange.light(),
            ended_badly=exchange.status == 101 and closed_by in ("server", "brownout"),
            offered=bool(attrs.get("brownout.realtime.resumption.offered")),
            used=bool(attrs.get("brownout.realtime.resumption.used")),
            code=attrs.get("brownout.realtime.close_code"),
        )
        state: _State = session.state_for(self.name, _State)
        before = [a for a in state.attempts if a.summary.end <= exchange.start + _OVERLAP_SLACK_S]
        prev = max(before, key=lambda a: a.summary.end) if before else None
        found: list[Violation] = []
        if prev is not None and prev.ended_badly:
            attempt.reconnect = True
            found += self._judge(prev, attempt, exchange, state, session)
        state.attempts.append(attempt)
        return found

    def dump_state(self, state: _State) -> dict[str, Any]:
        attempts = [
            [dump_summary(a.summary), a.ended_badly, a.offered, a.used, a.code, a.reconnect] for a in state.attempts
        ]
        return {"attempts": attempts, "storm_until": state.reported_storm_until}

    def load_state(self, data: dict[str, Any]) -> _State:
        state = _State(reported_storm_until=float(data["storm_until"]))
        for summary, ended_badly, offered, used, code, reconnect in data["attempts"]:
            state.attempts.append(_Attempt(load_summary(summary), ended_badly, offered, used, code, reconnect))
        return state

    def _judge(
        self, prev: _Attempt, attempt: _Attempt, exchange: ExchangeSummary, state: _State, session: Session
    ) -> list[Violation]:
        cfg = self.config
        found: list[Violation] = []
        gap_ms = max(0.0, exchange.start - prev.summary.end) * 1000
        how = f"closed with {prev.code}" if prev.code not in (None, 1006) else "dropped"
        details = {
            "gap_ms": round(gap_ms, 1),
            "previous_exchange_id": prev.summary.exchange_id,
            "close_code": prev.code,
        }
        if gap_ms < cfg.min_backoff_ms:
            found.append(
                self.violation(
                    f"reconnected {gap_ms:.0f} ms after the session {how}; backoff at least {cfg.min_backoff_ms:g} ms",
                    session,
                    exchange,
                    cause=prev.summary,
                    details={**details, "min_backoff_ms": cfg.min_backoff_ms},
                )
            )
        recent = [a for a in state.attempts if a.reconnect and exchange.start - a.summary.start < _WINDOW_S]
        if len(recent) + 1 > cfg.max_per_min and exchange.start >= state.reported_storm_until:
            state.reported_storm_until = exchange.start + _WINDOW_S  # once per minute of storm
            found.append(
                self.violation(
                    f"{len(recent) + 1} reconnects within a minute, at most {cfg.max_per_min}",
                    session,
                    exchange,
                    cause=prev.summary,
                    details={"reconnects": len(recent) + 1, "max_per_min": cfg.max_per_min},
                )
            )
        if cfg.resumption and prev.offered and not attempt.used:
            found.append(
                self.violation(
                    "the session that ended offered resumption, and the reconnect started a new one instead",
                    session,
                    exchange,
                    cause=prev.summary,
                    details=details,
                )
            )
        return found
