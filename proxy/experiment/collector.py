"""Attribute exchanges, violations and fault decisions to runs by session, as the proxy reports them."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections import Counter, defaultdict
from typing import Any

from brownout.proxy.experiment.model import ExchangeSummary, summarize_exchange

__all__ = ["Collector", "traceparent_for"]

logger = logging.getLogger(__name__)


def traceparent_for(seed: int, session: str) -> tuple[str, str]:
    """A reproducible W3C traceparent for a run's session: (traceparent, trace id)."""
    digest = hashlib.blake2b(f"{seed}\x1f{session}".encode(), digest_size=24).hexdigest()
    trace_id, span_id = digest[:32], digest[32:48]
    return f"00-{trace_id}-{span_id}-01", trace_id


class Collector:
    """Thread-safe sink for the proxy thread's callbacks; the runner reads it per session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aliases: dict[str, str] = {}
        self._exchanges: dict[str, list[ExchangeSummary]] = defaultdict(list)
        self._violations: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.decisions: list[dict[str, Any]] = []
        self.severities: Counter[str] = Counter()
        self.unattributed = 0
        # Every exchange the proxy finished, attributed to a run or not, by the phase label running then:
        # a phase whose runs sent nothing through the proxy is told apart from one whose runs lack a session.
        self.phase = ""
        self.seen: Counter[str] = Counter()

    def alias(self, other: str, session: str) -> None:
        """Exchanges seen under `other` (e.g. the run's trace id, when the agent forwards TRACEPARENT) belong to `session`."""
        with self._lock:
            self._aliases[other] = session

    def _session(self, raw: Any) -> str:
        s = str(raw or "")
        return self._aliases.get(s, s)

    def on_exchange(self, exchange: Any) -> None:
        summary = summarize_exchange(exchange)
        with self._lock:
            self._exchanges[self._session(getattr(exchange, "session", ""))].append(summary)
            self.seen[self.phase] += 1

    def on_violation(self, violation: Any) -> None:
        d = violation.to_dict() if hasattr(violation, "to_dict") else dict(violation)
        with self._lock:
            self._violations[self._session(d.get("session_id") or d.get("session"))].append(d)
            self.severities[str(d.get("severity"))] += 1

    def on_decision(self, decision: Any) -> None:
        d = decision.to_dict() if hasattr(decision, "to_dict") else dict(decision)
        with self._lock:
            d["session"] = self._session(d.get("session"))
            self.decisions.append(d)

    def take(self, sessions: list[str]) -> tuple[list[ExchangeSummary], list[dict[str, Any]]]:
        """Remove and return the exchanges and violations of these sessions."""
        with self._lock:
            exchanges = [e for s in sessions for e in self._exchanges.pop(s, [])]
            violations = [v for s in sessions for v in self._violations.pop(s, [])]
        exchanges.sort(key=lambda e: e.at)
        return exchanges, violations

    def leftover_sessions(self) -> list[str]:
        with self._lock:
            return sorted(set(self._exchanges) | set(self._violations))

    def attach(self, addon: Any) -> None:
        """Subscribe to the addon's violations and fault decisions (call it on the proxy's loop)."""
        addon.pipeline.violation_listeners.append(self.on_violation)
        addon.engine.decisions.add_sink(self.on_decision)

    def detach(self, addon: Any) -> None:
        """Unsubscribe (call it on the proxy's loop); detaching twice is harmless."""
        if self.on_violation in addon.pipeline.violation_listeners:
            addon.pipeline.violation_listeners.remove(self.on_violation)
        with contextlib.suppress(ValueError):  # not subscribed (any more)
            addon.engine.decisions.remove_sink(self.on_decision)
