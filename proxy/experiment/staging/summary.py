"""The terminal side of a staging experiment: which shape a file has, and the summary after a run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brownout.proxy.experiment.config import ExperimentError
from brownout.proxy.experiment.formatting import num, pct
from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_experiment
from brownout.proxy.experiment.verdict import EXIT_ERROR

__all__ = ["staging_file", "staging_summary"]


def staging_file(console: Console, exp_file: Path) -> StagingExperiment | None:
    """The file's StagingExperiment when it has a target; None for the command shape (exit 2 when invalid)."""
    try:
        config = parse_any_experiment(exp_file.read_text(encoding="utf-8"), str(exp_file))
    except ExperimentError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    return config if isinstance(config, StagingExperiment) else None


def staging_summary(console: Console, report: dict[str, Any], out: Path) -> None:
    table = Table(title=f"staging experiment {report['experiment']}: {report['status']}")
    for col in ("phase", "status", "exchanges", "faults", "violations", "error rate", "p95 s"):
        table.add_column(col)
    for p in report["phases"]:
        f = p.get("figures") or {}
        table.add_row(
            escape(p["name"]) + (" (chaos)" if p["chaos"] else ""),
            p["status"],
            num(f.get("exchanges"), ".0f"),
            num(f.get("faults"), ".0f"),
            num(f.get("violations"), ".0f"),
            pct(f.get("error_rate")),
            num(f.get("p95_latency_s")),
        )
    console.print(table)
    console.print(f"gate {'[green]passed[/]' if report['gate']['passed'] else '[red]failed[/]'}")
    for c in report["gate"]["checks"]:
        if not c["ok"]:
            console.print(f"  [red]✗[/] {escape(c['check'])}: {num(c['value'], '.4g')} vs {c['threshold']:g}")
    for h in report["hypotheses"]:
        if h["ok"] is False:
            console.print(f"  [yellow]steady state deviated:[/] {escape(h['hypothesis'])} ({escape(h['scope'])})")
    if report.get("abort_reason"):
        console.print(f"[red]aborted:[/] {escape(report['abort_reason'])}", soft_wrap=True)
    if report.get("error"):
        console.print(f"[red]error:[/] {escape(report['error'])}", soft_wrap=True)
    console.print(f"reports in {escape(str(out))}/ (report.json, junit.xml, report.md, report.html)")
