"""cost_budget: a session (and each of its LLM calls) stays under a budget in US dollars at list prices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["CostBudget", "CostBudgetConfig"]


class CostBudgetConfig(InvariantConfigBase):
    """Budgets in US dollars, priced from the genai-prices table; at least one is required."""

    type: Literal["cost_budget"]
    max_session_usd: float | None = Field(None, gt=0, description="The whole session, summed over its calls.")
    max_exchange_usd: float | None = Field(None, gt=0, description="Any one LLM call.")

    @model_validator(mode="after")
    def _one_limit(self) -> CostBudgetConfig:
        if self.max_session_usd is None and self.max_exchange_usd is None:
            raise ValueError("cost_budget needs max_session_usd and/or max_exchange_usd")
        return self


def _unpriced(session: Session) -> str:
    n = session.unpriced_calls
    return f"; {n} LLM call{'s' if n != 1 else ''} could not be priced" if n else ""


class CostBudget(Invariant[CostBudgetConfig]):
    """Flags the call that exceeds the per-call budget, and the one that takes the session over (once)."""

    type = "cost_budget"
    Config = CostBudgetConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        limit = self.config.max_exchange_usd
        if limit is None or exchange.cost_usd is None or exchange.cost_usd <= limit:
            return []
        return [
            self.violation(
                f"LLM call cost ${exchange.cost_usd:.6f} USD, budget ${limit:g} per call",
                session,
                exchange,
                details={"cost_usd": round(exchange.cost_usd, 9), "max_exchange_usd": limit, "scope": "exchange"},
            )
        ]

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        limit = self.config.max_session_usd
        if limit is None or session.cost_usd <= limit or session.state.get(self.name):
            return []
        session.state[self.name] = True
        return [
            self.violation(
                f"session cost ${session.cost_usd:.6f} USD over {session.llm_calls} LLM calls, "
                f"budget ${limit:g}{_unpriced(session)}",
                session,
                details={
                    "cost_usd": round(session.cost_usd, 9),
                    "max_session_usd": limit,
                    "unpriced_calls": session.unpriced_calls,
                    "scope": "session",
                },
            )
        ]
