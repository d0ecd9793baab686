"""The reproducibility metric: run every phase k times and count the runs that came out the same each time.

A run is reproducible when, in every repeat, it ended the same way (status and exit code) and its
sessions saw the same fault decisions (rule, outcome, fault type, per-session match index, in order).
Each repeat runs in a fresh proxy with the same seed and the same session names, so the decisions
depend only on what the agent sends: on replay a deterministic agent scores 1.0, and a run that
differs is named with the first place where it did.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from brownout.proxy.experiment.model import ExperimentResult, RunResult

__all__ = ["Pass", "reproducibility"]

Pass = tuple[ExperimentResult, list[dict[str, Any]]]  # one execution of every phase, and its decision log


def _decision_logs(decisions: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    by_session: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for d in decisions:
        by_session[str(d.get("session"))].append((d.get("rule"), d.get("outcome"), d.get("fault"), d.get("index")))
    return by_session


def _signature(run: RunResult, logs: dict[str, list[tuple[Any, ...]]]) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    outcome = (run.status, run.exit_code)
    return outcome, [entry for session in run.sessions for entry in logs.get(session, [])]


def _where(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    (out_a, log_a), (out_b, log_b) = a, b
    if out_a != out_b:
        return f"outcome {out_a[0]} (exit {out_a[1]}) -> {out_b[0]} (exit {out_b[1]})"
    for i, (x, y) in enumerate(zip(log_a, log_b, strict=False)):
        if x != y:
            return f"decision {i + 1}: rule {x[0]} {x[1]} -> rule {y[0]} {y[1]}"
    return f"{len(log_a)} decisions -> {len(log_b)}"


def reproducibility(passes: list[Pass]) -> dict[str, Any]:
    """The metric over passes of the same experiment (the first is the reported one)."""
    signatures = []
    for result, decisions in passes:
        logs = _decision_logs(decisions)
        signatures.append({run.run_id: (run.label, _signature(run, logs)) for run in result.runs})
    first = signatures[0]
    phases: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    differing: list[dict[str, Any]] = []
    for run_id, (label, sig) in first.items():
        phases[label][1] += 1
        diff = None
        for repeat, other in enumerate(signatures[1:], start=2):
            theirs = other.get(run_id)
            if theirs is None:
                diff = {"run": run_id, "repeat": repeat, "where": "did not run"}
            elif theirs[1] != sig:
                diff = {"run": run_id, "repeat": repeat, "where": _where(sig, theirs[1])}
            if diff is not None:
                break
        if diff is None:
            phases[label][0] += 1
        else:
            differing.append(diff)
    total = sum(n for _, n in phases.values())
    same = sum(k for k, _ in phases.values())
    return {
        "repeats": len(passes),
        "score": same / total if total else None,
        "phases": [{"phase": p, "runs": n, "identical": k, "fraction": k / n} for p, (k, n) in phases.items()],
        "differing": differing,
    }
