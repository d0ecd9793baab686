"""Run an experiment file end to end: validate, run, analyse, judge, and write every report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.analysis import analyze, phase_stats
from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError, parse_experiment
from brownout.proxy.experiment.manifest import (
    DECISIONS_FILE,
    MANIFEST_FILE,
    build_manifest,
    resolve_phases,
    write_decisions,
)
from brownout.proxy.experiment.model import ExperimentResult
from brownout.proxy.experiment.progress import RunProgress
from brownout.proxy.experiment.report_html import write_html
from brownout.proxy.experiment.report_json import build_report, write_json
from brownout.proxy.experiment.report_junit import write_junit
from brownout.proxy.experiment.report_md import write_markdown
from brownout.proxy.experiment.reproducibility import Pass, reproducibility
from brownout.proxy.experiment.runner import ExperimentRunner
from brownout.proxy.experiment.upstream import UpstreamConfig, proxy_options
from brownout.proxy.experiment.verdict import check_hypotheses, evaluate_gate, verdict

__all__ = ["Outcome", "run_experiment", "write_reports"]

logger = logging.getLogger(__name__)


class Outcome:
    """What `run_experiment` returns: the report document, the raw result and the decision log."""

    def __init__(self, report: dict[str, Any], result: ExperimentResult, decisions: list[dict[str, Any]]) -> None:
        self.report = report
        self.result = result
        self.decisions = decisions

    @property
    def exit_code(self) -> int:
        return int(self.report["exit_code"])


def _before_check(config: ExperimentConfig) -> Callable[[ExperimentResult], bool]:
    def check(result: ExperimentResult) -> bool:
        labels = [p.label for p in result.phases]
        phases = [
            {
                "name": p.name,
                **phase_stats(p.label, [r for r in result.runs if r.label == p.label]),
                "exchanges": p.exchanges_seen,
            }
            for p in result.phases
            if p.label in labels
        ]
        return all(h["ok"] is not False for h in check_hypotheses(config, phases, scopes=("before",)))

    return check


def run_experiment(
    text: str,
    *,
    source: str,
    base_dir: Path,
    out_dir: Path,
    seed: int | None = None,
    phase_texts: dict[str, dict[str, str]] | None = None,
    progress: RunProgress | None = None,
    confdir: str | None = None,
    proxy_factory: Callable[..., AbstractContextManager[Any]] | None = None,
    upstream: UpstreamConfig | None = None,
    repeats: int | None = None,
) -> Outcome:
    """Run the experiment in `text` (raises ExperimentError for a bad file) and write reports to `out_dir`.

    `upstream` overrides the file's `upstream:` fields that it sets (the CLI's --replay, --record);
    `repeats` its `reproducibility.repeats`."""
    config = parse_experiment(text, source)
    if not config.phases:
        raise ExperimentError(f"{source}: no phases to run (its search: runs with `brownout experiment search`)")
    seed = config.seed if seed is None else seed
    phases = resolve_phases(config, base_dir, seed, phase_texts)
    merged = config.upstream.model_copy(update=upstream.model_dump(exclude_none=True) if upstream else {})
    options = proxy_options(merged, base_dir)

    def runner_for(first: bool) -> ExperimentRunner:
        return ExperimentRunner(
            config,
            phases,
            base_dir=base_dir,
            seed=seed,
            proxy_factory=proxy_factory,
            confdir=confdir,
            progress=progress if first else None,
            before_check=_before_check(config),
            log_dir=out_dir,
            proxy_options=options if first else [o for o in options if not o.startswith("brownout_record=")],
        )

    runner = runner_for(True)
    result = runner.run()
    decisions = list(runner.collector.decisions)
    passes: list[Pass] = [(result, decisions)]
    for _ in range(1, repeats if repeats is not None else config.reproducibility.repeats):
        again = runner_for(False)  # a fresh proxy: same seed, same session names, fresh schedule state
        passes.append((again.run(), list(again.collector.decisions)))
    result.manifest = build_manifest(
        experiment_text=text, experiment_path=source, base_dir=base_dir, seed=seed, phases=phases, decisions=decisions
    )
    analysis = analyze(result, config)
    hypotheses = check_hypotheses(config, analysis["phases"])
    gate = evaluate_gate(config, analysis)
    status, code = verdict(result.status, result.error, hypotheses, gate)
    report = build_report(result, analysis, hypotheses, gate, status, code)
    report["upstream"] = {k: v for k, v in merged.model_dump().items() if v is not None} or {"live": True}
    if len(passes) > 1:
        report["reproducibility"] = reproducibility(passes)
    write_reports(out_dir, report, result.manifest, decisions)
    return Outcome(report, result, decisions)


def write_reports(
    out_dir: Path, report: dict[str, Any], manifest: dict[str, Any], decisions: list[dict[str, Any]]
) -> None:
    """report.json, junit.xml, report.md, report.html, manifest.json and decisions.jsonl in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "report.json", report)
    write_json(out_dir / MANIFEST_FILE, manifest)
    write_decisions(out_dir / DECISIONS_FILE, decisions)
    write_junit(out_dir / "junit.xml", report)
    write_markdown(out_dir / "report.md", report)
    write_html(out_dir / "report.html", report)
