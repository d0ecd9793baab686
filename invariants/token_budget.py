"""token_budget: a session's input+output tokens stay under max_tokens."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["TokenBudget", "TokenBudgetConfig"]


class TokenBudgetConfig(InvariantConfigBase):
    """Tokens as reported by the provider's usage (input + output, summed over the session)."""

    type: Literal["token_budget"]
    max_tokens: int = Field(gt=0)


class TokenBudget(Invariant[TokenBudgetConfig]):
    """Flags the exchange that takes the session over its token budget (once per session)."""

    type = "token_budget"
    Config = TokenBudgetConfig

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        if session.tokens <= self.config.max_tokens or session.state.get(self.name):
            return []
        session.state[self.name] = True
        return [
            self.violation(
                f"session used {session.tokens} tokens ({session.input_tokens} in, {session.output_tokens} out), "
                f"budget {self.config.max_tokens}",
                session,
                details={"tokens": session.tokens, "max_tokens": self.config.max_tokens},
            )
        ]
