"""The agent's promise, as a share of good runs: which runs are good, and what share the goal needs.

A search needs a yes or no per run, so every goal becomes "at least `target` of the runs are good":
- rates: `success_rate` min m (a good run passed; target m), `error_rate` / `timeout_rate` max m
  (a good run did not error / time out; target 1 - m);
- duration quantiles: `p50_duration_s` / `p95_duration_s` max s (a good run took at most s seconds;
  target 0.5 / 0.95: the quantile is at most s exactly when that share of runs is);
- per-run quantities: `calls_per_run`, `tokens_per_run`, `cost_usd_per_run`, `violations`,
  `violations.<severity>` max x with `share` (a good run's own value is at most x; target `share`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Self

from pydantic import Field, field_validator, model_validator

from brownout.core.config import Model
from brownout.proxy.experiment.model import RunResult

__all__ = ["GOAL_METRICS", "GoalConfig", "is_good"]

logger = logging.getLogger(__name__)

_SEVERITIES = ("info", "warning", "error", "critical")
_RATES = ("success_rate", "error_rate", "timeout_rate")
_QUANTILES = {"p50_duration_s": 0.5, "p95_duration_s": 0.95}
_PER_RUN: dict[str, Callable[[RunResult], float]] = {
    "calls_per_run": lambda r: float(r.calls),
    "tokens_per_run": lambda r: float(r.tokens),
    "cost_usd_per_run": lambda r: r.cost_usd,
    "violations": lambda r: float(len(r.violations)),
    **{
        f"violations.{s}": (lambda sev: lambda r: float(sum(v.get("severity") == sev for v in r.violations)))(s)
        for s in _SEVERITIES
    },
}
GOAL_METRICS = (*_RATES, *_QUANTILES, *_PER_RUN)


class GoalConfig(Model):
    """What the agent promises at every level below its breaking point."""

    metric: str = Field(
        description="success_rate, error_rate, timeout_rate, p50/p95_duration_s, or a per-run quantity."
    )
    min: float | None = Field(None, description="success_rate: the least share of passed runs.")
    max: float | None = Field(None, description="The most: a rate, seconds, or a run's own value.")
    share: float | None = Field(
        None, gt=0, lt=1, description="Per-run quantities: the share of runs that must stay within max."
    )

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in GOAL_METRICS:
            raise ValueError(f"unknown goal metric {v!r}; valid: {', '.join(GOAL_METRICS)}")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        m = self.metric
        wanted = "min" if m == "success_rate" else "max"
        if getattr(self, wanted) is None or getattr(self, "max" if wanted == "min" else "min") is not None:
            raise ValueError(f"goal {m} takes {wanted} (only)")
        if m in _RATES and not 0 < getattr(self, wanted) < 1:
            raise ValueError(f"goal {m}: {wanted} must be between 0 and 1 (exclusive)")
        if m in _PER_RUN and self.share is None:
            raise ValueError(f"goal {m} is per run: give share, the share of runs that must stay within max")
        if m not in _PER_RUN and self.share is not None:
            raise ValueError(f"goal {m} is a rate or a quantile already: share is only for per-run quantities")
        if (self.max or 0) < 0:
            raise ValueError("goal max must not be negative")
        return self

    @property
    def target(self) -> float:
        """The share of good runs the goal needs."""
        if self.metric == "success_rate":
            return float(self.min or 0)
        if self.metric in ("error_rate", "timeout_rate"):
            return 1.0 - float(self.max or 0)
        return _QUANTILES.get(self.metric, self.share or 0.0)

    @property
    def label(self) -> str:
        if self.min is not None:
            return f"{self.metric} >= {self.min:g}"
        text = f"{self.metric} <= {self.max:g}"
        return text if self.share is None else f"{text} in {self.share:.0%} of runs"


def is_good(goal: GoalConfig, run: RunResult) -> bool:
    """Whether one run counts towards the goal's share."""
    m = goal.metric
    if m == "success_rate":
        return run.passed
    if m == "error_rate":
        return run.status != "error"
    if m == "timeout_rate":
        return run.status != "timeout"
    if m in _QUANTILES:
        return run.duration_s <= float(goal.max or 0)
    return _PER_RUN[m](run) <= float(goal.max or 0)
