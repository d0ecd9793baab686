"""A rule's compiled schedule: its time windows here, its counters in a schedule store.

Reproducibility: no shared RNG. Each probability draw, and the seed of the `random.Random`
handed to the fault, is a hash of (seed, rule, session, per-session match index). A
session's decisions therefore depend only on its own request order, however sessions
interleave, even for a rule with `scope: global` whose probability is the only condition.
The draw is one function the memory and the Redis store both compute (brownout.core.state.schedule),
so both take the same decisions for the same traffic.

The counting itself (scopes, `after`, `first`, `every`, `max_injections`, `max_concurrent`, quotas,
session bounds) is `brownout.core.state.schedule_memory.MemoryCounters`: this process's counters,
what `decide` uses. With a shared store the fault engine asks the store instead (see
faults/engine.py) for the rules that need counters.
"""

from __future__ import annotations

import hashlib
import random
import struct

from brownout.core.state.schedule import (
    FIRED,
    OUTCOMES,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_NOT_APPLICABLE,
    SKIPPED_PAUSED,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    SKIPPED_STATE_UNAVAILABLE,
    ScheduleSpec,
    Ticket,
    draw,
    ramped,
)
from brownout.core.state.schedule_memory import MemoryCounters, ScopeCounters
from brownout.faults.config import ScheduleConfig

__all__ = [
    "FIRED",
    "OUTCOMES",
    "SKIPPED_BLAST_RADIUS",
    "SKIPPED_NOT_APPLICABLE",
    "SKIPPED_PAUSED",
    "SKIPPED_PROBABILITY",
    "SKIPPED_SCHEDULE",
    "SKIPPED_STATE_UNAVAILABLE",
    "Schedule",
    "ScopeCounters",
    "Ticket",
    "draw",
    "rng_for",
    "spec_of",
]


def rng_for(seed: int, rule: str, session: str, index: int) -> random.Random:
    """The reproducible RNG a fired fault gets (jitter, corruption positions)."""
    h = hashlib.blake2b(digest_size=8, person=b"brownoutrng")
    h.update(f"{seed}\x1f{rule}\x1f{session}\x1f{index}".encode())
    return random.Random(struct.unpack(">Q", h.digest())[0])


def spec_of(config: ScheduleConfig) -> ScheduleSpec:
    """The counting part of a schedule config."""
    q = config.quota
    return ScheduleSpec(
        probability=config.probability,
        ramp_s=config.ramp_s,
        after=config.after,
        first=config.first,
        every=config.every,
        max_injections=config.max_injections,
        max_concurrent=config.max_concurrent,
        requests_per_min=q.requests_per_min if q is not None else None,
        tokens_per_min=q.tokens_per_min if q is not None else None,
        per_session=config.scope == "session",
    )


class Schedule:
    """A rule's compiled schedule and its counters in this process."""

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
        self.spec = spec_of(config)
        self.base = self._base(origin)
        self.counters = MemoryCounters(
            self.spec,
            rule=rule,
            seed=seed,
            quota_base=self.base,
            session_ttl_s=session_ttl_s,
            max_sessions=max_sessions,
        )

    def _base(self, origin: float) -> float:
        # The window base: starts_at, or the origin (proxy or fleet start) + start_s.
        at = self.config.starts_at_ts
        return at if at is not None else origin + (self.config.start_s or 0.0)

    def rebase(self, origin: float) -> None:
        """Windows (and shared quota windows) count from `origin` from now on: the fleet's start."""
        self.base = self._base(origin)

    @property
    def total(self) -> ScopeCounters:
        return self.counters.total

    @property
    def sessions(self) -> dict[str, ScopeCounters]:
        return self.counters.sessions

    def adopt(self, old: Schedule) -> None:
        """Keep an earlier schedule's counters (hot reload of a rule with the same name)."""
        if old.config.scope != self.config.scope or old.config.quota != self.config.quota:
            return  # counters of a different shape would mean something else
        self.counters.total, self.counters.sessions = old.counters.total, old.counters.sessions

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
        return ramped(self.spec, now, start)

    def decide(self, session: str, now: float) -> Ticket:
        """Count one match on this process's counters and decide whether the fault fires."""
        return self.counters.decide(session, now, self.window_start(now))

    @staticmethod
    def release(ticket: Ticket, now: float, tokens: int = 0) -> None:
        """The exchange finished: free its in-flight slots and count its tokens (call once)."""
        MemoryCounters.release(ticket, now, tokens)

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
