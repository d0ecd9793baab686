"""Steady-state hypotheses, the gate, and the experiment's final status and exit code.

Status (Chaos Toolkit's journal): `aborted` when an abort condition or Ctrl-C ended it;
`failed` when it errored or the steady state did not hold before the chaos; `deviated` when a
hypothesis failed during or after the chaos; else `completed`.
Exit codes: 0 completed and the gate passed; 1 failed/deviated or the gate failed; 2 errored or aborted.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any

from brownout.proxy.experiment.config import BASELINE_PROXIED, ExperimentConfig, Hypothesis
from brownout.proxy.summary import BYPASS_CAUSES

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_PASSED",
    "OPS",
    "check_hypotheses",
    "evaluate_gate",
    "metric_value",
    "verdict",
]

logger = logging.getLogger(__name__)

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2

# What a failed implicit hypothesis means, for the summary and the JSON report.
_NOTES = {BASELINE_PROXIED: f"no request of the agent reached brownout; {BYPASS_CAUSES}"}

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def metric_value(phase: dict[str, Any], metric: str) -> float | None:
    """A hypothesis metric read from one phase entry of `analyze()`."""
    if metric.startswith("violations."):
        return float(phase["violations"]["by_severity"].get(metric.split(".", 1)[1], 0))
    if metric == "violations":
        return float(phase["violations"]["total"])
    if metric in ("p50_duration_s", "p95_duration_s"):
        return phase["duration_s"][metric[:3]]
    value = phase.get(metric)
    return None if value is None else float(value)


def _in_scope(h: Hypothesis, phases: list[dict[str, Any]], config: ExperimentConfig) -> list[dict[str, Any]]:
    if h.phase is not None:
        return [p for p in phases if p["name"] == h.phase]
    chaos_idx = [i for i, p in enumerate(config.phases) if p.is_chaos]
    order = {p.name: i for i, p in enumerate(config.phases)}
    if not chaos_idx:
        return phases if h.scope == "before" else []
    first, last = chaos_idx[0], chaos_idx[-1]
    pick = {
        "before": lambda i: i < first,
        "during": lambda i: config.phases[i].is_chaos,
        "after": lambda i: i > last,
    }[h.scope]
    return [p for p in phases if pick(order[p["name"]])]


def check_hypotheses(
    config: ExperimentConfig, phases: list[dict[str, Any]], scopes: tuple[str, ...] = ("before", "during", "after")
) -> list[dict[str, Any]]:
    """Each hypothesis in `scopes` checked on its phases; ok is None when no phase ran in scope."""
    out = []
    for h in config.hypotheses():
        if h.phase is None and h.scope not in scopes:
            continue
        checks = []
        for p in _in_scope(h, phases, config):
            if not p["runs"]:
                continue
            value = metric_value(p, h.metric)
            ok = value is not None and OPS[h.op](value, h.threshold)
            checks.append({"label": p["label"], "value": value, "ok": ok})
        held = all(c["ok"] for c in checks) if checks else None
        out.append(
            {
                "hypothesis": h.label,
                "metric": h.metric,
                "op": h.op,
                "threshold": h.threshold,
                "scope": "phase" if h.phase else h.scope,
                "phase": h.phase,
                "ok": held,
                "checks": checks,
                **({"note": _NOTES[h.label]} if held is False and h.label in _NOTES else {}),
            }
        )
    return out


def evaluate_gate(config: ExperimentConfig, analysis: dict[str, Any]) -> dict[str, Any]:
    """The gate's checks; a check whose value could not be measured fails (a gate never passes blind)."""
    g = config.gate
    checks: list[dict[str, Any]] = []

    def add(name: str, value: float | None, threshold: float, at_least: bool, note: str = "") -> None:
        ok = value is not None and (value >= threshold if at_least else value <= threshold)
        checks.append(
            {"check": name, "value": value, "threshold": threshold, "ok": ok, "note": note if value is None else ""}
        )

    pooled = analysis["chaos_pooled"]
    if g.min_success_rate is not None:
        add("min_success_rate", pooled["rate"], g.min_success_rate, True, "no chaos-phase runs")
    if g.min_robustness is not None:
        add("min_robustness", analysis["robustness"]["score"], g.min_robustness, True, "no chaos-phase run met a fault")
    totals = analysis["violations_total"]
    for sev, limit in sorted(g.max_violations.items()):
        add(f"max_violations.{sev}", float(totals.get(sev, 0)), limit, False)
    if g.max_success_drop is not None:
        drop = pooled.get("vs_baseline", {}).get("drop")
        add("max_success_drop", drop, g.max_success_drop, False, "no baseline or no chaos runs")
    return {"passed": all(c["ok"] for c in checks), "checks": checks}


def verdict(status: str, error: str | None, hypotheses: list[dict[str, Any]], gate: dict[str, Any]) -> tuple[str, int]:
    """Final (status, exit code) from the runner's status, the hypotheses and the gate."""
    if status == "aborted" or error:
        return ("aborted" if status == "aborted" else "failed"), EXIT_ERROR
    if any(h["ok"] is False and h["scope"] == "before" for h in hypotheses):
        return "failed", EXIT_FAILED
    if any(h["ok"] is False for h in hypotheses):
        return "deviated", EXIT_FAILED
    return "completed", (EXIT_PASSED if gate["passed"] else EXIT_FAILED)
