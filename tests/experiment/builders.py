"""Hand-built experiment results with known statistics."""

from __future__ import annotations

from typing import Any

from brownout.proxy.experiment.config import ExperimentConfig
from brownout.proxy.experiment.model import ExchangeSummary, ExperimentResult, PhaseRun, RunResult

__all__ = ["config", "exchange", "fixture_result", "run"]


def exchange(
    *,
    faults: tuple[str, ...] = (),
    retry: int = 0,
    tokens: int = 10,
    tool: str | None = None,
    at: float = 0.0,
    provider: str = "openai",
    cost: float | None = None,
) -> ExchangeSummary:
    return ExchangeSummary(
        provider=provider,
        operation="chat",
        status=200,
        status_class="2xx",
        duration_s=0.1,
        input_tokens=tokens,
        output_tokens=0,
        retry_count=retry,
        tool=tool,
        at=at,
        faults=[{"rule": f"r-{f}", "fault": f} for f in faults],
        cost_usd=cost,
    )


def run(
    label: str,
    i: int,
    status: str,
    exchanges: list[ExchangeSummary] | None = None,
    violations: list[dict[str, Any]] | None = None,
    duration: float = 1.0,
) -> RunResult:
    return RunResult(
        run_id=f"{label}-{i}",
        phase=label.split(".")[0],
        label=label,
        task="t",
        index=i,
        status=status,
        attempts=1,
        duration_s=duration,
        started_at=100.0 + i,
        sessions=[f"{label}-{i}"],
        exchanges=exchanges or [exchange()],
        violations=violations or [],
    )


def config(**extra: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "name": "fixture",
        "agent": {"command": ["true"]},
        "phases": [
            {"name": "baseline"},
            {"name": "chaos", "rules": [{"name": "x", "fault": {"type": "latency", "delay_ms": 1}}]},
        ],
    }
    data.update(extra)
    return ExperimentConfig.model_validate(data)


def fixture_result() -> ExperimentResult:
    """Baseline 10 runs, 10 passed; chaos 10 runs, 8 passed.

    Chaos runs 1-4 met http_error (run 4 failed), runs 5-6 met reset (run 6 failed), runs 7-10 met nothing.
    Run 1: a 429 then a retry of 5 tokens. Durations 1..10 s in both phases.
    Every token costs $0.0001; an exchange answered by a fault before upstream has no cost.
    """
    base = [
        run("baseline", i, "passed", [exchange(cost=1e-3), exchange(cost=1e-3)], duration=float(i))
        for i in range(1, 11)
    ]
    chaos = []
    for i in range(1, 11):
        if i <= 4:
            exs = [
                exchange(faults=("http_error",), tokens=0, tool="get_weather", at=1.0),
                exchange(retry=1, tokens=5, at=2.0, cost=5e-4),
                exchange(at=3.0, cost=1e-3),
            ]
        elif i <= 6:
            exs = [exchange(faults=("reset",), tokens=0, at=1.0)]
        else:
            exs = [exchange(cost=1e-3), exchange(cost=1e-3)]
        status = "failed" if i in (4, 6) else "passed"
        viol = (
            [{"invariant": "retry_discipline", "severity": "error", "message": "m", "timestamp": 105.0}]
            if i == 4
            else []
        )
        chaos.append(run("chaos", i, status, exs, viol, duration=float(i)))
    return ExperimentResult(
        name="fixture",
        seed=1,
        started_at=100.0,
        finished_at=130.0,
        phases=[
            PhaseRun("baseline", "baseline", 1, False, "a", exchanges_seen=sum(len(r.exchanges) for r in base)),
            PhaseRun("chaos", "chaos", 1, True, "b", exchanges_seen=sum(len(r.exchanges) for r in chaos)),
        ],
        runs=base + chaos,
    )
