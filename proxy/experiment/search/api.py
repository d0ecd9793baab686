"""Run the `search:` of an experiment file end to end: validate, search, fit, judge, write the reports."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.config import ExperimentError, parse_experiment
from brownout.proxy.experiment.manifest import DECISIONS_FILE, MANIFEST_FILE, build_manifest, write_decisions
from brownout.proxy.experiment.progress import RunProgress
from brownout.proxy.experiment.report_json import write_json
from brownout.proxy.experiment.search.algorithm import SearchResult
from brownout.proxy.experiment.search.report import build_search_report
from brownout.proxy.experiment.search.report_html import write_search_html
from brownout.proxy.experiment.search.report_md import write_search_markdown
from brownout.proxy.experiment.search.runner import SearchRunner
from brownout.proxy.experiment.upstream import UpstreamConfig, proxy_options

__all__ = ["SearchOutcome", "run_search"]

logger = logging.getLogger(__name__)


@dataclass
class SearchOutcome:
    """The report document and the search's own result (levels in the order they ran)."""

    report: dict[str, Any]
    search: SearchResult
    decisions: list[dict[str, Any]]

    @property
    def exit_code(self) -> int:
        return int(self.report["exit_code"])


def run_search(
    text: str,
    *,
    source: str,
    base_dir: Path,
    out_dir: Path,
    seed: int | None = None,
    progress: RunProgress | None = None,
    confdir: str | None = None,
    proxy_factory: Callable[..., AbstractContextManager[Any]] | None = None,
    upstream: UpstreamConfig | None = None,
) -> SearchOutcome:
    """Search the breaking point of the file in `text` (ExperimentError for a bad file or one without a search)."""
    config = parse_experiment(text, source)
    if config.search is None:
        raise ExperimentError(f"{source}: no search: section (a file with phases runs with `brownout experiment run`)")
    seed = config.seed if seed is None else seed
    merged = config.upstream.model_copy(update=upstream.model_dump(exclude_none=True) if upstream else {})
    runner = SearchRunner(
        config,
        base_dir=base_dir,
        seed=seed,
        proxy_factory=proxy_factory,
        confdir=confdir,
        progress=progress,
        log_dir=out_dir,
        proxy_options=proxy_options(merged, base_dir),
    )
    result = runner.run()
    search = runner.search_result or runner.search.finish("stopped")
    decisions = list(runner.collector.decisions)
    phases = [runner.levels[i] for i in sorted(runner.levels)]
    result.manifest = build_manifest(
        experiment_text=text, experiment_path=source, base_dir=base_dir, seed=seed, phases=phases, decisions=decisions
    )
    used = {k: v for k, v in merged.model_dump().items() if v is not None} or {"live": True}
    report = build_search_report(result, search, config, used)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "report.json", report)
    write_json(out_dir / MANIFEST_FILE, result.manifest)
    write_decisions(out_dir / DECISIONS_FILE, decisions)
    write_search_markdown(out_dir / "report.md", report)
    write_search_html(out_dir / "report.html", report)
    return SearchOutcome(report, search, decisions)
