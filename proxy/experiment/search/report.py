"""report.json of a search (`"kind": "search"`): the breaking point, its interval, every level, the grid.

Values are the parameter's own (milliseconds for `fault.delay_ms`); an interval end that is not known
(beyond the range) is null. The gate reads the interval, never the estimate alone: `min_breaking_point`
passes when the interval's lower end is at or above it, so the goal holds there at the confidence asked.
"""

from __future__ import annotations

import logging
from typing import Any

from brownout.proxy.experiment.config import ExperimentConfig
from brownout.proxy.experiment.model import ExperimentResult
from brownout.proxy.experiment.report_json import report_header
from brownout.proxy.experiment.search.algorithm import SearchResult
from brownout.proxy.experiment.search.config import SearchConfig
from brownout.proxy.experiment.search.runner import level_label, make_search
from brownout.proxy.experiment.search.scale import Scale
from brownout.proxy.experiment.stats import wilson_interval
from brownout.proxy.experiment.verdict import EXIT_ERROR, EXIT_FAILED, EXIT_PASSED

__all__ = ["build_search_report", "outcome_text", "value_text"]

logger = logging.getLogger(__name__)

Interval = tuple[float | None, float | None]


def value_text(x: float | None) -> str:
    """A parameter's value in the reports: whole from 1,000 up (10780, not 1.078e+04), else 4 digits."""
    if x is None:
        return "…"
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _interval(search: SearchResult, scale: Scale) -> tuple[float | None, Interval]:
    """(estimate, [low, high]) in the parameter's values; None where the range ends the knowledge."""
    higher = scale.harsher == "higher"
    if search.outcome == "holds_across_range":  # the breaking point is past the harsh end
        return None, (scale.high, None) if higher else (None, scale.bottom)
    if search.outcome == "fails_across_range":  # ... or before the safe end
        return None, (None, scale.bottom) if higher else (scale.high, None)
    if search.fit is None:
        return None, (None, None)
    ends: list[float | None] = [None if u in (0.0, 1.0) else scale.at(u) for u in search.fit.interval]
    low, high = ends if higher else ends[::-1]
    return scale.at(search.fit.estimate), (low, high)


def outcome_text(report: dict[str, Any]) -> str:
    """One sentence an SRE can paste into a review."""
    s, bp = report["search"], report["breaking_point"]
    name, goal, outcome = s["parameter"], s["goal_label"], report["outcome"]
    safe, harsh = (s["range"][0], s["range"][1]) if s["harsher"] == "higher" else (s["range"][1], s["range"][0])
    if outcome == "holds_across_range":
        return f"The agent meets its goal ({goal}) across the whole range, even at {name} = {harsh:g}."
    if outcome == "fails_across_range":
        return f"The agent misses its goal ({goal}) even at the mildest level of the range, {name} = {safe:g}."
    if bp["estimate"] is None:
        return f"No breaking point: the search ended ({outcome}) before a level held and another failed."
    low, high = (value_text(v) for v in bp["interval"])
    way = "up to" if s["harsher"] == "higher" else "down to"
    text = (
        f"The agent meets its goal ({goal}) {way} {name} ≈ {value_text(bp['estimate'])} "
        f"({bp['confidence']:.0%} interval {low} to {high}; {bp['method']} fit)."
    )
    if outcome == "budget":
        text += f" The budget of {s['max_runs']} runs ran out before the bracket reached the resolution."
    return text


def _gate(config: SearchConfig, interval: Interval) -> dict[str, Any]:
    checks = []
    low, high = interval
    if config.gate.min_breaking_point is not None:
        ok = low is not None and low >= config.gate.min_breaking_point
        checks.append(
            {"check": "min_breaking_point", "value": low, "threshold": config.gate.min_breaking_point, "ok": ok}
        )
    if config.gate.max_breaking_point is not None:
        ok = high is not None and high <= config.gate.max_breaking_point
        checks.append(
            {"check": "max_breaking_point", "value": high, "threshold": config.gate.max_breaking_point, "ok": ok}
        )
    return {"passed": all(c["ok"] for c in checks), "checks": checks}


def build_search_report(
    result: ExperimentResult, search: SearchResult, config: ExperimentConfig, upstream: dict[str, Any]
) -> dict[str, Any]:
    """The report document; report.md and report.html are rendered from it."""
    sc = config.search
    assert sc is not None
    plan = make_search(config)
    scale, sprt = plan.scale, plan.sprt
    estimate, interval = _interval(search, scale)
    gate = _gate(sc, interval)
    failed = result.status == "aborted" or result.error is not None
    status = result.status if failed else "completed"
    exit_code = EXIT_ERROR if failed else EXIT_PASSED if gate["passed"] else EXIT_FAILED
    levels = []
    for level in sorted(search.levels, key=lambda lv: lv.value):
        lo, hi = wilson_interval(level.good, level.runs, sc.confidence)
        levels.append(
            {
                "label": level_label(level.index),
                "order": level.index + 1,
                "value": level.value,
                "runs": level.runs,
                "good": level.good,
                "share": level.good / level.runs if level.runs else None,
                "wilson": [lo, hi],
                "decision": level.decision,
            }
        )
    grid_runs = scale.grid_levels * sprt.fixed_n
    fit = search.fit
    report: dict[str, Any] = {
        **report_header(result, status, exit_code),
        "kind": "search",
        "search": {
            **sc.model_dump(mode="json", exclude={"gate"}),
            "goal_label": sc.goal.label,
            "target": sprt.target,
            "searched_from": scale.bottom,
            "sequential_test": {"p_holds": sprt.p_holds, "p_fails": sprt.p_fails, "alpha": sprt.alpha},
            "batch": plan.batch,
        },
        "outcome": search.outcome,
        "breaking_point": {
            "estimate": estimate,
            "interval": list(interval),
            "confidence": sc.confidence,
            "method": fit.method if fit is not None else None,
        },
        "fit": None
        if fit is None
        else {
            "method": fit.method,
            "slope": fit.slope,
            "gof_p_value": fit.gof_p_value,
            "curve": [[scale.at(u), p] for u, p in fit.curve],
        },
        "levels": levels,
        "sequence": [level.value for level in search.levels],
        "runs_spent": search.runs,
        "grid": {
            "levels": scale.grid_levels,
            "runs_per_level": sprt.fixed_n,
            "runs": grid_runs,
            "ratio": search.runs / grid_runs if grid_runs else None,
        },
        "gate": gate,
        "services": result.services,
        "upstream": upstream,
        "runs": [r.to_dict() for r in result.runs],
    }
    report["summary"] = outcome_text(report)
    return report
