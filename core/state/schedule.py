"""Schedule state: what deciding one matched rule needs, what a decision returns, and the store protocol.

A rule's schedule is decided in two parts. Time (window, periodic outage, ramp) is computed by the
caller from its clock and the window origin. Counting (`after`, `first`, `every`, `max_injections`,
`max_concurrent`, quota windows, and the session's match index that keys the draw) lives in a
`ScheduleStore`: `memory` (schedule_memory.py: this process's counters, as one brownout always had)
or `redis` (schedule_redis.py: one Lua script per exchange decides every matched rule of the exchange
that needs counters, so replicas share them).

Both backends take the same decisions for the same traffic: the checks run in the same order (window,
quota, after/first/every, max_injections, max_concurrent, probability) and the probability draw is one
function both compute: the first 52 bits of sha1(seed, rule, session, index, "draw"), which Redis's
Lua has as `redis.sha1hex`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "FIRED",
    "OUTCOMES",
    "SKIPPED_BLAST_RADIUS",
    "SKIPPED_NOT_APPLICABLE",
    "SKIPPED_PAUSED",
    "SKIPPED_PROBABILITY",
    "SKIPPED_SCHEDULE",
    "SKIPPED_STATE_UNAVAILABLE",
    "Ask",
    "ScheduleSpec",
    "ScheduleStore",
    "Ticket",
    "draw",
    "draw_bits",
    "ramped",
]

FIRED = "fired"
SKIPPED_PROBABILITY = "skipped_probability"
SKIPPED_SCHEDULE = "skipped_schedule"
SKIPPED_BLAST_RADIUS = "skipped_blast_radius"
SKIPPED_PAUSED = "skipped_paused"
# Recorded after `fired` when the fault then could not act on the exchange (see faults.base.NotApplicable).
SKIPPED_NOT_APPLICABLE = "skipped_not_applicable"
# A rule bound by a shared counter, while the shared store cannot be reached: it does not inject.
SKIPPED_STATE_UNAVAILABLE = "skipped_state_unavailable"
OUTCOMES = (
    FIRED,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PAUSED,
    SKIPPED_NOT_APPLICABLE,
    SKIPPED_STATE_UNAVAILABLE,
)

DRAW_BITS = 52  # a double holds them exactly, in Python and in Redis's Lua alike
_DRAW_SCALE = float(1 << DRAW_BITS)


def draw_bits(seed: int | str, rule: str, session: str, index: int) -> int:
    """The 52-bit integer behind `draw`: the first 13 hex digits of the sha1 (what the Lua script computes)."""
    key = f"{seed}\x1f{rule}\x1f{session}\x1f{index}\x1fdraw".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha1(key, usedforsecurity=False).digest()[:7]) >> 4


def draw(seed: int | str, rule: str, session: str, index: int) -> float:
    """The reproducible uniform [0, 1) draw for one decision."""
    return draw_bits(seed, rule, session, index) / _DRAW_SCALE


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """The counting part of a rule's schedule (time windows are the caller's)."""

    probability: float = 1.0
    ramp_s: float | None = None
    after: int = 0
    first: int | None = None
    every: int | None = None
    max_injections: int | None = None
    max_concurrent: int | None = None
    requests_per_min: int | None = None
    tokens_per_min: int | None = None
    per_session: bool = False  # scope: session (counters per rule and session) rather than global

    @property
    def has_quota(self) -> bool:
        return self.requests_per_min is not None or self.tokens_per_min is not None

    @property
    def counted(self) -> bool:
        """Bound by a counter beyond the session's match index: with a shared store, decided there."""
        return (
            self.after > 0
            or self.first is not None
            or self.every is not None
            or self.max_injections is not None
            or self.max_concurrent is not None
            or self.has_quota
        )


def ramped(spec: ScheduleSpec, now: float, start: float) -> float:
    """The probability at `now` of a window that opened at `start` (`ramp_s` raises it from 0)."""
    ramp = spec.ramp_s
    p = spec.probability
    return p if ramp is None else p * min(1.0, max(0.0, (now - start) / ramp))


@dataclass(slots=True)
class Ticket:
    """One decision: outcome, why, and what to release when the exchange finishes."""

    outcome: str
    reason: str
    counter: int  # the match number in the rule's scope (1-based)
    index: int  # the match number in the session: keys the draw and the fault's RNG
    scopes: tuple[Any, ...] = ()  # memory: the ScopeCounters holding an in-flight slot (fired)
    quota: Any = None  # memory: the QuotaWindow that admitted the request (tokens counted at finish)
    retry_after_s: int | None = None  # quota exceeded: seconds until the window resets
    session_state: dict[str, Any] | None = None  # fired: the session's FaultContext.session_state
    hold: Any = None  # a shared store's handle on what to release (leases, the quota to add tokens to)


@dataclass(slots=True)
class Ask:
    """One matched rule of one exchange, to decide."""

    rule: str  # the rule's name: keys the draw
    key: str  # keys its shared counters: the name, and a tag of what gives the counters their meaning
    spec: ScheduleSpec
    seed: int
    session: str
    now: float
    start: float | None  # the open window's start; None: the window is closed
    quota_base: float  # origin of the 60 s quota windows
    lease: str  # unique per exchange and rule: its max_concurrent slot
    local: Any  # the process's own counters of the rule (schedule_memory.MemoryCounters)
    session_ttl_s: float = 300.0  # a session's counters are dropped after this much silence
    counts_tokens: bool = False  # the quota has a token limit: the exchange's tokens are added at release


class ScheduleStore(Protocol):
    """Where a rule's counters live. `shared` stores answer over the network (await them once per exchange)."""

    shared: bool

    async def decide(self, asks: Sequence[Ask]) -> list[Ticket]:
        """Count each ask's match and decide it, in order; never raises (a store away: its fallback)."""
        ...

    async def release(self, tickets: Sequence[Ticket], now: float, tokens: int) -> None:
        """The exchange finished: free the tickets' in-flight slots and add its tokens to their quotas."""
        ...

    def describe(self) -> dict[str, Any]:
        """For /status."""
        ...
