"""Invariant checks on sessions a fleet shares: read the session, judge it here, commit it if nobody else did.

Per exchange: read the session from the store (unless this process committed its latest version:
a sidecar's sessions, sticky ones), observe the exchange, run the checks, then commit the change
against the version read. If another replica committed in between, the commit is refused with the session
as it is now: the exchange is judged again on that (at most `retries` times) and only the judgement
that commits is reported. Each exchange is thus applied once and each violation reported once,
fleet-wide. The caller runs one check per session at a time in this process (the pipeline's queue).

The process keeps the sessions it served (the runner's SessionStore, with its bounds): the latest
shared version costs no decoding, and they are what it falls back on. While the store is away,
sessions are judged on this process's own state, said once in the log and in each violation
(`details.state: local`); once the store answers again, the next exchange of a session reads the
shared state again and what was judged locally is left behind.

Session end: the fleet's idle sessions are claimed from the store by whichever replica sweeps first
and closed there. A session changed here while the store was away is closed here when it idles.
"""

from __future__ import annotations

import dataclasses
import logging

from brownout.core.exchange import Exchange
from brownout.core.spans import ExchangeSpan
from brownout.core.state.sessions import Committed, SessionRecord, SessionStates, Status
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner
from brownout.invariants.session import Session
from brownout.invariants.session_codec import SessionCodec, applied, tools_change
from brownout.invariants.summary import ExchangeSummary

__all__ = ["LOCAL", "FleetChecks"]

log = logging.getLogger(__name__)

RETRIES = 8
LOCAL = "local"  # details.state of a violation judged on this process's own state
CLAIM_LIMIT = 100  # idle sessions claimed per round trip
_CLAIMS_PER_SWEEP = 10  # round trips per sweep at most


