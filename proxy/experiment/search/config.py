"""The experiment file's `search:` section: one rule, one numeric parameter of it, a range, a goal.

The rule is validated at both ends of the range, with the parameter set, as the chaos config it becomes
at each level; the parameter must be a numeric field of the rule (`fault.delay_ms`,
`schedule.probability`, `fault.after_events`, ...).
"""

from __future__ import annotations

import copy
import logging
import types
import typing
from typing import Any, Literal, Self

import pydantic
from pydantic import Field, ValidationInfo, field_validator, model_validator

from brownout.core.config import Model
from brownout.faults.config import RuleConfig
from brownout.proxy.experiment.search.goal import GoalConfig

__all__ = ["SearchConfig", "SearchGate", "numeric_kind", "rule_at"]

logger = logging.getLogger(__name__)


class SearchGate(Model):
    """Exit 1 unless the breaking point is known, at the confidence asked, to be on the right side of a value."""

    min_breaking_point: float | None = Field(
        None, description="Pass when the interval's lower end is at or above this (the agent survives up to it)."
    )
    max_breaking_point: float | None = Field(
        None, description="Pass when the interval's upper end is at or below this (for `harsher: lower`)."
    )


def rule_at(rule: dict[str, Any], parameter: str, value: float) -> dict[str, Any]:
    """A copy of the rule with the dotted `parameter` set to `value` (missing mappings are created)."""
    out = copy.deepcopy(rule)
    node = out
    *parents, last = parameter.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[last] = int(value) if float(value).is_integer() else value
    return out


def numeric_kind(rule: RuleConfig, parameter: str) -> Literal["int", "float"] | None:
    """Whether the field `parameter` of a validated rule holds an int or a float; None when it is not numeric."""
    obj: Any = rule
    *parents, last = parameter.split(".")
    for key in parents:
        obj = getattr(obj, key, None)
        if not isinstance(obj, pydantic.BaseModel):
            return None
    field = type(obj).model_fields.get(last)
    if field is None:
        return None
    annotation = field.annotation
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if float in options:
        return "float"
    if int in options and bool not in options:
        return "int"
    return None


class SearchConfig(Model):
    """Find the value of one rule parameter at which the agent stops meeting its goal."""

    rule: dict[str, Any] = Field(description="The chaos rule, as in a config; its `parameter` is set at each level.")
    parameter: str = Field(
        description="Dotted path of a numeric field of the rule: fault.delay_ms, schedule.probability."
    )
    range: tuple[float, float] = Field(description="[low, high] of the parameter.")
    scale: Literal["linear", "log"] = Field("linear", description="Bisect arithmetically or geometrically.")
    harsher: Literal["higher", "lower"] = Field(
        "higher",
        description="Which way the fault gets harsher: higher (latency, probability) or lower (a cut after fewer events).",
    )
    resolution: float | None = Field(
        None,
        gt=0,
        description="Stop refining below this: parameter units with a linear scale (default: a fiftieth of the "
        "range), a ratio with a log one (default 0.05, 5%).",
    )
    goal: GoalConfig
    confidence: float = Field(
        0.95, gt=0.5, lt=1, description="Of the interval, and 1 - the error rate of each level's test."
    )
    tolerance: float = Field(
        0.05, gt=0, lt=0.5, description="Half-width of the indifference zone around the goal's share of good runs."
    )
    max_runs: int = Field(200, ge=2, le=100_000, description="The budget of agent runs.")
    batch: int | None = Field(None, ge=1, le=256, description="Runs per batch at a level (default: agent.concurrency).")
    gate: SearchGate = SearchGate()

    @field_validator("parameter")
    @classmethod
    def _dotted(cls, v: str) -> str:
        if not v or any(not part.isidentifier() for part in v.split(".")):
            raise ValueError("parameter is a dotted path of field names, e.g. fault.delay_ms")
        return v

    @field_validator("range")
    @classmethod
    def _rule_at_both_ends(cls, v: tuple[float, float], info: ValidationInfo) -> tuple[float, float]:
        low, high = v
        if not low < high:
            raise ValueError(f"low ({low:g}) must be below high ({high:g})")
        rule, parameter = info.data.get("rule"), info.data.get("parameter")
        if rule is None or parameter is None:
            return v  # reported at their own fields
        for x in (low, high):
            _kind_at(rule, parameter, x)  # an integer field refuses a fractional end itself
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        low, high = self.range
        if self.scale == "log" and low < 0:
            raise ValueError("range: a log scale needs a range of values from 0 up")
        if self.resolution is not None and self.scale == "linear" and self.resolution >= high - low:
            raise ValueError(f"resolution ({self.resolution:g}) must be smaller than the range ({high - low:g})")
        return self

    @property
    def integer(self) -> bool:
        return _kind_at(self.rule, self.parameter, self.range[0]) == "int"


def _kind_at(rule: dict[str, Any], parameter: str, value: float) -> Literal["int", "float"]:
    """The parameter's kind, validating the rule with it set to `value` (ValueError naming what is wrong)."""
    try:
        validated = RuleConfig.model_validate(rule_at(rule, parameter, value))
    except pydantic.ValidationError as e:
        where = lambda err: ".".join(str(p) for p in err["loc"]) or "rule"
        problems = "; ".join(f"{where(err)}: {err['msg']}" for err in e.errors())
        raise ValueError(f"the rule with {parameter} = {value:g}: {problems}") from None
    kind = numeric_kind(validated, parameter)
    if kind is None:
        raise ValueError(f"{parameter} is not a numeric field of this {validated.fault_type} rule")
    return kind
