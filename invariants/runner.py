"""The checker the addon calls when an exchange finishes, and on a timer to close idle sessions."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.joined_trace import JoinedTrace
from brownout.core.spans import ExchangeSpan, SpanBuilder
from brownout.invariants import REGISTRY, create
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session, SessionStore
from brownout.invariants.summary import ExchangeSummary

__all__ = ["InvariantRunner"]

logger = logging.getLogger(__name__)


class InvariantRunner:
    """Runs configured invariants on exchange spans and on sessions; its guard contains their errors."""

    def __init__(
        self,
        configs: Iterable[InvariantConfigBase],
        *,
        guard: Guard | None = None,
        types: Mapping[str, type[Invariant]] = REGISTRY,
        clock: Callable[[], float] = time.time,
        idle_s: float = 300.0,
        max_sessions: int = 10_000,
        on_violation: Callable[[Violation], None] | None = None,
    ) -> None:
        self.guard = guard if guard is not None else Guard()
        self._types = types
        self._clock = clock
        self._on_violation = on_violation
        self.sessions = SessionStore(idle_s=idle_s, max_sessions=max_sessions)
        # Session-end violations of sessions evicted during check(): emitted at once, and also
        # handed out by the next sweep(); bounded in case sweep() is never called.
        self._orphans: deque[Violation] = deque(maxlen=10_000)
        self.invariants = self._build(configs)

    @property
    def invariants(self) -> tuple[Invariant, ...]:
        return self._invariants

    @invariants.setter
    def invariants(self, value: Iterable[Invariant]) -> None:
        """Also decides, once, which invariants have span and session checks (the base ones do nothing)."""
        self._invariants = tuple(value)
        self._span_checks = [_Check(inv, "check_span") for inv in self._invariants if _overrides(inv, "check_span")]
        self._session_checks = [
            _Check(inv, "check_session") for inv in self._invariants if _overrides(inv, "check_session")
        ]
        self._trace_checks = [_Check(inv, "check_trace") for inv in self._invariants if _overrides(inv, "check_trace")]

    @property
    def wants_traces(self) -> bool:
        """Some invariant judges both sides of a trace (the agent's spans joined to the wire)."""
        return bool(self._trace_checks)

    def _build(self, configs: Iterable[InvariantConfigBase]) -> tuple[Invariant, ...]:
        """Instantiate enabled invariants; ValueError on duplicate names or an unloadable one."""
        invariants: list[Invariant] = []
        names: set[str] = set()
        for config in configs:
            if config.key in names:
                raise ValueError(f"duplicate invariant name {config.key!r}")
            names.add(config.key)
            if config.enabled:
                invariants.append(create(config, self._types))
        return tuple(invariants)

    @property
    def sessions_active(self) -> int:
        return len(self.sessions)

    def reload(
        self, configs: Iterable[InvariantConfigBase], types: Mapping[str, type[Invariant]] | None = None
    ) -> None:
        """Swap the invariant set (and the types it may use); on error the old set stays.

        Session state is keyed by invariant name: kept for unchanged invariants, dropped for
        changed or removed ones (their state may not fit the new config).
        """
        old = {inv.name: inv.config for inv in self.invariants}
        previous_types, self._types = self._types, types if types is not None else self._types
        try:
            self.invariants = self._build(configs)
        except Exception:
            self._types = previous_types
            raise
        keep = {inv.name for inv in self.invariants if old.get(inv.name) == inv.config}
        for session in self.sessions:
            for name in [n for n in session.state if n not in keep]:
                del session.state[name]

    def check_exchange(self, spans: SpanBuilder, exchange: Exchange) -> list[Violation]:
        """The exchange's span, checked and ended with its violations (so exported), each step contained:
        what the analysis process does with every exchange, and the proxy with those it hands back."""
        context = f"exchange {exchange.id}"
        span = self.guard.call("spans", spans.start, exchange, context=context)
        if span is None:
            return []
        violations: list[Violation] = self.guard.call("invariants", self.check, span, exchange) or []
        self.guard.call("spans", spans.finish, span, violations, context=context)
        return violations

    def check(self, span: ExchangeSpan, exchange: Exchange) -> list[Violation]:
        """Span-level then session-level checks for a finished exchange; returns its violations."""
        now = self._clock()
        if not self.invariants:
            return self.check_without_span(exchange)
        observed = self.guard.call("invariants", self._observe, span, exchange, now, context="exchange summary")
        if observed is None:
            return []
        summary, session, evicted = observed
        self.retire(evicted)
        found = self.judge(span, summary, session)
        self.emit(found)
        return found

    def judge(self, span: ExchangeSpan, summary: ExchangeSummary, session: Session) -> list[Violation]:
        """Span-level then session-level checks of an exchange the session has observed (not emitted)."""
        found: list[Violation] = []
        for check in self._span_checks:
            found += self._run(check, span, summary, session)
        for check in self._session_checks:
            found += self._run(check, session, final=False)
        return found

    def now(self) -> float:
        return self._clock()

    def retire(self, sessions: Iterable[Session], *, mark: Callable[[Violation], Violation] | None = None) -> None:
        """Session-end checks of sessions evicted over max_sessions: emitted at once, handed out by the next sweep."""
        for old in sessions:
            closed = self.close(old)
            if mark is not None:
                closed = [mark(v) for v in closed]
            self.emit(closed)
            self._orphans.extend(closed)

    def take_orphans(self) -> list[Violation]:
        found = list(self._orphans)
        self._orphans.clear()
        return found

    def _observe(
        self, span: ExchangeSpan, exchange: Exchange, now: float
    ) -> tuple[ExchangeSummary, Session, list[Session]]:
        summary = ExchangeSummary.from_exchange(span, exchange)
        session, evicted = self.sessions.touch(summary.session_id, now)
        session.observe(summary)
        return summary, session, evicted

    def check_trace(self, trace: JoinedTrace) -> list[Violation]:
        """The checks on both sides of a settled trace, against the session of its wire calls (else one named
        after the trace); emitted and returned."""
        if not self._trace_checks:
            return []
        now = self._clock()
        session_id = trace.wire_calls[0].session if trace.wire_calls else trace.trace_id
        session = self.sessions.get(session_id) or Session(id=session_id, created=now, last_seen=now)
        session.now = now
        found: list[Violation] = []
        for check in self._trace_checks:
            found += self._run(check, trace, session)
        self.emit(found)
        return found

    def check_without_span(self, exchange: Exchange) -> list[Violation]:
        """With no invariants configured: only keep the session alive (sessions_active)."""
        touched = self.guard.call("invariants", self.sessions.touch, exchange.session, self._clock())
        if touched is not None:
            self.retire(touched[1])
        return []

    def sweep(self, now: float | None = None) -> list[Violation]:
        """Close sessions idle past idle_s: run their session-end checks, then drop their state."""
        now = self._clock() if now is None else now
        found = self.take_orphans()
        for session in self.sessions.expire(now):
            closed = self.close(session)
            self.emit(closed)
            found += closed
        return found

    def close_all(self) -> list[Violation]:
        """Session-end checks for every session (shutdown)."""
        found = self.take_orphans()
        for session in self.sessions.clear():
            session.now = self._clock()
            closed = self.close(session)
            self.emit(closed)
            found += closed
        return found

    def close(self, session: Session) -> list[Violation]:
        """The session-end checks of `session`, once (not emitted)."""
        if session.closed:
            return []
        session.closed = True
        found: list[Violation] = []
        for check in self._session_checks:
            found += self._run(check, session, final=True)
        return found

    def _run(self, check: _Check, *args: object, **kwargs: object) -> list[Violation]:
        # Guard.call inlined: a dozen checks run per exchange, and three frames each were a measurable share.
        try:
            result = getattr(check.invariant, check.name)(*args, **kwargs)  # per call: an instance may replace it
            if type(result) is list and not result:  # the common case, checked cheaply: no violations
                return result
            return _checked(result, check.name)
        except Exception as e:  # noqa: BLE001 - as in Guard.call: an invariant's failure never reaches traffic
            self.guard.failed(check.component, e, check.context)
            return []

    def emit(self, violations: list[Violation]) -> None:
        if self._on_violation is None:
            return
        for violation in violations:
            self.guard.call("on_violation", self._on_violation, violation)


class _Check:
    """One invariant's span or session check, with the names its failures are counted and logged under."""

    __slots__ = ("component", "context", "invariant", "name")

    def __init__(self, invariant: Invariant, name: str) -> None:
        self.invariant, self.name = invariant, name
        self.component = f"invariant:{invariant.name}"
        self.context = f"invariant {invariant.name!r} {name}"


def _overrides(invariant: Invariant, method: str) -> bool:
    return getattr(type(invariant), method) is not getattr(Invariant, method)


def _checked(result: object, name: str) -> list[Violation]:
    if not isinstance(result, Sequence) or not all(isinstance(v, Violation) for v in result):
        raise TypeError(f"{name} must return a list of Violation")
    return list(result)
