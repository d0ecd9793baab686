"""The memory schedule store: one rule's counters in this process.

Counters (`after`, `first`, `every`, `max_injections`, `max_concurrent`, quota) live in the rule's
scope: one set for the rule (`global`) or one per session (`session`); global counters see sessions
in arrival order. Every match counts (windows closed or not), so `after: 5` means "after the 5th
match". Order of checks: window, quota, after/first/every, max_injections, max_concurrent,
probability (scaled by the ramp).

Per-session counters are kept in LRU order and dropped when idle longer than `session_ttl_s` or
beyond `max_sessions`; a session seen again after that starts over.

Quota windows are fixed 60 s buckets aligned to the schedule's origin (proxy start or `starts_at`).
Only requests the quota let through count: a request answered with 429 consumes nothing, as with real
provider rate limits. Tokens (input + output) are added when the exchange finishes.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from brownout.core.state.schedule import (
    FIRED,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    Ask,
    ScheduleSpec,
    Ticket,
    draw,
    ramped,
)

__all__ = ["WINDOW_S", "MemoryCounters", "MemorySchedules", "QuotaWindow", "ScopeCounters"]

WINDOW_S = 60.0


class QuotaWindow:
    """Request and token counts in the current minute of one scope."""

    __slots__ = ("_origin", "config", "requests", "start", "tokens")

    def __init__(self, config: Any, origin: float) -> None:
        self.config = config  # anything with requests_per_min and tokens_per_min (a ScheduleSpec, a QuotaConfig)
        self._origin = origin
        self.start = origin
        self.requests = 0
        self.tokens = 0

    def _roll(self, now: float) -> None:
        if now >= self.start + WINDOW_S or now < self.start:
            self.start = self._origin + math.floor((now - self._origin) / WINDOW_S) * WINDOW_S
            self.requests = 0
            self.tokens = 0

    def exceeded(self, now: float) -> int | None:
        """Seconds until the window resets (>= 1) when the quota is used up, else None."""
        self._roll(now)
        c = self.config
        full = (c.requests_per_min is not None and self.requests >= c.requests_per_min) or (
            c.tokens_per_min is not None and self.tokens >= c.tokens_per_min
        )
        if not full:
            return None
        return max(1, math.ceil(self.start + WINDOW_S - now))

    def admit(self, now: float) -> None:
        self._roll(now)
        self.requests += 1

    def add_tokens(self, now: float, tokens: int) -> None:
        # Tokens land in the window in which the response finished.
        if tokens > 0:
            self._roll(now)
            self.tokens += tokens

    def describe(self) -> dict[str, int | float]:
        return {"window_start": self.start, "requests": self.requests, "tokens": self.tokens}


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


class MemoryCounters:
    """One rule's counters in this process, and its decisions."""

    __slots__ = ("max_sessions", "quota_base", "rule", "seed", "session_ttl_s", "sessions", "spec", "total")

    def __init__(
        self,
        spec: ScheduleSpec,
        *,
        rule: str,
        seed: int,
        quota_base: float,
        session_ttl_s: float = 3600.0,
        max_sessions: int = 10_000,
    ) -> None:
        self.spec = spec
        self.rule = rule
        self.seed = seed
        self.quota_base = quota_base
        self.session_ttl_s = session_ttl_s
        self.max_sessions = max_sessions
        self.total = self._new_counters()
        self.sessions: OrderedDict[str, ScopeCounters] = OrderedDict()

    def _new_counters(self) -> ScopeCounters:
        spec = self.spec
        quota = QuotaWindow(spec, self.quota_base) if spec.has_quota else None
        return ScopeCounters(quota=quota)

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

    def session_state(self, session: str, now: float) -> dict[str, Any]:
        """The session's FaultContext.session_state, without counting a match (a shared store decided it)."""
        return self._session(session, now).state

    def decide(self, session: str, now: float, start: float | None) -> Ticket:
        """Count one match and decide whether the fault fires; `start`: the open window's start, or None."""
        c = self.spec
        sess = self._session(session, now)
        sess.matches += 1
        total = self.total
        total.matches += 1
        scope = sess if c.per_session else total
        n, index = scope.matches, sess.matches

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
        p = c.probability if c.ramp_s is None else ramped(c, now, start)
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


class MemorySchedules:
    """The memory ScheduleStore: each ask is decided on its rule's own counters, in this process.

    The fault engine calls `MemoryCounters.decide` directly on its hot path (no await); this class is
    the same thing behind the store protocol, for code written against any backend."""

    shared = False

    async def decide(self, asks: Sequence[Ask]) -> list[Ticket]:
        return [a.local.decide(a.session, a.now, a.start) for a in asks]

    async def release(self, tickets: Sequence[Ticket], now: float, tokens: int) -> None:
        for ticket in tickets:
            MemoryCounters.release(ticket, now, tokens)

    def describe(self) -> dict[str, Any]:
        return {"backend": "memory"}
