"""The experiment file: services, agent, phases, steady-state hypotheses, abort conditions, gate, weights.

Validated once at load with pydantic (`extra="forbid"`); errors name the field and line through
`proxy.configload`'s machinery when it is available.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from brownout.core.config import Model
from brownout.proxy.configload import ConfigError, parse_config
from brownout.proxy.experiment.search.config import SearchConfig
from brownout.proxy.experiment.upstream import ReproducibilityConfig, UpstreamConfig

__all__ = [
    "BASELINE_WORKS",
    "DEFAULT_WEIGHTS",
    "METRICS",
    "SEVERITIES",
    "AbortConfig",
    "AgentConfig",
    "ExperimentConfig",
    "ExperimentError",
    "GateConfig",
    "Hypothesis",
    "PhaseConfig",
    "PhaseRules",
    "ReadyCheck",
    "ServiceConfig",
    "SuccessConfig",
    "TasksFile",
    "load_experiment",
    "parse_experiment",
]

logger = logging.getLogger(__name__)

SEVERITIES = ("info", "warning", "error", "critical")
BASELINE_WORKS = "the agent succeeds at least once before the chaos"  # baseline_must_succeed's hypotheses
BASELINE_PROXIED = "the agent's requests reach brownout before the chaos"

# Difficulty of surviving each fault type, for the robustness score. Latency only slows an agent
# down; error answers need a retry; broken connections and corrupted content need real recovery.
# Keys are the built-in fault types plus "quota" (a quota rule's own 429).
DEFAULT_WEIGHTS: dict[str, float] = {
    "latency": 0.5,
    "throttle": 0.5,
    "stall": 0.75,
    "http_error": 1.0,
    "quota": 1.0,
    "empty": 1.0,
    "hang": 1.5,
    "reset": 1.5,
    "truncate": 1.5,
    "malformed_json": 2.0,  # a body, an SSE frame or tool-call arguments that no longer parse
    "inject": 2.0,  # prompt injection into a tool output or completion
    "rug_pull": 2.0,  # an MCP server whose tools change under the agent, or carry instructions
    "mutate": 1.5,  # a request the model sees changed: typos, a planted instruction, lost or reordered history
    # Realtime WebSocket sessions: a closed session must be reopened (and resumed), a lost event noticed.
    "close": 1.5,
    "drop": 1.5,
    "duplicate": 1.0,
    "rate_limits": 1.0,
    # MCP: a refused request is an error answer to handle; a lost session or server must be rebuilt.
    "header_mismatch": 1.0,
    "unsupported_version": 1.0,
    "session_expired": 1.5,
    "server_gone": 1.5,
}

METRICS = (
    "success_rate",
    "error_rate",
    "timeout_rate",
    "p50_duration_s",
    "p95_duration_s",
    "calls_per_run",
    "tokens_per_run",
    "cost_usd_per_run",
    "faults",
    "exchanges",
    "violations",
    *(f"violations.{s}" for s in SEVERITIES),
)

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_PORT = re.compile(r"^\[?[^\s/\]]+\]?:(\d{1,5}|\{port\})$")


class ExperimentError(ValueError):
    """An experiment file that cannot be used; the message names the field (and line when known)."""


class SuccessConfig(Model):
    """How a run's success is judged; every given criterion must hold."""

    exit_code: int | None = Field(0, description="Required exit code (null: any).")
    stdout_regex: str | None = Field(None, description="Python regex searched in the run's stdout.")
    check: str | list[str] | None = Field(
        None, description="Command run after the agent (same env, plus BROWNOUT_STDOUT_FILE); exit 0 means success."
    )

    @field_validator("stdout_regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            re.compile(v)  # re.error is a ValueError: pydantic reports it on this field
        return v


class TasksFile(Model):
    """Tasks read from a file, one per non-empty line."""

    file: str


class AgentConfig(Model):
    """The agent under test and how to run it."""

    command: str | list[str] = Field(
        description="argv list, or a shell string; placeholders {run}, {task}, {phase}, {python}."
    )
    tasks: list[str] | TasksFile = Field(default_factory=lambda: [""], description="Inputs, or {file: path}.")
    runs_per_task: int = Field(1, ge=1)
    concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0, description="Wall-clock limit per run attempt.")
    retries: int = Field(0, ge=0, le=10, description="Extra attempts for a run that did not pass.")
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = Field(None, description="Working directory (default: the experiment file's directory).")
    success: SuccessConfig = SuccessConfig()

    @field_validator("command")
    @classmethod
    def _non_empty(cls, v: str | list[str]) -> str | list[str]:
        if not v or (isinstance(v, str) and not v.strip()):
            raise ValueError("command must not be empty")
        return v


