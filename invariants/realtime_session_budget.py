"""realtime_session_budget: a realtime session (one WebSocket) stays under a duration and a token budget.

Tokens are summed over the session's generations as they end; the duration is the session's own, from
the upgrade to the close, and is checked as generations end too (from the first one's start), so a session
that is still open is flagged once it is over budget. Each budget is reported once per session.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from brownout.core.spans import ExchangeSpan
from brownout.core.wire.realtime import SESSION_OPERATION
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["RealtimeSessionBudget", "RealtimeSessionBudgetConfig"]

_SESSIONS_MAX = 256  # realtime sessions tracked per brownout session


class RealtimeSessionBudgetConfig(InvariantConfigBase):
    """Budgets per realtime session (gen_ai.live_session.id)."""

    type: Literal["realtime_session_budget"]
    max_duration_s: float | None = Field(None, gt=0, description="From the upgrade to the close.")
    max_tokens: int | None = Field(None, gt=0, description="Input + output tokens of its generations.")

    @model_validator(mode="after")
    def _one_budget(self) -> RealtimeSessionBudgetConfig:
        if self.max_duration_s is None and self.max_tokens is None:
            raise ValueError("realtime_session_budget needs max_duration_s and/or max_tokens")
        return self


@dataclass(slots=True)
class _Budget:
    started: float
    tokens: int = 0
    over_tokens: bool = False
    over_duration: bool = False


class RealtimeSessionBudget(Invariant[RealtimeSessionBudgetConfig]):
    """Flags the generation (or the session's end) that takes a realtime session over budget."""

    type = "realtime_session_budget"
    Config = RealtimeSessionBudgetConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        sid = span.attributes.get("gen_ai.live_session.id")
        if not isinstance(sid, str):
            return []
        budgets: OrderedDict[str, _Budget] = session.state_for(self.name, OrderedDict)
        budget = budgets.get(sid)
        if budget is None:
            budget = budgets[sid] = _Budget(exchange.start)
            while len(budgets) > _SESSIONS_MAX:
                budgets.popitem(last=False)
        budget.started = min(budget.started, exchange.start)
        ending = span.attributes.get("brownout.operation") == SESSION_OPERATION
        found: list[Violation] = []
        cfg = self.config
        if not ending:
            budget.tokens += exchange.input_tokens + exchange.output_tokens
        if cfg.max_tokens is not None and budget.tokens > cfg.max_tokens and not budget.over_tokens:
            budget.over_tokens = True
            found.append(
                self.violation(
                    f"realtime session {sid} used {budget.tokens} tokens, budget {cfg.max_tokens}",
                    session,
                    exchange,
                    details={"realtime_session_id": sid, "tokens": budget.tokens, "max_tokens": cfg.max_tokens},
                )
            )
        duration = exchange.end - budget.started
        if cfg.max_duration_s is not None and duration > cfg.max_duration_s and not budget.over_duration:
            budget.over_duration = True
            found.append(
                self.violation(
                    f"realtime session {sid} lasted {duration:.1f} s, budget {cfg.max_duration_s:g} s",
                    session,
                    exchange,
                    details={
                        "realtime_session_id": sid,
                        "duration_s": round(duration, 3),
                        "max_duration_s": cfg.max_duration_s,
                    },
                )
            )
        if ending:
            budgets.pop(sid, None)
        return found

    def dump_state(self, state: OrderedDict[str, _Budget]) -> list[list[Any]]:
        return [[sid, b.started, b.tokens, b.over_tokens, b.over_duration] for sid, b in state.items()]

    def load_state(self, data: list[list[Any]]) -> OrderedDict[str, _Budget]:
        return OrderedDict(
            (sid, _Budget(started, tokens, over_t, over_d)) for sid, started, tokens, over_t, over_d in data
        )
