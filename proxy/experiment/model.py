"""What an experiment produced: runs with their attributed exchanges, faults and violations."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "RUN_STATUSES",
    "STATUSES",
    "ExchangeSummary",
    "ExperimentResult",
    "PhaseRun",
    "RunResult",
    "summarize_exchange",
]

RUN_STATUSES = ("passed", "failed", "error", "timeout")
# Experiment statuses, as in Chaos Toolkit's journal.
STATUSES = ("completed", "failed", "aborted", "deviated")


@dataclass(slots=True)
class ExchangeSummary:
    """The parts of one `brownout.core.exchange.Exchange` the analysis needs (exchanges are not kept whole)."""

    provider: str
    operation: str
    status: int | None
    status_class: str
    duration_s: float | None
    input_tokens: int
    output_tokens: int
    retry_count: int
    tool: str | None
    at: float
    faults: list[dict[str, Any]] = field(default_factory=list)  # {rule, fault}
    cost_usd: float | None = None  # at list prices (genai-prices); None when not priced

    @property
    def llm(self) -> bool:
        return self.provider not in ("http", "mcp")


def summarize_exchange(ex: Any) -> ExchangeSummary:
    """Reduce an Exchange (read defensively: its model is still growing) to an ExchangeSummary."""
    usage = getattr(ex, "usage", None)
    timings = getattr(ex, "timings", None)
    cost = getattr(ex, "cost", None)
    tool = getattr(ex, "tool_name", None)
    if tool is None:
        calls = getattr(ex, "tool_calls", None) or []
        tool = calls[0].name if calls else None
    return ExchangeSummary(
        provider=str(getattr(ex, "provider", "http")),
        operation=str(getattr(ex, "operation", "http")),
        status=getattr(ex, "status", None),
        status_class=str(getattr(ex, "status_class", "")),
        duration_s=getattr(timings, "duration_s", None),
        input_tokens=int(getattr(usage, "input_tokens", None) or 0),
        output_tokens=int(getattr(usage, "output_tokens", None) or 0),
        retry_count=int(getattr(ex, "retry_count", None) or 0),
        tool=tool,
        at=float(getattr(timings, "start", 0.0) or 0.0),
        faults=[{"rule": f.rule, "fault": f.fault} for f in getattr(ex, "faults", [])],
        cost_usd=float(cost.total) if cost is not None and getattr(cost, "currency", "") == "USD" else None,
    )


@dataclass(slots=True)
class RunResult:
    """One run (all its attempts) of the agent in one phase."""

    run_id: str  # e.g. "chaos-7", also the session of its first attempt
    phase: str
    label: str  # phase label, "chaos" or "chaos#2" for repeats
    task: str
    index: int
    status: str = "error"
    attempts: int = 0
    exit_code: int | None = None
    duration_s: float = 0.0
    started_at: float = 0.0
    reason: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    sessions: list[str] = field(default_factory=list)
    exchanges: list[ExchangeSummary] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def fault_types(self) -> set[str]:
        return {f["fault"] for ex in self.exchanges for f in ex.faults}

    @property
    def calls(self) -> int:
        return len(self.exchanges)

    @property
    def llm_calls(self) -> int:
        return sum(1 for ex in self.exchanges if ex.llm)

    @property
    def tokens(self) -> int:
        return sum(ex.input_tokens + ex.output_tokens for ex in self.exchanges)

    @property
    def cost_usd(self) -> float:
        """What the run's priced exchanges cost, in US dollars."""
        return sum(ex.cost_usd or 0.0 for ex in self.exchanges)

    @property
    def priced(self) -> bool:
        return any(ex.cost_usd is not None for ex in self.exchanges)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["calls"], d["llm_calls"], d["tokens"], d["cost_usd"] = self.calls, self.llm_calls, self.tokens, self.cost_usd
        d["faults"] = [dict(f, tool=ex.tool, provider=ex.provider) for ex in self.exchanges for f in ex.faults]
        return d


@dataclass(slots=True)
class PhaseRun:
    """One execution of a phase (a phase with `repeat: 3` has three)."""

    name: str
    label: str
    repeat_index: int
    chaos: bool
    config_sha256: str
    started_at: float = 0.0
    finished_at: float = 0.0
    exchanges_seen: int = 0  # every exchange the proxy finished while it ran, in a run's session or not


@dataclass
class ExperimentResult:
    """Everything the analysis and the reports read."""

    name: str
    seed: int
    status: str = "completed"  # one of STATUSES
    abort_reason: str | None = None
    interrupted: bool = False
    started_at: float = 0.0
    finished_at: float = 0.0
    phases: list[PhaseRun] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    services: list[dict[str, Any]] = field(default_factory=list)  # ServiceRecord.to_dict() of each
