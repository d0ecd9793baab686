"""The violation record: what an invariant found, with the ids that tie it to spans and sessions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Violation"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One invariant violation; messages name kinds and locations, never captured values."""

    invariant: str  # the configured invariant's name (its type unless renamed)
    severity: str  # info | warning | error | critical
    message: str
    session_id: str
    timestamp: float  # when brownout detected it (seconds since the epoch)
    invariant_type: str = ""
    trace_id: str | None = None  # 32 hex digits
    span_id: str | None = None  # 16 hex digits
    exchange_id: str | None = None
    provider: str | None = None
    model: str | None = None
    tool: str | None = None
    rule: str | None = None  # the chaos rule(s) in effect, comma-separated
    fault: str | None = None  # the fault type(s) in effect, comma-separated
    details: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the JSONL violation log's line)."""
        return {
            "invariant": self.invariant,
            "invariant_type": self.invariant_type or self.invariant,
            "severity": self.severity,
            "message": self.message,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "exchange_id": self.exchange_id,
            "provider": self.provider,
            "model": self.model,
            "tool": self.tool,
            "rule": self.rule,
            "fault": self.fault,
            "timestamp": self.timestamp,
            "details": dict(self.details),
        }