class ReadyCheck(Model):
    """When a service counts as ready: a TCP port accepts connections, or an HTTP URL answers 2xx/3xx."""

    tcp: str | None = Field(None, description='"host:port" that must accept a connection, e.g. "127.0.0.1:{port}".')
    http: str | None = Field(None, description="URL that must answer 2xx or 3xx, polled directly (no proxy).")
    timeout_s: float = Field(30.0, gt=0, le=600, description="Give up (and fail the experiment) after this long.")
    interval_s: float = Field(0.1, gt=0, le=10, description="Pause between probes.")

    @field_validator("tcp")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is not None and not _HOST_PORT.match(v):
            raise ValueError('tcp must be "host:port" (the port may be {port})')
        return v

    @field_validator("http")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("http must be an http:// or https:// URL")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> ReadyCheck:
        if (self.tcp is None) == (self.http is None):
            raise ValueError("give exactly one of tcp or http")
        return self


class ServiceConfig(Model):
    """A process the experiment needs (a mock upstream, a tool server), up from the first phase to the last."""

    name: str = Field(description="Names the service in errors and reports, and its log file service-NAME.log.")
    command: str | list[str] = Field(
        description="argv list, or a shell string; placeholders {python} and {port} (a free port picked for it)."
    )
    ready: ReadyCheck
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the service; {port} filled.")
    export: dict[str, str] = Field(
        default_factory=dict,
        description="Variables set for the agent runs and the services after this one; {port} filled.",
    )
    cwd: str | None = Field(None, description="Working directory (default: the experiment file's directory).")
    stop_timeout_s: float = Field(5.0, ge=0, le=120, description="Wait after SIGTERM before SIGKILL.")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("service names use letters, digits, '_', '.', '-' (at most 64)")
        return v

    @field_validator("command")
    @classmethod
    def _non_empty(cls, v: str | list[str]) -> str | list[str]:
        if not v or (isinstance(v, str) and not v.strip()):
            raise ValueError("command must not be empty")
        return v

    @field_validator("env", "export")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
        return v

    @property
    def uses_port(self) -> bool:
        texts = [self.command] if isinstance(self.command, str) else list(self.command)
        texts += [*self.env.values(), *self.export.values(), self.ready.tcp or "", self.ready.http or ""]
        return any("{port}" in t for t in texts)


class PhaseRules(Model):
    """What a phase applies: a chaos config file or inline rules (neither: the rules as they are)."""

    config: str | None = Field(None, description="Path of a brownout chaos config, relative to the experiment file.")
    rules: list[dict[str, Any]] | None = Field(None, description="Inline rules, as in a chaos config.")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.config is not None and self.rules is not None:
            raise ValueError("give config or rules, not both")
        return self

    @property
    def is_chaos(self) -> bool:
        return self.config is not None or bool(self.rules)


class PhaseConfig(PhaseRules):
    """One phase: a chaos config file or inline rules (neither: a baseline with no faults)."""

    name: str
    repeat: int = Field(1, ge=1, le=100, description="Run the phase this many times (trend points).")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        # The name becomes part of each run's session id and proxy username.
        if not _NAME.match(v):
            raise ValueError("phase names use letters, digits, '_', '.', '-' (at most 64)")
        return v


class Hypothesis(Model):
    """A steady-state hypothesis: `metric op threshold`, checked on the phases in its scope."""

    name: str | None = None
    metric: str
    op: Literal["<", "<=", ">", ">=", "==", "!="] = ">="
    threshold: float
    scope: Literal["before", "during", "after"] = Field(
        "before", description="before: phases ahead of the first chaos phase; during: chaos phases; after: the rest."
    )
    phase: str | None = Field(None, description="Check only this phase (overrides scope).")

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in METRICS:
            raise ValueError(f"unknown metric {v!r}; valid: {', '.join(METRICS)}")
        return v

    @property
    def label(self) -> str:
        return self.name or f"{self.metric} {self.op} {self.threshold:g}"


class AbortConfig(Model):
    """Conditions that stop injection and end the experiment early (status aborted, exit 2)."""

    max_critical_violations: int | None = Field(None, ge=0, description="Abort when critical violations exceed this.")
    min_success_rate: float | None = Field(
        None, ge=0, le=1, description="Abort when a phase's success rate falls below ..."
    )
    after_runs: int = Field(5, ge=1, description="... once it has finished this many runs.")
    max_duration_s: float | None = Field(None, gt=0, description="Wall-clock limit for the whole experiment.")


