"""Schedule state and decisions for one rule.

Reproducibility: no shared RNG. Each probability draw, and the seed of the `random.Random`
handed to the fault, is a hash of (seed, rule, session, per-session match index). A
session's decisions therefore depend only on its own request order, however sessions
interleave, even for a rule with `scope: global` whose probability is the only condition.
Counters (`after`, `first`, `every`, `max_injections`, `max_concurrent`, quota) live in
the rule's scope: one set for the rule (`global`) or one per session (`session`); global
counters see sessions in arrival order, so they are as reproducible as that order.

Every match counts (windows closed or not), so `after: 5` means "after the 5th match".
Order of checks: window, quota, after/first/every, max_injections, max_concurrent,
probability (scaled by the ramp).

Memory: per-session counters are kept in LRU order and dropped when idle longer than
`session_ttl_s` or beyond `max_sessions`; a session seen again after that starts over.
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from brownout.faults.config import ScheduleConfig
from brownout.faults.quota import QuotaWindow

__all__ = [
    "FIRED",
    "OUTCOMES",
    "SKIPPED_BLAST_RADIUS",
    "SKIPPED_NOT_APPLICABLE",
    "SKIPPED_PAUSED",
    "SKIPPED_PROBABILITY",
    "SKIPPED_SCHEDULE",
    "Schedule",
    "ScopeCounters",
    "Ticket",
    "draw",
    "rng_for",
]

FIRED = "fired"
SKIPPED_PROBABILITY = "skipped_probability"
SKIPPED_SCHEDULE = "skipped_schedule"
SKIPPED_BLAST_RADIUS = "skipped_blast_radius"
SKIPPED_PAUSED = "skipped_paused"
# Recorded after `fired` when the fault then could not act on the exchange (see faults.base.NotApplicable).
SKIPPED_NOT_APPLICABLE = "skipped_not_applicable"
OUTCOMES = (FIRED, SKIPPED_PROBABILITY, SKIPPED_SCHEDULE, SKIPPED_BLAST_RADIUS, SKIPPED_PAUSED, SKIPPED_NOT_APPLICABLE)

_U64 = float(1 << 64)


def _digest(seed: int, rule: str, session: str, index: int, salt: bytes) -> int:
    h = hashlib.blake2b(digest_size=8, person=b"brownout" + salt)
    h.update(f"{seed}\x1f{rule}\x1f{session}\x1f{index}".encode())
    return struct.unpack(">Q", h.digest())[0]


def draw(seed: int, rule: str, session: str, index: int) -> float:
    """The reproducible uniform [0, 1) draw for one decision."""
    return _digest(seed, rule, session, index, b"draw") / _U64


def rng_for(seed: int, rule: str, session: str, index: int) -> random.Random:
    """The reproducible RNG a fired fault gets (jitter, corruption positions)."""
    return random.Random(_digest(seed, rule, session, index, b"rng"))


@dataclass(slots=True)
class ScopeCounters:
    """Counters of one scope (the rule, or one session of it)."""

    matches: int = 0
    injections: int = 0
    in_flight: int = 0
    last_seen: float = 0.0
    quota: QuotaWindow | None = None
    # What the rule's fault keeps between exchanges of one session (FaultContext.session_state).
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Ticket:
    """One decision: outcome, why, and what to release when the exchange finishes."""

    outcome: str
    reason: str
    counter: int  # the match number in the rule's scope (1-based)
    index: int  # the match number in the session: keys the draw and the fault's RNG
    scopes: tuple[ScopeCounters, ...] = ()  # counters holding an in-flight slot (fired)
    quota: QuotaWindow | None = None  # admitted by this quota: tokens counted at finish
    retry_after_s: int | None = None  # quota exceeded: seconds until the window resets
    session_state: dict[str, Any] | None = None  # fired: the session's FaultContext.session_state


class Schedule:
    """A rule's compiled schedule and its counters."""

    def __init__(
        self,
        config: ScheduleConfig,
        *,
        rule: str,
        seed: int,
        origin: float,
        session_ttl_s: float = 3600.0,
        max_sessions: int = 10_000,
    ) -> None:
        self.config = config
        self.rule = rule
        self.seed = seed
        # The window base: starts_at, or proxy start + start_s.
        at = config.starts_at_ts
        self.base = at if at is not None else origin + (config.start_s or 0.0)
        self.session_ttl_s = session_ttl_s
        self.max_sessions = max_sessions
        self.total = self._new_counters()
        self.sessions: OrderedDict[str, ScopeCounters] = OrderedDict()

    def _new_counters(self) -> ScopeCounters:
        q = self.config.quota
        return ScopeCounters(quota=QuotaWindow(q, self.base) if q is not None else None)

    def adopt(self, old: Schedule) -> None:
        """Keep an earlier schedule's counters (hot reload of a rule with the same name)."""
        if old.config.scope != self.config.scope or old.config.quota != self.config.quota:
            return  # counters of a different shape would mean something else
        self.total, self.sessions = old.total, old.sessions

    def window_start(self, now: float) -> float | None:
        """Start of the active span containing `now`, or None when the rule is inactive."""
        c = self.config
        base = self.base
        if now < base:
            return None
        if c.duration_s is not None and now >= base + c.duration_s:
            return None
        if c.period_s is not None and c.active_s is not None:
            phase = (now - base) % c.period_s
            return None if phase >= c.active_s else now - phase
        return base

    def is_active(self, now: float) -> bool:
        """Whether the time windows are open (counters and probability aside)."""
        return self.window_start(now) is not None

    def probability(self, now: float, start: float) -> float:
        ramp = self.config.ramp_s
        p = self.config.probability
        return p if ramp is None else p * min(1.0, max(0.0, (now - start) / ramp))

    def _session(self, session: str, now: float) -> ScopeCounters:
        sessions = self.sessions
        s = sessions.get(session)
        if s is None:
            s = sessions[session] = self._new_counters()
            s.last_seen = now
            self._prune(now)
        else:
            sessions.move_to_end(session)
            s.last_seen = now
        return s

    def _prune(self, now: float) -> None:
        sessions = self.sessions
        idle_before = now - self.session_ttl_s
        while sessions:
            key, oldest = next(iter(sessions.items()))
            over_cap = len(sessions) > self.max_sessions
            idle = oldest.last_seen < idle_before and oldest.in_flight == 0
            if not (over_cap or idle):
                return
            del sessions[key]

    def decide(self, session: str, now: float) -> Ticket:
        """Count one match and decide whether the fault fires."""
        c = self.config
        sess = self._session(session, now)
        sess.matches += 1
        total = self.total
        total.matches += 1
        scope = sess if c.scope == "session" else total
        n, index = scope.matches, sess.matches

        start = self.window_start(now)
        if start is None:
            return Ticket(SKIPPED_SCHEDULE, "outside the time window", n, index)
        quota = scope.quota
        retry: int | None = None
        if quota is not None:
            retry = quota.exceeded(now)
            if retry is None:
                quota.admit(now)
                return Ticket(SKIPPED_SCHEDULE, f"quota: {quota.requests} requests this minute", n, index, quota=quota)
        k = n - c.after
        if k <= 0:
            return self._skip(SKIPPED_SCHEDULE, f"after: match {n} of {c.after} skipped", n, index, quota, now)
        if c.first is not None and k > c.first:
            return self._skip(SKIPPED_SCHEDULE, f"first: match {k} > {c.first}", n, index, quota, now)
        if c.every is not None and k % c.every:
            return self._skip(SKIPPED_SCHEDULE, f"every: match {k} not a multiple of {c.every}", n, index, quota, now)
        if c.max_injections is not None and scope.injections >= c.max_injections:
            return self._skip(SKIPPED_BLAST_RADIUS, f"max_injections {c.max_injections} reached", n, index, quota, now)
        if c.max_concurrent is not None and scope.in_flight >= c.max_concurrent:
            reason = f"max_concurrent {c.max_concurrent} in flight"
            return self._skip(SKIPPED_BLAST_RADIUS, reason, n, index, quota, now)
        p = self.probability(now, start)
        if p < 1.0:
            u = draw(self.seed, self.rule, session, index)
            if u >= p:
                return self._skip(SKIPPED_PROBABILITY, f"draw {u:.6f} >= p {p:.6f}", n, index, quota, now)
        scopes = (total,) if scope is total else (total, scope)
        for s in scopes:
            s.injections += 1
            s.in_flight += 1
        reason = "quota exceeded" if retry is not None else (f"p {p:.6f}" if p < 1.0 else "always")
        return Ticket(FIRED, reason, n, index, scopes=scopes, retry_after_s=retry, session_state=sess.state)

    @staticmethod
    def _skip(outcome: str, reason: str, n: int, index: int, quota: QuotaWindow | None, now: float) -> Ticket:
        # A request the quota rule lets through reaches upstream, so it uses the quota.
        if quota is not None:
            quota.admit(now)
        return Ticket(outcome, reason, n, index, quota=quota)

    @staticmethod
    def release(ticket: Ticket, now: float, tokens: int = 0) -> None:
        """The exchange finished: free its in-flight slots and count its tokens (call once)."""
        for s in ticket.scopes:
            s.in_flight = max(0, s.in_flight - 1)
        ticket.scopes = ()
        if ticket.quota is not None:
            ticket.quota.add_tokens(now, tokens)
            ticket.quota = None

    def status(self, now: float) -> dict[str, object]:
        t = self.total
        out: dict[str, object] = {
            "active": self.is_active(now),
            "matches": t.matches,
            "injections": t.injections,
            "in_flight": t.in_flight,
            "sessions": len(self.sessions),
        }
        if t.quota is not None and self.config.scope == "global":
            out["quota"] = t.quota.describe()
        return out
