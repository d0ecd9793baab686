"""latency_budget: an exchange's total duration and/or time to first chunk stay under budget."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["LatencyBudget", "LatencyBudgetConfig"]


class LatencyBudgetConfig(InvariantConfigBase):
    """Budgets in milliseconds; empty provider/operation lists mean every exchange."""

    type: Literal["latency_budget"]
    severity: Severity = "warning"
    total_ms: float | None = Field(None, gt=0, description="Request start to exchange end.")
    ttfc_ms: float | None = Field(None, gt=0, description="Request start to first body chunk.")
    providers: list[str] = Field(default_factory=list, description="brownout provider ids, e.g. openai, mcp.")
    operations: list[str] = Field(default_factory=list, description="gen_ai.operation.name values, e.g. chat.")

    @model_validator(mode="after")
    def _one_budget(self) -> LatencyBudgetConfig:
        if self.total_ms is None and self.ttfc_ms is None:
            raise ValueError("latency_budget needs total_ms and/or ttfc_ms")
        return self


class LatencyBudget(Invariant[LatencyBudgetConfig]):
    """Flags exchanges slower than the configured budget."""

    type = "latency_budget"
    Config = LatencyBudgetConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        cfg = self.config
        if cfg.providers and exchange.provider not in cfg.providers:
            return []
        if cfg.operations and (exchange.operation or "http") not in cfg.operations:
            return []
        found: list[Violation] = []
        total_ms = (span.end_ns - span.start_ns) / 1e6
        if cfg.total_ms is not None and total_ms > cfg.total_ms:
            found.append(
                self.violation(
                    f"exchange took {total_ms:.0f} ms, budget {cfg.total_ms:g} ms",
                    session,
                    exchange,
                    details={"total_ms": round(total_ms, 3), "budget_ms": cfg.total_ms},
                )
            )
        if cfg.ttfc_ms is not None and exchange.ttfc_s is not None and exchange.ttfc_s * 1000 > cfg.ttfc_ms:
            ttfc_ms = exchange.ttfc_s * 1000
            found.append(
                self.violation(
                    f"time to first chunk {ttfc_ms:.0f} ms, budget {cfg.ttfc_ms:g} ms",
                    session,
                    exchange,
                    details={"ttfc_ms": round(ttfc_ms, 3), "budget_ms": cfg.ttfc_ms},
                )
            )
        return found
