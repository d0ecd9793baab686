"""`brownout experiment run|services|replay|compare`: a click group the main CLI adds with `main.add_command(experiment)`."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brownout.proxy.experiment.causes import cut, severity_text
from brownout.proxy.experiment.cli_options import experiment_options, upstream_from_flags
from brownout.proxy.experiment.config import ExperimentError
from brownout.proxy.experiment.progress import RunProgress
from brownout.proxy.experiment.report_json import load_report
from brownout.proxy.experiment.search.cli import search_cmd
from brownout.proxy.experiment.services import outcome
from brownout.proxy.experiment.verdict import EXIT_ERROR, EXIT_FAILED, EXIT_PASSED

__all__ = ["experiment"]

logger = logging.getLogger(__name__)


def _summary(console: Console, report: dict[str, Any], out: Path) -> None:
    table = Table(title=f"experiment {report['experiment']}: {report['status']}")
    for col in ("phase", "runs", "success", "95% CI", "drop (p)", "p95 s", "faults", "violations"):
        table.add_column(col)
    for p in report["phases"]:
        vs = p.get("vs_baseline")
        rate = p["success_rate"]
        table.add_row(
            escape(p["label"]),
            str(p["runs"]),
            "n/a" if rate is None else f"{rate:.0%}",
            f"{p['success_ci95'][0]:.0%}..{p['success_ci95'][1]:.0%}",
            "" if not vs or vs["drop"] is None else f"{vs['drop']:+.0%} ({vs['p_value']:.3f})",
            "n/a" if p["duration_s"]["p95"] is None else f"{p['duration_s']['p95']:.2f}",
            str(p["faults"]),
            str(p["violations"]["total"]),
        )
    console.print(table)
    rob = report["robustness"]["score"]
    console.print(
        f"robustness {'n/a' if rob is None else f'{rob:.3f}'}; gate "
        f"{'[green]passed[/]' if report['gate']['passed'] else '[red]failed[/]'}"
    )
    for c in report["gate"]["checks"]:
        if not c["ok"]:
            console.print(
                f"  [red]✗[/] {escape(c['check'])}: {c['value']} vs {c['threshold']} {escape(c.get('note', ''))}"
            )
    for h in report["hypotheses"]:
        if h["ok"] is False:
            console.print(f"  [yellow]steady state deviated:[/] {escape(h['hypothesis'])} ({escape(h['scope'])})")
            if h.get("note"):
                console.print(f"    {escape(h['note'])}", soft_wrap=True)
    for line in baseline_failures(report):
        console.print(f"  [yellow]baseline run failed:[/] {escape(line)}", soft_wrap=True)
    for line in violation_causes(report):
        console.print(f"  [yellow]violated:[/] {escape(line)}", soft_wrap=True)
    for svc in report.get("services", []):
        console.print(f"service {escape(svc['name'])}: {escape(outcome(svc))}; log {escape(str(out / svc['log']))}")
    if repro := report.get("reproducibility"):
        score = "n/a" if repro["score"] is None else f"{repro['score']:.2f}"
        console.print(f"reproducibility {score} over {repro['repeats']} passes")
        for d in repro["differing"][:10]:
            console.print(f"  [yellow]differs:[/] {escape(d['run'])} in pass {d['repeat']}: {escape(d['where'])}")
    if report.get("abort_reason"):
        console.print(f"[red]aborted:[/] {escape(report['abort_reason'])}")
    if report.get("error"):
        console.print(f"[red]error:[/] {escape(report['error'])}")
    console.print(f"reports in {escape(str(out))}/ (report.json, junit.xml, report.md, report.html, manifest.json)")


def baseline_failures(report: dict[str, Any], limit: int = 3) -> list[str]:
    """Why baseline runs failed, once per distinct cause: with no fault injected, a failure is most
    often the agent itself not running (a missing module, a wrong path), which the table cannot show."""
    out: dict[tuple[str, str], str] = {}
    for run in report.get("runs", []):
        if run["label"] != report.get("baseline") or run["status"] == "passed":
            continue
        lines = [line.strip() for line in (run.get("stderr_tail") or "").splitlines() if line.strip()]
        last = "".join(ch for ch in lines[-1] if ch.isprintable())[:200] if lines else ""
        key = (run["reason"], last)
        if key not in out:
            out[key] = f"{run['run_id']} ({run['task']}): {run['reason']}" + (f"; stderr: {last}" if last else "")
    return list(out.values())[:limit]


def violation_causes(report: dict[str, Any], limit: int = 10) -> list[str]:
    """Per phase, each invariant violated with its count and first message (the rest is in report.md)."""
    lines = [
        f"{p['label']}: {g['invariant']} x{g['count']} ({severity_text(g)}): {cut(g['first_message'], 160)}"
        for p in report["phases"]
        for g in p["violations"].get("invariants", [])
    ]
    more = len(lines) - limit
    return lines[:limit] + ([f"... {more} more in report.md"] if more > 0 else [])


@click.group("experiment")
def experiment() -> None:
    """Run chaos experiments against an agent and gate on the result."""


experiment.add_command(search_cmd)


@experiment.command("run")
@experiment_options("brownout-report", "Progress bar (default: when stderr is a terminal).")
@click.option(
    "--reproducibility",
    "repeats",
    type=click.IntRange(1, 20),
    default=None,
    help="Run every phase K times (fresh proxy each) and report how many runs repeat exactly.",
)
def run_cmd(
    exp_file: Path,
    seed: int | None,
    out_dir: Path,
    progress: bool | None,
    confdir: str | None,
    record_dir: str | None,
    replay_dir: str | None,
    replay_speed: float | None,
    replay_miss: str | None,
    repeats: int | None,
) -> None:
    """Run EXP_FILE; exit 0 gate passed, 1 gate failed or steady state deviated, 2 errored or aborted.

    --replay DIR answers every phase from recorded cassettes: no upstream, no API key, no network.
    A file with a `target:` switches timed phases on across a running fleet instead (a staging experiment).
    """
    from brownout.proxy.experiment.api import run_experiment

    upstream = upstream_from_flags(record_dir, replay_dir, replay_speed, replay_miss)

    console = Console(stderr=True)
    from brownout.proxy.experiment.staging.summary import staging_file, staging_summary

    staging = staging_file(console, exp_file)
    if staging is not None:
        given = {"--seed": seed, "--record": record_dir, "--replay": replay_dir, "--reproducibility": repeats}
        refused = [flag for flag, value in given.items() if value is not None]
        if refused:
            console.print(f"[red]error:[/] {', '.join(refused)}: not for an experiment with a target (a running fleet)")
            sys.exit(EXIT_ERROR)
        from brownout.proxy.experiment.staging.run import run_staging

        report = run_staging(staging, base_dir=exp_file.resolve().parent, out_dir=out_dir)
        staging_summary(console, report, out_dir)
        sys.exit(report["exit_code"])
    try:
        outcome = run_experiment(
            exp_file.read_text(encoding="utf-8"),
            source=str(exp_file),
            base_dir=exp_file.resolve().parent,
            out_dir=out_dir,
            seed=seed,
            progress=RunProgress(enabled=progress, console=console),
            confdir=confdir,
            upstream=upstream,
            repeats=repeats,
        )
    except ExperimentError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    _summary(console, outcome.report, out_dir)
    sys.exit(outcome.exit_code)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@experiment.command("services", context_settings={"allow_interspersed_args": False})
@click.argument("exp_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--logs",
    "log_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the service-NAME.log files (default: a temporary one).",
)
def services_cmd(exp_file: Path, command: tuple[str, ...], log_dir: Path | None) -> None:
    """Start EXP_FILE's services and run COMMAND (after --) with the variables they export; then stop them.

    Without COMMAND, print the exports as shell `export` lines and keep the services up until Ctrl-C.
    No proxy, no faults: for running an agent by hand against what its experiment starts.
    Exit: COMMAND's exit code; 2 when the file is invalid or a service does not become ready.
    """
    from brownout.proxy.experiment.config import load_experiment
    from brownout.proxy.experiment.services import ServiceError, Services

    console = Console(stderr=True)
    try:
        config = load_experiment(exp_file)
    except ExperimentError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    if not config.services:
        console.print(f"[red]error:[/] {escape(str(exp_file))} has no services")
        sys.exit(EXIT_ERROR)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop the services on SIGTERM too, not only on Ctrl-C
    code = 0
    try:
        with (
            tempfile.TemporaryDirectory(prefix="brownout-services-") as scratch,
            Services(config.services, base_dir=exp_file.resolve().parent, log_dir=log_dir or Path(scratch)) as services,
        ):
            for r in services.records:
                port = f", port {r.port}" if r.port else ""
                where = escape(str(services.log_dir / r.log)) if services.log_dir else ""
                console.print(f"service {escape(r.name)} ready (pid {r.pid}{port}); log {where}", soft_wrap=True)
            argv = list(command[1:] if command[:1] == ("--",) else command)
            if argv:
                try:
                    code = subprocess.run(argv, env={**os.environ, **services.exports}, check=False).returncode
                except OSError as e:
                    console.print(f"[red]error:[/] cannot run {escape(argv[0])}: {escape(e.strerror or str(e))}")
                    code = 127  # the shell's "command not found"
                code = 128 - code if code < 0 else code  # killed by a signal: the shell's convention
            else:
                for name, value in services.exports.items():
                    click.echo(f"export {name}={shlex.quote(value)}", nl=True)
                console.print("services up; Ctrl-C stops them")
                threading.Event().wait()
    except ServiceError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        code = 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.exit(code)


@experiment.command("replay")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the replay's reports (default RUN_DIR/replay).",
)
@click.option("--progress/--no-progress", default=None)
@click.option("--confdir", default=None)
def replay_cmd(run_dir: Path, out_dir: Path | None, progress: bool | None, confdir: str | None) -> None:
    """Re-run the experiment recorded in RUN_DIR with the same seed and configs; exit 1 if decisions differ."""
    from brownout.proxy.experiment.replay import replay_experiment

    console = Console(stderr=True)
    try:
        outcome, cmp = replay_experiment(
            run_dir, out_dir=out_dir, progress=RunProgress(enabled=progress, console=console), confdir=confdir
        )
    except ExperimentError as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(EXIT_ERROR)
    _summary(console, outcome.report, out_dir or run_dir / "replay")
    if cmp["identical"]:
        console.print(f"decision log reproduced: {cmp['sessions']} sessions, {cmp['fired_replay']} faults fired")
        sys.exit(outcome.exit_code)
    console.print(f"[red]decision log differs[/] in {len(cmp['mismatches'])} of {cmp['sessions']} sessions")
    for m in cmp["mismatches"][:10]:
        console.print(f"  {m['session']} at #{m['index']}: {m['original']} -> {m['replay']}")
    sys.exit(EXIT_FAILED if outcome.exit_code != EXIT_ERROR else EXIT_ERROR)


@experiment.command("compare")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_cmd(a: Path, b: Path, as_json: bool) -> None:
    """Compare report A (before) with report B (after); exit 1 on a significant regression.

    Significant: a lower success rate with p < 0.05 in Fisher's exact test (two-sided). Two staging reports
    compare the share of exchanges answered without an error, and a steady-state check that held in A and
    broke in B is a regression too.
    """
    from brownout.proxy.experiment.compare import compare_reports

    console = Console()
    try:
        result = compare_reports(load_report(a), load_report(b))
    except (OSError, ValueError, KeyError) as e:
        Console(stderr=True).print(f"[red]error:[/] {e}")
        sys.exit(EXIT_ERROR)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        table = Table(title=f"{a} -> {b}")
        for col in ("phase", "A", "B", "delta", "p", "verdict"):
            table.add_column(col)
        for r in result["phases"]:
            fmt = lambda s: "n/a" if s["rate"] is None else f"{s['rate']:.0%} ({s['k']}/{s['n']})"
            verdict = "[red]regression[/]" if r["regression"] else "[green]improvement[/]" if r["improvement"] else "ns"
            table.add_row(
                r["phase"],
                fmt(r["a"]),
                fmt(r["b"]),
                "" if r["delta"] is None else f"{r['delta']:+.0%}",
                f"{r['p_value']:.3f}",
                verdict,
            )
        console.print(table)
        if result.get("kind") == "staging":
            console.print(f"rates: {result['measure']} (the fleet's counters)")
        for c in result.get("checks", []):
            if c["regression"]:
                console.print(
                    f"[red]broke in B[/]: {c['hypothesis']} in {c['phase']} ({c['a']['value']} -> {c['b']['value']})",
                    soft_wrap=True,
                )
    sys.exit(EXIT_FAILED if result["regression"] else EXIT_PASSED)