class GateConfig(Model):
    """Thresholds that decide the exit code (0 passed, 1 failed)."""

    min_success_rate: float | None = Field(None, ge=0, le=1, description="Pooled success rate of the chaos phases.")
    min_robustness: float | None = Field(None, ge=0, le=1)
    max_violations: dict[Literal["info", "warning", "error", "critical"], int] = Field(default_factory=dict)
    max_success_drop: float | None = Field(None, ge=0, le=1, description="Baseline rate minus pooled chaos rate.")


class ExperimentConfig(Model):
    """The whole experiment file."""

    version: Literal[1] = 1
    name: str = "experiment"
    seed: int = 0
    services: list[ServiceConfig] = Field(
        default_factory=list,
        description="Processes started (in order, each waited for) before the first phase, stopped after the last.",
    )
    upstream: UpstreamConfig = Field(
        default_factory=UpstreamConfig, description="Live (default), or `replay:` a cassette directory."
    )
    reproducibility: ReproducibilityConfig = Field(default_factory=ReproducibilityConfig)
    baseline: str | None = Field(None, description="The baseline phase (default: the first phase without faults).")
    agent: AgentConfig
    # Before phases: a file with a search needs no phases (the phases' validator reads it).
    search: SearchConfig | None = Field(
        None, description="A breaking-point search over one rule parameter, run by `brownout experiment search`."
    )
    phases: list[PhaseConfig] = Field(
        default_factory=list,
        validate_default=True,
        description="Run by `experiment run`; a file with a `search:` may have none.",
    )
    steady_state: list[Hypothesis] = Field(default_factory=list)
    baseline_must_succeed: bool = Field(
        True,
        description="Implicit steady-state hypotheses: every phase before the chaos has at least one "
        "successful run, and its runs sent at least one request through brownout. When one has none, the agent "
        "fails even without faults (a wrong command, a missing key, an upstream down) or goes around the proxy "
        "(a client that ignores HTTP(S)_PROXY): the chaos phases are skipped and the status is failed, whatever "
        "the gate says.",
    )
    abort: AbortConfig = AbortConfig()
    gate: GateConfig = GateConfig()
    weights: dict[str, float] = Field(
        default_factory=dict, description="Robustness weight per fault type (merged over the defaults)."
    )
    invariants: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Invariants checked in every phase (baseline too), ahead of a phase config's own.",
    )

    @field_validator("phases")
    @classmethod
    def _phases_or_search(cls, v: list[PhaseConfig], info: ValidationInfo) -> list[PhaseConfig]:
        if not v and "search" in info.data and info.data["search"] is None:
            raise ValueError("give at least one phase (for `experiment run`), or a search: (for `experiment search`)")
        return v

    @model_validator(mode="after")
    def _phases_consistent(self) -> ExperimentConfig:
        names = [p.name for p in self.phases]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"phase names must be unique; duplicated: {', '.join(dupes)}")
        services = [s.name for s in self.services]
        dupes = sorted({n for n in services if services.count(n) > 1})
        if dupes:
            raise ValueError(f"service names must be unique; duplicated: {', '.join(dupes)}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a phase")
        for h in self.steady_state:
            if h.phase is not None and h.phase not in names:
                raise ValueError(f"steady_state {h.label!r}: unknown phase {h.phase!r}")
        return self

    def hypotheses(self) -> list[Hypothesis]:
        """`steady_state`, then the implicit ones of `baseline_must_succeed`."""
        if not self.baseline_must_succeed:
            return list(self.steady_state)
        # No phase before the chaos (or no chaos phase at all): nothing in scope, they never fail.
        works = Hypothesis(name=BASELINE_WORKS, metric="success_rate", op=">", threshold=0, scope="before")
        proxied = Hypothesis(name=BASELINE_PROXIED, metric="exchanges", op=">", threshold=0, scope="before")
        return [*self.steady_state, works, proxied]

    @property
    def baseline_phase(self) -> str | None:
        if self.baseline is not None:
            return self.baseline
        return next((p.name for p in self.phases if not p.is_chaos), None)

    def weight_table(self) -> dict[str, float]:
        return {**DEFAULT_WEIGHTS, **self.weights}


def parse_experiment(text: str, source: str = "<experiment>") -> ExperimentConfig:
    """Validate experiment YAML; raises ExperimentError with one `source:line: field: message` per problem."""
    try:
        return parse_config(text, source, model=ExperimentConfig)
    except ConfigError as e:
        raise ExperimentError(str(e)) from e


def load_experiment(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ExperimentError(f"{p}: {e.strerror or e}") from e
    return parse_experiment(text, str(p))