class FleetChecks:
    """The runner's checks with sessions in a shared store (async: each exchange is a round trip or two)."""

    def __init__(self, runner: InvariantRunner, states: SessionStates, *, retries: int = RETRIES) -> None:
        if retries < 1:
            raise ValueError(f"retries must be >= 1, got {retries}")
        self.runner = runner
        self.states = states
        self.retries = retries
        self.local = False  # judging on this process's own state since the store went away
        self.conflicts = 0  # commits refused because another replica committed first
        self.exhausted = 0  # exchanges still in conflict after every retry (judged locally)
        self._codec: SessionCodec | None = None

    @property
    def codec(self) -> SessionCodec:
        invariants = self.runner.invariants
        if self._codec is None or self._codec.invariants is not invariants:  # rebuilt after a reload
            self._codec = SessionCodec(invariants, self.runner.guard)
        return self._codec

    async def check(self, span: ExchangeSpan, exchange: Exchange) -> list[Violation]:
        """Span- and session-level checks of a finished exchange, on the fleet's session; emitted and returned."""
        runner = self.runner
        if not runner.invariants:
            return runner.check_without_span(exchange)
        now = runner.now()
        summary = runner.guard.call(
            "invariants", ExchangeSummary.from_exchange, span, exchange, context="exchange summary"
        )
        if summary is None:
            return []
        mirror = runner.sessions.get(summary.session_id)
        # A copy this process committed last (a sidecar's, or a sticky session's) is judged at once: if another
        # replica committed since, the commit is refused with the session as it is now. Else it is read first.
        current = mirror is not None and mirror.shared is not None and mirror.shared.version > 0
        loaded = None if current else await self.states.load(summary.session_id)
        for _ in range(self.retries):
            if loaded is Status.UNAVAILABLE:
                return self._alone(span, summary, now, mirror)
            session = mirror if loaded is None and mirror is not None else self._session(loaded, now)
            tools_changed = tools_change(session, summary)
            scratch = _scratch(span)
            found = self._judge(scratch, summary, session, now)
            assert session.shared is not None
            change = self.codec.change(session, tools_changed)
            done = await self.states.commit(session.shared, change, now)
            if not isinstance(done, Committed):  # the store went away since the load
                _keep_events(span, scratch)
                return self._kept_locally(session, now, found)
            if done.version is not None:
                _keep_events(span, scratch)
                applied(session.shared, change, done.version)
                self._rejoined()
                self._let_go(runner.sessions.put(session, now))
                runner.retire([self._session(record, now) for record in done.evicted])
                runner.emit(found)
                return found
            self.conflicts += 1
            loaded, mirror = done.current or SessionRecord(summary.session_id), None
        self.exhausted += 1
        log.warning(
            "session invariants: session still changing on other replicas after %d tries; this exchange was "
            "judged on this process's own state",
            self.retries,
        )
        _keep_events(span, scratch)
        return self._kept_locally(session, now, found)

    def _session(self, loaded: SessionRecord | Status | None, now: float) -> Session:
        assert isinstance(loaded, SessionRecord)
        session = self.runner.guard.call("invariants", self.codec.session, loaded, now, context="session record")
        if session is None:  # unreadable (another brownout version?): judged afresh, and overwritten
            session = Session(id=loaded.id, created=now, last_seen=now)
            session.shared = SessionRecord(loaded.id, loaded.version, dict(loaded.fields))
        return session

    def _judge(self, span: ExchangeSpan, summary: ExchangeSummary, session: Session, now: float) -> list[Violation]:
        session.now = now
        session.last_seen = max(session.last_seen, now)
        session.observe(summary)
        return self.runner.judge(span, summary, session)

    def _alone(
        self, span: ExchangeSpan, summary: ExchangeSummary, now: float, mirror: Session | None
    ) -> list[Violation]:
        """The store is away: judge on what this process holds of the session."""
        runner = self.runner
        if mirror is None:
            mirror, evicted = runner.sessions.touch(summary.session_id, now)
            self._let_go(evicted)
        found = self._judge(span, summary, mirror, now)
        return self._kept_locally(mirror, now, found)

    def _kept_locally(self, session: Session, now: float, found: list[Violation]) -> list[Violation]:
        if session.shared is None:
            session.shared = SessionRecord(session.id, -1)
        session.shared.version = -1  # ahead of the store: the next load reads it afresh
        self._let_go(self.runner.sessions.put(session, now))
        if not self.local:
            self.local = True
            log.warning(
                "session invariants: the state store is away; sessions are judged on this process's own state "
                "(violations say details.state=local) until it is back"
            )
        found = [_local(v) for v in found]
        self.runner.emit(found)
        return found

    def _rejoined(self) -> None:
        if self.local:
            self.local = False
            log.warning("session invariants: the state store is back; sessions are judged on the shared state again")

    def _let_go(self, evicted: list[Session]) -> None:
        """Sessions this process evicted over max_sessions: those changed here alone are closed here."""
        self.runner.retire(self._dirty(evicted), mark=_local)

    @staticmethod
    def _dirty(sessions: list[Session]) -> list[Session]:
        """Of sessions this process lets go: those changed here while the store was away (the fleet has not seen
        them); the others are the fleet's, closed by whichever replica claims them."""
        return [s for s in sessions if s.shared is None or s.shared.version < 0]

    async def sweep(self, now: float | None = None) -> list[Violation]:
        """Close the fleet's idle sessions this process claims, and its own idle ones changed while the store was
        away: their session-end checks run here; the violations are emitted and returned."""
        runner = self.runner
        now = runner.now() if now is None else now
        found = runner.take_orphans()
        for session in self._dirty(runner.sessions.expire(now)):
            found += self._close(session, now, local=True)
        for _ in range(_CLAIMS_PER_SWEEP):
            claimed = await self.states.claim_idle(now, CLAIM_LIMIT)
            if not isinstance(claimed, list):
                break
            for record in claimed:
                runner.sessions.discard(record.id)
                found += self._close(self._session(record, now), now, local=False)
            if len(claimed) < CLAIM_LIMIT:
                break
        return found

    def close_all(self) -> list[Violation]:
        """Shutdown: the fleet goes on with the shared sessions; only those changed here alone are closed here."""
        runner = self.runner
        found = runner.take_orphans()
        now = runner.now()
        for session in self._dirty(runner.sessions.clear()):
            found += self._close(session, now, local=True)
        return found

    def _close(self, session: Session, now: float, *, local: bool) -> list[Violation]:
        session.now = now
        closed = self.runner.close(session)
        if local:
            closed = [_local(v) for v in closed]
        self.runner.emit(closed)
        return closed


def _scratch(span: ExchangeSpan) -> ExchangeSpan:
    """A copy of the span for one judgement: the events checks add go on it, not on the span they may be
    judged again for (only the judgement that counts leaves them)."""
    return dataclasses.replace(span, span=None, opened=None, events=list(span.events))


def _keep_events(span: ExchangeSpan, scratch: ExchangeSpan) -> None:
    for event in scratch.events[len(span.events) :]:
        span.add_event(event.name, event.attributes)


def _local(violation: Violation) -> Violation:
    return dataclasses.replace(violation, details={**violation.details, "state": LOCAL})
