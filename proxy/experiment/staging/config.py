"""The staging experiment file: a running fleet as the target, Prometheus, timed phases, PromQL checks.

An experiment file with `target:` drives a deployment that is already running (replicas, sidecars,
workers) instead of starting an agent command: each phase's rules are laid over the fleet's for
`warmup_s + duration_s`, steady-state checks are probed from Prometheus every `probe_interval_s`,
and `abort.after_breaches` consecutive breaches pull the fleet's kill switch. Fields of the command
shape (`agent`, `services`, a phase's `repeat`, ...) are errors here, and the timed shape's fields are
errors without a target: `parse_any_experiment` says which field, and on which line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic
import yaml
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from brownout.core.config import Model
from brownout.core.state.config import REDIS_SCHEMES
from brownout.proxy.configload import ConfigError, parse_config, problems_in, yaml_data
from brownout.proxy.experiment.config import SEVERITIES, ExperimentConfig, ExperimentError, PhaseRules

__all__ = [
    "FIGURES",
    "Check",
    "PrometheusSource",
    "StagingAbort",
    "StagingExperiment",
    "StagingPhase",
    "Target",
    "parse_any_config",
    "parse_any_experiment",
]

logger = logging.getLogger(__name__)

# brownout's own figures for the fleet, read from its metrics in Prometheus over a window.
FIGURES = (
    "exchanges",
    "faults",
    "violations",
    *(f"violations.{s}" for s in SEVERITIES),
    "error_rate",
    "p50_latency_s",
    "p95_latency_s",
    "p99_latency_s",
    "cost_usd",
)
_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"
# The command shape's fields, refused with a target (what to do instead).
_COMMAND_ONLY = {
    "agent": "a staging experiment drives a running deployment and runs no agent command; its traffic is "
    "the deployment's own (users or a load generator)",
    "services": "a staging experiment starts nothing; the deployment and its load are already running",
    "upstream": "the deployment's replicas reach their upstreams themselves",
    "reproducibility": "a timed phase against live traffic is not replayed",
    "baseline": "phases without rules are the steady state; the checks' scope picks them",
    "baseline_must_succeed": "use steady_state checks with scope before",
    "weights": "a staging experiment has no runs to score",
    "invariants": "the fleet checks its own invariants; their violations are among its figures",
    "seed": "the fleet's own seed decides the phases' faults",
    "search": "a breaking-point search runs the agent command level by level; a fleet's traffic has no runs",
}


def _url(value: str, what: str, schemes: tuple[str, ...]) -> str:
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ValueError(f"{what} must start with {' or '.join(s + '://' for s in schemes)}")
    if parts.scheme.startswith("http") and (parts.username or parts.password):
        # Reports and logs name these URLs: a credential goes in token_env (Redis': state_env, hidden).
        raise ValueError(f"{what}: no user or password in the URL; give the token in token_env")
    return value


class Target(Model):
    """The running fleet: its shared store, or its replicas' control APIs."""

    state: str | None = Field(None, description="The fleet's Redis URL (its state.url): phases go into its store.")
    state_env: str | None = Field(None, pattern=_ENV, description="Variable holding that URL (a password stays out).")
    key_prefix: str = Field("brownout:", min_length=1, max_length=64, description="The fleet's state.key_prefix.")
    control: list[str] | None = Field(
        None, min_length=1, description="Control API URLs (one reaches a whole fleet on Redis; else one per replica)."
    )
    token_env: str = Field("BROWNOUT_TOKEN", pattern=_ENV, description="Variable holding the control API token.")
    lease_s: float = Field(10.0, ge=1, le=600, description="Chaos outlives a runner that dies by at most this long.")
    timeout_s: float = Field(5.0, gt=0, le=10, description="Budget of each call to the store or a control API.")
    apply_timeout_s: float = Field(
        3.0, gt=0, le=60, description="How long the replicas have to acknowledge a phase before the report says so."
    )

    @field_validator("state")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        return None if v is None else _url(v, "state", REDIS_SCHEMES)

    @field_validator("control")
    @classmethod
    def _http_urls(cls, v: list[str] | None) -> list[str] | None:
        for url in v or []:
            _url(url, "control URLs", ("http", "https"))
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> Target:
        store = self.state is not None or self.state_env is not None
        if store == (self.control is not None):
            raise ValueError("give the fleet's store (state or state_env) or its control APIs (control), one of them")
        if self.state is not None and self.state_env is not None:
            raise ValueError("give state or state_env, not both")
        return self

    def state_url(self, environ: Mapping[str, str] | None = None) -> str | None:
        env = os.environ if environ is None else environ
        return self.state or (env.get(self.state_env) if self.state_env else None) or None


