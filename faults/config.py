"""Rule configuration: match + fault + schedule."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RuleConfig"]


class RuleConfig(BaseModel):
    """One chaos rule (placeholder shape; the fault engine types match, fault and schedule)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    enabled: bool = True
    match: dict[str, Any] = Field(default_factory=dict)
    fault: dict[str, Any]
    schedule: dict[str, Any] = Field(default_factory=dict)
