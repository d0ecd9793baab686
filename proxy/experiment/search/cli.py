"""`brownout experiment search EXP_FILE`: the breaking point of the file's `search:`, with a CI exit code."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brownout.proxy.experiment.cli_options import experiment_options, upstream_from_flags
from brownout.proxy.experiment.config import ExperimentError
from brownout.proxy.experiment.services import outcome
from brownout.proxy.experiment.verdict import EXIT_ERROR

__all__ = ["search_cmd", "search_summary"]

logger = logging.getLogger(__name__)


def search_summary(console: Console, report: dict[str, Any], out: Path) -> None:
    from brownout.proxy.experiment.search.report import value_text  # it brings scipy: not for --help

    s = report["search"]
    table = Table(title=f"search {report['experiment']}: {report['status']}")
    for col in ("order", s["parameter"], "runs", "good", "share", "Wilson", "test"):
        table.add_column(escape(col))
    for lv in report["levels"]:
        share = "n/a" if lv["share"] is None else f"{lv['share']:.0%}"
        wilson = f"{lv['wilson'][0]:.0%}..{lv['wilson'][1]:.0%}"
        table.add_row(
            str(lv["order"]),
            value_text(lv["value"]),
            str(lv["runs"]),
            str(lv["good"]),
            share,
            wilson,
            lv["decision"] or "undecided",
        )
    console.print(table)
    console.print(escape(report["summary"]), soft_wrap=True)
    grid = report["grid"]
    console.print(
        f"{report['runs_spent']} runs; a grid of the same resolution needs {grid['runs']} ({grid['levels']} levels x {grid['runs_per_level']})"
    )
    gate = report["gate"]
    if gate["checks"]:
        console.print(f"gate {'[green]passed[/]' if gate['passed'] else '[red]failed[/]'}")
        for c in gate["checks"]:
            if not c["ok"]:
                console.print(f"  [red]✗[/] {c['check']}: {value_text(c['value'])} vs {c['threshold']:g}")
    for svc in report.get("services", []):
        console.print(f"service {escape(svc['name'])}: {escape(outcome(svc))}; log {escape(str(out / svc['log']))}")
    if report.get("abort_reason"):
        console.print(f"[red]aborted:[/] {escape(report['abort_reason'])}")
    if report.get("error"):
        console.print(f"[red]error:[/] {escape(report['error'])}", soft_wrap=True)
    console.print(f"reports in {escape(str(out))}/ (report.json, report.md, report.html, manifest.json)")


@click.command("search")
@experiment_options("brownout-search", "Progress (default: when stderr is a terminal).")
def search_cmd(
    exp_file: Path,
    seed: int | None,
    out_dir: Path,
    progress: bool | None,
    confdir: str | None,
    record_dir: str | None,
    replay_dir: str | None,
    replay_speed: float | None,
    replay_miss: str | None,
) -> None:
    """Find the fault intensity at which the agent stops meeting its goal (EXP_FILE's `search:`).

    Exit 0 when the breaking point is known to be on the right side of the search's gate (or there is
    no gate), 1 when it is not, 2 when the search errored or was aborted. --replay DIR answers every
    level from recorded cassettes: token-free, and the same levels in the same order.
    """
    from brownout.proxy.experiment.config import load_experiment
    from brownout.proxy.experiment.search.api import run_search
    from brownout.proxy.experiment.search.progress import SearchProgress
    from brownout.proxy.experiment.search.runner import make_search

    console = Console(stderr=True)
    upstream = upstream_from_flags(record_dir, replay_dir, replay_speed, replay_miss)
    try:
        config = load_experiment(exp_file)
        if config.search is None:
            raise ExperimentError(f"{exp_file}: no search: section (its phases run with `brownout experiment run`)")
        bar = SearchProgress(config.search.parameter, make_search(config).max_runs, enabled=progress, console=console)
        done = run_search(
            exp_file.read_text(encoding="utf-8"),
            source=str(exp_file),
            base_dir=exp_file.resolve().parent,
            out_dir=out_dir,
            seed=seed,
            progress=bar,
            confdir=confdir,
            upstream=upstream,
        )
    except ExperimentError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    search_summary(console, done.report, out_dir)
    sys.exit(done.exit_code)