class PrometheusSource(Model):
    """Where the steady state is read: the fleet's and the service's metrics in Prometheus."""

    url: str = Field(description="Prometheus' base URL (its HTTP API is under /api/v1).")
    token_env: str | None = Field(None, pattern=_ENV, description="Variable holding a bearer token, if it needs one.")
    probe_interval_s: float = Field(5.0, ge=0.2, le=600, description="Steady-state checks are probed this often.")
    window_s: float = Field(
        60.0, ge=1, le=86_400, description="A probe's window: `$window` in queries; brownout's figures over it."
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="Budget of each query.")
    settle_s: float = Field(
        10.0, ge=0, le=600, description="Wait after the last phase, before the report's queries: a scrape interval."
    )
    selector: str = Field(
        "", max_length=500, description='Label matchers on brownout\'s own metrics, e.g. job="brownout".'
    )

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        return _url(v, "url", ("http", "https")).rstrip("/")

    @field_validator("selector")
    @classmethod
    def _matchers(cls, v: str) -> str:
        if re.search(r"[{}]", v):
            raise ValueError('label matchers without braces, e.g. job="brownout", instance=~"brownout-.*"')
        return v.strip().strip(",")


class StagingPhase(PhaseRules):
    """One timed phase: rules laid over the fleet's (none: the fleet as it is) for warmup_s + duration_s."""

    name: str = Field(pattern=_NAME, description="Names the phase in metrics, rule names and reports.")
    warmup_s: float = Field(0.0, ge=0, le=3_600, description="Seconds first, not judged (SLO windows settle).")
    duration_s: float = Field(gt=0, le=86_400, description="Seconds judged after the warm-up.")


class Check(Model):
    """A steady-state check or gate: a PromQL query, or one of brownout's figures, against a threshold."""

    name: str | None = None
    metric: str = Field(description="promql (with query), or a brownout figure: " + ", ".join(FIGURES) + ".")
    query: str | None = Field(None, description="PromQL; `$window` is the window it is judged over.")
    op: Literal["<", "<=", ">", ">=", "==", "!="] = ">="
    threshold: float
    scope: Literal["always", "before", "during", "after"] = Field(
        "always", description="Phases it applies to: every one, those before the first chaos phase, chaos, after."
    )
    phase: str | None = Field(None, description="Only this phase (overrides scope).")
    no_data: Literal["skip", "breach"] = Field(
        "skip", description="A query that returns nothing: not counted (skip), or a breach."
    )

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v != "promql" and v not in FIGURES:
            raise ValueError(f"unknown metric {v!r}; valid: promql, {', '.join(FIGURES)}")
        return v

    @model_validator(mode="after")
    def _query_for_promql(self) -> Check:
        if self.metric == "promql" and not (self.query or "").strip():
            raise ValueError("metric promql needs a query")
        if self.metric != "promql" and self.query is not None:
            raise ValueError(f"query is for metric promql; {self.metric} is brownout's own figure")
        return self

    @property
    def label(self) -> str:
        what = self.query if self.metric == "promql" else self.metric
        return self.name or f"{what} {self.op} {self.threshold:g}"


class StagingAbort(Model):
    """When the runner pulls the fleet's kill switch and ends the experiment (status aborted)."""

    after_breaches: int | None = Field(
        3, ge=1, description="Consecutive breaching probes of a check in a chaos phase (null: never on checks)."
    )
    max_duration_s: float | None = Field(None, gt=0, description="Wall-clock limit for the whole experiment.")


