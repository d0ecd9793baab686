"""call_budget: a session makes at most max_calls LLM calls and ends within max_duration_s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["CallBudget", "CallBudgetConfig"]


class CallBudgetConfig(InvariantConfigBase):
    """Limits per session; `count: all` counts tool and plain HTTP calls too."""

    type: Literal["call_budget"]
    max_calls: int | None = Field(None, gt=0)
    max_duration_s: float | None = Field(None, gt=0, description="First request start to last exchange end.")
    count: Literal["llm", "all"] = "llm"

    @model_validator(mode="after")
    def _one_limit(self) -> CallBudgetConfig:
        if self.max_calls is None and self.max_duration_s is None:
            raise ValueError("call_budget needs max_calls and/or max_duration_s")
        return self


class CallBudget(Invariant[CallBudgetConfig]):
    """Flags the exchange that exceeds a limit, once per limit per session (the agent must stop)."""

    type = "call_budget"
    Config = CallBudgetConfig

    def dump_state(self, state: set[str]) -> list[str]:
        return sorted(state)

    def load_state(self, data: Any) -> set[str]:
        return set(data)

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        cfg = self.config
        reported: set[str] = session.state_for(self.name, set)
        found: list[Violation] = []
        calls = session.llm_calls if cfg.count == "llm" else session.calls
        if cfg.max_calls is not None and calls > cfg.max_calls and "calls" not in reported:
            reported.add("calls")
            kind = "LLM calls" if cfg.count == "llm" else "calls"
            found.append(
                self.violation(
                    f"session made {calls} {kind}, budget {cfg.max_calls}",
                    session,
                    details={"calls": calls, "max_calls": cfg.max_calls},
                )
            )
        duration = session.duration_s
        if cfg.max_duration_s is not None and duration > cfg.max_duration_s and "duration" not in reported:
            reported.add("duration")
            found.append(
                self.violation(
                    f"session ran {duration:.1f} s, budget {cfg.max_duration_s:g} s",
                    session,
                    details={"duration_s": round(duration, 3), "max_duration_s": cfg.max_duration_s},
                )
            )
        return found
