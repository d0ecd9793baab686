"""The invariant abstraction: a typed config plus span-level and session-level checks.

Invariants read the span (`ExchangeSpan`: attributes and events), the exchange summary and
the session; never mitmproxy. Per-session state goes in `session.state_for(self.name, ...)`
so it is dropped with the session; with a shared store (a fleet) it travels as JSON through
`dump_state` / `load_state`.
"""

from __future__ import annotations

import builtins
from abc import ABC
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from brownout.core.config import Model
from brownout.core.joined_trace import JoinedTrace
from brownout.core.spans import ExchangeSpan
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["Invariant", "InvariantConfigBase", "Severity"]

Severity = Literal["info", "warning", "error", "critical"]


class InvariantConfigBase(Model):
    """Fields every invariant takes; subclasses add `type: Literal[...]` and their parameters."""

    type: str
    name: str | None = Field(None, min_length=1, description="Unique name; defaults to the type.")
    severity: Severity = "error"
    enabled: bool = True

    @property
    def key(self) -> str:
        return self.name or self.type


class Invariant[C: InvariantConfigBase](ABC):
    """One configured invariant. Override check_span and/or check_session."""

    type: ClassVar[str]
    Config: ClassVar[builtins.type[InvariantConfigBase]]

    def __init__(self, config: C) -> None:
        self.config = config
        self.name = config.key
        self.severity: str = config.severity

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        """Checks when an exchange ends; the session already includes it (session.last)."""
        return []

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        """Checks on the session: after each exchange (final=False) and once when it idles."""
        return []

    def check_trace(self, trace: JoinedTrace, session: Session) -> list[Violation]:
        """Checks on both sides of one trace (the agent's own spans and the wire calls joined to them), once
        it has settled; only when brownout receives the agent's spans (the `agent_spans` section)."""
        return []

    def dump_state(self, state: Any) -> Any:
        """This invariant's session state as JSON data, for a fleet's shared store; None: nothing to share.

        The default suits state that is JSON already (a flag, a dict of counts); an invariant that
        keeps anything else (sets, deques, summaries, its own classes) gives its own codec. Never pickle:
        the store is shared, and what it holds must be data, not code."""
        return state

    def load_state(self, data: Any) -> Any:
        """The state `dump_state` wrote, read back (by any replica running the same invariant config)."""
        return data

    def violation(
        self,
        message: str,
        session: Session,
        at: ExchangeSummary | None = None,
        *,
        cause: ExchangeSummary | None = None,
        severity: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Violation:
        """A record tied to exchange `at` (default: the session's last); faults from `cause` if given."""
        at = at if at is not None else session.last
        source = cause if cause is not None and cause.faults else at
        return self.record(
            message,
            session,
            severity=severity,
            details=details,
            trace_id=at.trace_id if at else None,
            span_id=at.span_id if at else None,
            exchange_id=at.exchange_id if at else None,
            provider=at.provider if at else None,
            model=at.model if at else None,
            tool=at.tool if at else None,
            rule=source.rules if source else None,
            fault=source.fault_types if source else None,
        )

    def record(
        self,
        message: str,
        session: Session,
        *,
        severity: str | None = None,
        details: Mapping[str, Any] | None = None,
        **where: Any,
    ) -> Violation:
        """A violation of this invariant in `session`, tied to whatever `where` names (trace, span, exchange...)."""
        return Violation(
            invariant=self.name,
            invariant_type=self.type,
            severity=severity or self.severity,
            message=message,
            session_id=session.id,
            timestamp=session.now,
            details=dict(details or {}),
            **where,
        )
