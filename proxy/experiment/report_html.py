"""report.html: one self-contained page rendered from templates/report.html.j2 with autoescaping."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path
from typing import Any

import jinja2

from brownout.proxy.experiment import charts
from brownout.proxy.experiment.causes import (
    LINKED_RUNS,
    cut,
    run_anchor,
    run_positions,
    runs_with_violations,
    severity_text,
    violations_anchor,
)
from brownout.proxy.experiment.formatting import num, pct, usd
from brownout.proxy.experiment.services import command_text, outcome

__all__ = ["render_html", "write_html"]

logger = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def _local_file(name: Any) -> bool:
    # Only a plain file name beside the report becomes a link (never a javascript: or remote URL).
    return bool(_FILE_NAME.fullmatch(str(name)))


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("brownout.proxy.experiment", "templates"),
        autoescape=True,  # every string from the report is data: experiment, phase, hypothesis, run, tool names
        undefined=jinja2.StrictUndefined,  # a renamed report field fails loudly instead of rendering blank
        keep_trailing_newline=True,
    )
    env.filters["pct"] = pct
    env.filters["num"] = num
    env.filters["usd"] = usd
    env.filters["shell"] = command_text
    env.filters["service_outcome"] = outcome
    env.filters["run_anchor"] = run_anchor
    env.filters["violations_anchor"] = violations_anchor
    env.filters["severity_text"] = severity_text
    env.filters["cut"] = cut
    env.tests["local_file"] = _local_file
    return env


def _charts(report: dict[str, Any]) -> list[tuple[str, charts.Chart]]:
    phases = report["phases"]
    return [
        (
            "Success per phase (95% CI)",
            charts.bars_with_intervals(
                [
                    (p["label"], p["success_rate"], p["success_ci95"][0], p["success_ci95"][1], p["chaos"])
                    for p in phases
                ],
                "Success rate per phase with Wilson 95% intervals",
            ),
        ),
        (
            "Run duration",
            charts.box_plots([(p["label"], p["duration_s"]["values"]) for p in phases], "Run duration per phase (s)"),
        ),
        (
            "Violations over time",
            charts.timeline(
                [(v["t_s"], str(v["severity"]), str(v["label"])) for v in report["violation_timeline"]],
                report["duration_s"],
                "Violations over time (cumulative, by severity)",
            ),
        ),
        (
            "Failure rate per fault",
            charts.hbars(
                [
                    (f"{r['fault']} · {r['target']}", r["rate"], f"{r['failed']}/{r['runs']}")
                    for r in report["fault_breakdown"]
                ],
                "Failure rate of runs that met each fault",
            ),
        ),
    ]


def render_html(report: dict[str, Any]) -> str:
    """The HTML page of a report document."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report,
        charts=_charts(report),
        phase_causes=[(p, g) for p in report["phases"] for g in p["violations"].get("invariants", [])],
        run_causes=runs_with_violations(report),
        positions=run_positions(report),
        linked_runs=LINKED_RUNS,
    )


def write_html(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_html(report), encoding="utf-8")
