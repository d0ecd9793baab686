"""Session state a fleet shares: each session as opaque JSON blobs, a bounded history and a version.

The invariants that judge whole sessions (budgets, loops, retries) must see every exchange of a
session, whichever replica served it. The store holds what they read; what it means is theirs:
here a session is named blobs (`fields`), the latest `history_max` history entries, and a
`version` that every commit raises. A writer commits against the version it read: if another
replica committed in between, the commit is refused and answered with the record as it is now,
to judge again (optimistic concurrency). So every exchange is applied exactly once, and what it
reports is reported once, fleet-wide.

Session end: a session with no commit for `idle_s` is *claimed* by whichever replica asks first
(`claim_idle`): the claim removes it atomically, so its session-end checks run exactly once. The
size bound (`max_sessions`) evicts the least recently active sessions on commit, handed to the
committer to close.

`MemorySessions` is the in-process implementation: the reference for the semantics, the test
double, and what several runners in one process share. `RedisSessions` (core/state/redis_sessions.py)
is the fleet's. Both answer `UNAVAILABLE` instead of raising when the store cannot be reached.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Committed", "MemorySessions", "SessionChange", "SessionRecord", "SessionStates", "Status"]


class Status(enum.Enum):
    """An answer that is not a record."""

    UNAVAILABLE = "unavailable"  # the store could not be reached (counted by the link); the caller falls back


@dataclass(slots=True)
class SessionRecord:
    """One session as the store holds it. Version 0: not in the store (yet, or any more)."""

    id: str
    version: int = 0
    fields: dict[str, str] = field(default_factory=dict)  # name -> JSON text
    history: list[str] = field(default_factory=list)  # oldest first, at most history_max


@dataclass(slots=True)
class SessionChange:
    """What one exchange changed: fields set and dropped, history entries appended."""

    fields: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    appended: tuple[str, ...] = ()


@dataclass(slots=True)
class Committed:
    """A commit's answer: the new version, or (conflict) None and the record as it is now."""

    version: int | None
    current: SessionRecord | None = None
    evicted: list[SessionRecord] = field(default_factory=list)  # over max_sessions: the caller closes them


class SessionStates(Protocol):
    """Where a fleet keeps its sessions."""

    idle_s: float
    max_sessions: int
    history_max: int

    async def load(self, session_id: str) -> SessionRecord | Status:
        """The session's record (version 0 and empty when absent)."""
        ...

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        """Apply `change` if the store still holds `record.version`; `now` (seconds) marks the session active."""
        ...

    async def claim_idle(self, now: float, limit: int = 100) -> list[SessionRecord] | Status:
        """Remove and return up to `limit` sessions idle for at least idle_s (each goes to one caller only)."""
        ...


def check_bounds(idle_s: float, max_sessions: int, history_max: int) -> None:
    """ValueError naming the parameter that is out of range."""
    if idle_s <= 0:
        raise ValueError(f"idle_s must be > 0, got {idle_s}")
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    if history_max < 1:
        raise ValueError(f"history_max must be >= 1, got {history_max}")


@dataclass(slots=True)
class _Held:
    record: SessionRecord
    last_seen: float


class MemorySessions:
    """The store in this process: records ordered by last activity, with the same bounds as Redis."""

    def __init__(self, *, idle_s: float = 300.0, max_sessions: int = 10_000, history_max: int = 32) -> None:
        check_bounds(idle_s, max_sessions, history_max)
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self.history_max = history_max
        self._held: OrderedDict[str, _Held] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    async def load(self, session_id: str) -> SessionRecord | Status:
        held = self._held.get(session_id)
        return SessionRecord(session_id) if held is None else _copy(held.record)

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        held = self._held.get(record.id)
        current = held.record.version if held is not None else 0
        if current != record.version:
            return Committed(None, _copy(held.record) if held is not None else SessionRecord(record.id))
        if held is None:
            held = self._held[record.id] = _Held(SessionRecord(record.id), now)
        stored = held.record
        stored.fields.update(change.fields)
        for name in change.dropped:
            stored.fields.pop(name, None)
        stored.history = (stored.history + list(change.appended))[-self.history_max :]
        stored.version += 1
        held.last_seen = max(held.last_seen, now)
        self._held.move_to_end(record.id)
        evicted: list[SessionRecord] = []
        while len(self._held) > self.max_sessions:
            _, old = self._held.popitem(last=False)
            evicted.append(old.record)
        return Committed(stored.version, evicted=evicted)

    async def claim_idle(self, now: float, limit: int = 100) -> list[SessionRecord] | Status:
        claimed: list[SessionRecord] = []
        # Commits keep the order by activity, except when a commit carries an earlier `now` (a slower
        # clock): scan them all, as Redis's index (ordered by last activity) would find them.
        for session_id, held in list(self._held.items()):
            if len(claimed) >= limit:
                break
            if now - held.last_seen >= self.idle_s:
                del self._held[session_id]
                claimed.append(held.record)
        return claimed


def _copy(record: SessionRecord) -> SessionRecord:
    return SessionRecord(record.id, record.version, dict(record.fields), list(record.history))
