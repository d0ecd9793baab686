"""Session history for session-level invariants: bounded per session and in session count."""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from brownout.core.state.sessions import SessionRecord
from brownout.invariants.summary import ExchangeSummary

__all__ = ["Session", "SessionStore"]

logger = logging.getLogger(__name__)

HISTORY_MAX = 32  # recent light summaries per session; invariants keep their own bounded state
TOOLS_MAX = 512  # declared tools remembered per session


@dataclass(eq=False)
class Session:
    """One agent session: recent exchange summaries, declared tools, totals, invariant state."""

    id: str
    created: float
    last_seen: float
    now: float = 0.0  # the runner's clock at the current check (violation timestamps)
    history: deque[ExchangeSummary] = field(default_factory=lambda: deque(maxlen=HISTORY_MAX))
    tools: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # tool name -> JSON Schema
    # Per-invariant scratch state, keyed by the configured invariant's name.
    state: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # summed over priced exchanges
    unpriced_calls: int = 0  # LLM calls that reported tokens but could not be priced
    first_start: float | None = None
    last_end: float | None = None
    closed: bool = False  # set once session-end checks ran
    # With a fleet's shared store: the version and JSON fields of this session as last read or written
    # there (version -1: changed here while the store was away). None: the session lives here only.
    shared: SessionRecord | None = None

    @property
    def last(self) -> ExchangeSummary | None:
        return self.history[-1] if self.history else None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def duration_s(self) -> float:
        if self.first_start is None or self.last_end is None:
            return 0.0
        return max(0.0, self.last_end - self.first_start)

    def state_for(self, name: str, factory: Callable[[], Any]) -> Any:
        """The invariant's state object, created on first use."""
        value = self.state.get(name)
        if value is None:
            value = self.state[name] = factory()
        return value

    def observe(self, summary: ExchangeSummary) -> None:
        """Account for a finished exchange (before invariants check it)."""
        self.history.append(summary.light())
        self.calls += 1
        if summary.is_llm:
            self.llm_calls += 1
        self.input_tokens += summary.input_tokens
        self.output_tokens += summary.output_tokens
        if summary.cost_usd is not None:
            self.cost_usd += summary.cost_usd
        elif summary.is_llm and (summary.input_tokens or summary.output_tokens):
            self.unpriced_calls += 1
        self.first_start = summary.start if self.first_start is None else min(self.first_start, summary.start)
        self.last_end = summary.end if self.last_end is None else max(self.last_end, summary.end)
        for spec in summary.tools_declared:
            if spec.name in self.tools or len(self.tools) < TOOLS_MAX:
                self.tools[spec.name] = spec.schema


class SessionStore:
    """Sessions ordered by last activity: idle expiry and the size cap both pop the oldest."""

    def __init__(self, *, idle_s: float = 300.0, max_sessions: int = 10_000) -> None:
        if idle_s <= 0:
            raise ValueError(f"idle_s must be > 0, got {idle_s}")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def touch(self, session_id: str, now: float) -> tuple[Session, list[Session]]:
        """The session, marked active now, and the sessions evicted to stay under max_sessions."""
        session = self._sessions.get(session_id)
        if session is None:
            session = Session(id=session_id, created=now, last_seen=now)
            self._sessions[session_id] = session
        else:
            self._sessions.move_to_end(session_id)
            session.last_seen = max(session.last_seen, now)
        session.now = now
        return session, self._evict()

    def _evict(self) -> list[Session]:
        evicted: list[Session] = []
        while len(self._sessions) > self.max_sessions:
            _, old = self._sessions.popitem(last=False)
            evicted.append(old)
        if evicted:
            logger.debug("evicted %d sessions over max_sessions=%d", len(evicted), self.max_sessions)
        return evicted

    def put(self, session: Session, now: float) -> list[Session]:
        """Hold `session` (in place of any under its id), marked active now; the sessions evicted over max_sessions."""
        self._sessions[session.id] = session
        self._sessions.move_to_end(session.id)
        session.last_seen = max(session.last_seen, now)
        return self._evict()

    def discard(self, session_id: str) -> Session | None:
        """Forget a session (closed elsewhere), returning it."""
        return self._sessions.pop(session_id, None)

    def expire(self, now: float) -> list[Session]:
        """Remove and return the sessions idle for at least idle_s."""
        expired: list[Session] = []
        while self._sessions:
            session = next(iter(self._sessions.values()))
            if now - session.last_seen < self.idle_s:
                break
            self._sessions.popitem(last=False)
            session.now = now
            expired.append(session)
        return expired

    def clear(self) -> list[Session]:
        """Remove and return every session (shutdown)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        return sessions