class StagingExperiment(Model):
    """An experiment file with a target: phases switched on across a running fleet."""

    version: Literal[1] = 1
    name: str = Field("experiment", pattern=_NAME, description="Names the experiment in metrics and rule names.")
    target: Target
    prometheus: PrometheusSource
    phases: list[StagingPhase] = Field(min_length=1)
    steady_state: list[Check] = Field(default_factory=list, description="Probed every probe_interval_s.")
    abort: StagingAbort = StagingAbort()
    gate: list[Check] = Field(default_factory=list, description="Judged once per phase in scope, over the phase.")

    @model_validator(mode="after")
    def _consistent(self) -> StagingExperiment:
        names = [p.name for p in self.phases]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"phase names must be unique; duplicated: {', '.join(dupes)}")
        for check in [*self.steady_state, *self.gate]:
            if check.phase is not None and check.phase not in names:
                raise ValueError(f"check {check.label!r}: unknown phase {check.phase!r}")
        return self

    def in_scope(self, check: Check, index: int) -> bool:
        """Whether `check` applies to the phase at `index`."""
        if check.phase is not None:
            return self.phases[index].name == check.phase
        chaos = [i for i, p in enumerate(self.phases) if p.is_chaos]
        if check.scope == "always":
            return True
        if check.scope == "during":
            return self.phases[index].is_chaos
        if not chaos:
            return check.scope == "before"
        return index < chaos[0] if check.scope == "before" else index > chaos[-1]


def _misplaced(text: str, source: str, problems: list[tuple[tuple[str | int, ...], str]]) -> ConfigError:
    details: list[Any] = [
        {"type": PydanticCustomError("misplaced_field", message), "loc": loc, "input": None}
        for loc, message in problems
    ]
    return ConfigError(problems_in(text, source, pydantic.ValidationError.from_exception_data("experiment", details)))


def _shape_problems(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    raw = data.get("phases")
    phases: list[Any] = raw if isinstance(raw, list) else []
    out: list[tuple[tuple[str | int, ...], str]] = []
    if "target" in data:
        out += [((key,), f"not with a target: {why}") for key, why in _COMMAND_ONLY.items() if key in data]
        out += [
            (("phases", i, "repeat"), "not with a target: a timed phase runs once; add another phase to repeat it")
            for i, p in enumerate(phases)
            if isinstance(p, dict) and "repeat" in p
        ]
        return out
    timed = "needs a target: only an experiment that drives a running deployment has timed phases"
    out += [
        (("phases", i, key), timed)
        for i, p in enumerate(phases)
        if isinstance(p, dict)
        for key in ("duration_s", "warmup_s")
        if key in p
    ]
    if "prometheus" in data:
        out.append((("prometheus",), "needs a target: the steady state of a running deployment is read there"))
    if "agent" not in data:
        out.append((("agent",), "required: the agent command the experiment runs (or a target: a running deployment)"))
    return out


def parse_any_config(text: str, source: str = "<experiment>") -> ExperimentConfig | StagingExperiment:
    """Validate an experiment file of either shape (with `target:` a staging one); ConfigError naming each
    bad field and its line, a field of the other shape included."""
    try:
        data = yaml_data(text)
    except (yaml.YAMLError, ValueError):
        data = None  # parse_config reports it, with its line
    if isinstance(data, dict):
        problems = _shape_problems(data)
        if problems:
            raise _misplaced(text, source, problems)
        if "target" in data:
            return parse_config(text, source, model=StagingExperiment)
    return parse_config(text, source, model=ExperimentConfig)


def parse_any_experiment(text: str, source: str = "<experiment>") -> ExperimentConfig | StagingExperiment:
    """`parse_any_config`, raising ExperimentError as `parse_experiment` does."""
    try:
        return parse_any_config(text, source)
    except ConfigError as e:
        raise ExperimentError(str(e)) from e
