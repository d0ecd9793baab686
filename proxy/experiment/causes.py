"""Violations grouped by invariant: what a report shows as the cause of a phase's or a run's failures."""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from brownout.proxy.experiment.config import SEVERITIES

__all__ = [
    "LINKED_RUNS",
    "MESSAGE_CHARS",
    "cut",
    "group_violations",
    "run_anchor",
    "run_positions",
    "runs_with_violations",
    "severity_text",
    "violations_anchor",
]

logger = logging.getLogger(__name__)

_RANK = {s: i for i, s in enumerate(SEVERITIES)}
MESSAGE_CHARS = 200  # of a violation message in a report's table; report.json keeps it whole
LINKED_RUNS = 5  # runs linked from one row of a report's violations table


def _when(violation: dict[str, Any]) -> float:
    t = violation.get("timestamp")
    return float(t) if isinstance(t, (int, float)) and math.isfinite(t) else math.inf


def group_violations(found: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(run id, violation dict) pairs, grouped by invariant, the most severe and then the most frequent first.

    Each group: `invariant`, `count`, `severity` (the worst seen), `by_severity`, `first_message` and
    `first_run` (of the earliest violation; ties keep the order given) and `runs` (each run once, in order).
    """
    groups: dict[str, dict[str, Any]] = {}
    for seq, (run_id, v) in enumerate(found):
        name = str(v.get("invariant", "?"))
        severity = str(v.get("severity", "error"))
        key = (_when(v), seq)
        g = groups.get(name)
        if g is None:
            g = groups[name] = {"severities": Counter(), "runs": {}, "first": (key, v, run_id)}
        g["severities"][severity] += 1
        g["runs"].setdefault(run_id, None)
        if key < g["first"][0]:
            g["first"] = (key, v, run_id)
    out = []
    for name, g in groups.items():
        by_sev: Counter[str] = g["severities"]
        ordered = sorted(by_sev, key=lambda s: (-_RANK.get(s, -1), s))
        _, first, first_run = g["first"]
        out.append(
            {
                "invariant": name,
                "count": sum(by_sev.values()),
                "severity": ordered[0],
                "by_severity": {s: by_sev[s] for s in ordered},
                "first_message": str(first.get("message", "")),
                "first_run": first_run,
                "runs": list(g["runs"]),
            }
        )
    return sorted(out, key=lambda g: (-_RANK.get(g["severity"], -1), -g["count"], g["invariant"]))


def run_anchor(position: int) -> str:
    """The fragment id of the run at this position of the report's runs (never built from names the agent chose)."""
    return f"run-{position + 1}"


def violations_anchor(position: int) -> str:
    """The fragment id of that run's violations."""
    return f"{run_anchor(position)}-violations"


def run_positions(report: dict[str, Any]) -> dict[str, int]:
    """Run id -> its position in the report's runs (the first, should two share an id)."""
    out: dict[str, int] = {}
    for i, r in enumerate(report["runs"]):
        out.setdefault(str(r["run_id"]), i)
    return out


def runs_with_violations(report: dict[str, Any]) -> list[tuple[int, dict[str, Any], list[dict[str, Any]]]]:
    """(position, run, its violations grouped by invariant) for every run that has a violation, in report order."""
    return [
        (i, r, group_violations((str(r["run_id"]), v) for v in r["violations"]))
        for i, r in enumerate(report["runs"])
        if r.get("violations")
    ]


def severity_text(group: dict[str, Any]) -> str:
    """`error`, or `error 2, warning 1` when a group mixes severities."""
    by_sev = group["by_severity"]
    return group["severity"] if len(by_sev) == 1 else ", ".join(f"{s} {n}" for s, n in by_sev.items())


def cut(text: Any, limit: int = MESSAGE_CHARS) -> str:
    """One line of at most `limit` characters, an ellipsis marking a cut."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
