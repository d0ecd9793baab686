"""mcp_reconnect_discipline: after an MCP session fails, the client reconnects the way the spec and good
clients do, not in a storm.

A session fails when a request's connection does (a reset, a server that went away, a cut GET or listen
stream), when the server answers 5xx, or when it answers 404 to a request that names its session (the
session expired). From then on, the session's reconnects are judged: the requests that open a session
(`initialize`, 2026-07-28 `server/discover`) or a stream (the GET stream, `subscriptions/listen`).

- `expired_session`: a request that still names a session the server answered 404 for (the spec: start a
  new session with `initialize`, without the old id); ending that session (DELETE) is no use of it.
- `backoff`: a reconnect sooner than `min_backoff_s` after the same kind of reconnect failed (the first one
  after the failure may come at once: the spec asks for it after an expiry).
- `storm`: more than `max_per_minute` reconnects in a minute after a failure.

The chain of a failure ends once a request that is no reconnect succeeds, or `chain_reset_s` after the
last failure. A stdio server is one process, one session: its client cannot reconnect through the same
`brownout mcp-stdio`, so over stdio only `expired_session` has anything to judge (and never finds it)."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from brownout.core.exchange import CONNECTION_ERRORS
from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["McpReconnectDiscipline", "McpReconnectDisciplineConfig"]

Check = Literal["expired_session", "backoff", "storm"]
ALL_CHECKS: tuple[Check, ...] = ("expired_session", "backoff", "storm")
# What each reconnect opens: a session, or a stream the server talks back on.
_KINDS = {
    "initialize": "session",
    "server/discover": "session",
    "server_stream": "stream",
    "subscriptions/listen": "stream",
}
_TRANSPORT = {"GET": "server_stream", "DELETE": "session_end"}
_EXPIRED_KEPT = 64
_ATTEMPTS_KEPT = 256
_SLACK_S = 0.001  # a request that started before the failure ended is not its consequence
_MINUTE_S = 60.0


class McpReconnectDisciplineConfig(InvariantConfigBase):
    """Times in seconds; `checks`: which of expired_session, backoff and storm to run."""

    type: Literal["mcp_reconnect_discipline"]
    min_backoff_s: float = Field(
        0.5, ge=0, description="A reconnect sooner than this after the same kind of reconnect failed did not back off."
    )
    max_per_minute: int = Field(6, ge=1, description="Reconnects allowed within any minute after a failure.")
    chain_reset_s: float = Field(120.0, gt=0, description="A failure this long ago no longer counts.")
    checks: list[Check] = Field(default_factory=lambda: list(ALL_CHECKS))


@dataclass
class _Attempt:
    start: float
    end: float
    kind: str
    failed: bool


@dataclass
class _State:
    expired: OrderedDict[str, float] = field(default_factory=OrderedDict)  # MCP session id -> when its 404 ended
    reported_expired: set[str] = field(default_factory=set)
    failed_at: float | None = None  # the end of the failure that started the chain; None: no chain
    cause: ExchangeSummary | None = None
    attempts: deque[_Attempt] = field(default_factory=lambda: deque(maxlen=_ATTEMPTS_KEPT))
    reported: set[str] = field(default_factory=set)  # checks reported in this chain


def _what(exchange: ExchangeSummary) -> str:
    """The JSON-RPC method, or the streamable-HTTP request that has none (the GET stream, the DELETE)."""
    return exchange.mcp_method or _TRANSPORT.get(exchange.method, exchange.method)


def _failed(exchange: ExchangeSummary) -> bool:
    if exchange.status is None or exchange.error_type in CONNECTION_ERRORS:
        return True
    return exchange.status >= 500 or _expired(exchange)


def _expired(exchange: ExchangeSummary) -> bool:
    return exchange.status == 404 and exchange.mcp_session_id is not None


class McpReconnectDiscipline(Invariant[McpReconnectDisciplineConfig]):
    """Judges how an MCP client comes back after its session fails: the dead session, backoff, storms."""

    type = "mcp_reconnect_discipline"
    Config = McpReconnectDisciplineConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        if exchange.provider != "mcp":
            return []
        state: _State = session.state_for(self.name, _State)
        checks: set[str] = set(self.config.checks)
        found: list[Violation] = []
        if "expired_session" in checks:
            found += self._dead_session(state, exchange, session)
        if state.failed_at is not None and exchange.start - state.failed_at > self.config.chain_reset_s:
            self._end_chain(state)
        kind = _KINDS.get(_what(exchange))
        failed = _failed(exchange)
        in_chain = state.failed_at is not None and exchange.start >= state.failed_at - _SLACK_S
        if kind is not None and in_chain:
            found += self._attempt(state, exchange, kind, failed, checks, session)
        elif in_chain and not failed:
            self._end_chain(state)  # the client is working again
        if failed:
            if _expired(exchange) and exchange.mcp_session_id not in state.expired:
                state.expired[exchange.mcp_session_id or ""] = exchange.end
                while len(state.expired) > _EXPIRED_KEPT:
                    state.expired.popitem(last=False)
            if state.failed_at is None:
                state.failed_at, state.cause = exchange.end, exchange
        return found

    def _end_chain(self, state: _State) -> None:
        state.failed_at, state.cause = None, None
        state.attempts.clear()
        state.reported.clear()

    def _dead_session(self, state: _State, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        dead = exchange.mcp_session_id
        if dead is None or dead not in state.expired or dead in state.reported_expired:
            return []
        if _what(exchange) == "session_end" or exchange.start < state.expired[dead] - _SLACK_S:
            return []  # ending the dead session is harmless; a request sent before the 404 arrived knew nothing
        state.reported_expired.add(dead)
        message = (
            f"{_what(exchange)} sent on an MCP session the server had answered 404 for: a client must start a new "
            "session (initialize without the old Mcp-Session-Id)"
        )
        return [self.violation(message, session, exchange, cause=state.cause, details={"check": "expired_session"})]

    def _attempt(
        self,
        state: _State,
        exchange: ExchangeSummary,
        kind: str,
        failed: bool,
        checks: set[str],
        session: Session,
    ) -> list[Violation]:
        cfg = self.config
        found: list[Violation] = []
        earlier = [a for a in state.attempts if a.kind == kind and a.end <= exchange.start + _SLACK_S]
        last = max(earlier, key=lambda a: a.end, default=None)
        if "backoff" in checks and last is not None and last.failed and "backoff" not in state.reported:
            gap = exchange.start - last.end
            if gap < cfg.min_backoff_s:
                state.reported.add("backoff")
                message = (
                    f"reconnected ({_what(exchange)}) {gap:.3f} s after a failed reconnect, without backing off "
                    f"(min {cfg.min_backoff_s:g} s)"
                )
                details: dict[str, Any] = {"check": "backoff", "gap_s": round(gap, 4), "kind": kind}
                found.append(self.violation(message, session, exchange, cause=state.cause, details=details))
        state.attempts.append(_Attempt(exchange.start, exchange.end, kind, failed))
        recent = sum(1 for a in state.attempts if exchange.start - a.start <= _MINUTE_S)
        if "storm" in checks and recent > cfg.max_per_minute and "storm" not in state.reported:
            state.reported.add("storm")
            message = f"reconnect storm: {recent} reconnects within a minute after a session failure"
            details = {"check": "storm", "reconnects": recent, "max_per_minute": cfg.max_per_minute}
            found.append(self.violation(message, session, exchange, cause=state.cause, details=details))
        return found

    def dump_state(self, state: _State) -> dict[str, Any]:
        return {
            "expired": [[k, v] for k, v in state.expired.items()],
            "reported_expired": sorted(state.reported_expired),
            "failed_at": state.failed_at,
            "cause": None if state.cause is None else dump_summary(state.cause.light()),
            "attempts": [[a.start, a.end, a.kind, a.failed] for a in state.attempts],
            "reported": sorted(state.reported),
        }

    def load_state(self, data: dict[str, Any]) -> _State:
        return _State(
            expired=OrderedDict((k, v) for k, v in data["expired"]),
            reported_expired=set(data["reported_expired"]),
            failed_at=data["failed_at"],
            cause=None if data["cause"] is None else load_summary(data["cause"]),
            attempts=deque((_Attempt(*a) for a in data["attempts"]), maxlen=_ATTEMPTS_KEPT),
            reported=set(data["reported"]),
        )
