"""`brownout experiment run` for a file with a target: run it, read the figures, write every report."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.report_json import write_json
from brownout.proxy.experiment.staging.config import StagingExperiment
from brownout.proxy.experiment.staging.model import PhaseRecord, StagingResult
from brownout.proxy.experiment.staging.promql import PromError, Prometheus
from brownout.proxy.experiment.staging.render import write_html, write_junit, write_markdown
from brownout.proxy.experiment.staging.report import build_report, collect
from brownout.proxy.experiment.staging.runner import StagingRunner
from brownout.proxy.experiment.staging.targets import TargetError, open_target

__all__ = ["new_run_id", "run_staging", "write_staging_reports"]

log = logging.getLogger(__name__)


def new_run_id(name: str) -> str:
    """This run's id: the experiment, when, and a random tail (two runners never share one)."""
    return f"{name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.urandom(3).hex()}"


@contextlib.contextmanager
def _cancel_on_sigterm(task: asyncio.Task[Any]) -> Any:
    # Ctrl-C cancels the task already (asyncio.run); SIGTERM, a container's stop, does the same here.
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _run(
    config: StagingExperiment, base_dir: Path, run_id: str, environ: Mapping[str, str] | None
) -> dict[str, Any]:
    failed = StagingResult(config.name, run_id, {}, started_at=time.time())
    failed.phases = [PhaseRecord(p.name, p.is_chaos, p.warmup_s, p.duration_s) for p in config.phases]
    try:
        target = open_target(config.target, environ)
        prom = Prometheus(config.prometheus, environ=environ)
    except (TargetError, PromError) as e:
        failed.status, failed.error, failed.finished_at = "failed", f"{type(e).__name__}: {e}", time.time()
        return build_report(config, failed, [None] * len(config.phases), [])
    task = asyncio.current_task()
    assert task is not None
    async with prom:
        with _cancel_on_sigterm(task):
            runner = StagingRunner(config, target=target, prometheus=prom, base_dir=base_dir, run_id=run_id)
            result = await runner.run()
            try:
                if not result.interrupted and any(r.started_at is not None for r in result.phases):
                    # Prometheus scrapes the end of the last phase before the report reads it (not when
                    # someone is waiting for Ctrl-C to return).
                    await asyncio.sleep(config.prometheus.settle_s)
                phase_figures, series = await collect(config, result, prom)
            except asyncio.CancelledError:
                task.uncancel()
                result.event("interrupted while reading the report's figures: the report has none")
                phase_figures, series = [None] * len(result.phases), []
    return build_report(config, result, phase_figures, series)


def run_staging(
    config: StagingExperiment,
    *,
    base_dir: Path,
    out_dir: Path,
    run_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    write: Callable[[Path, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the experiment (the caller's thread, its own event loop) and write its reports to `out_dir`."""
    report = asyncio.run(_run(config, base_dir, run_id or new_run_id(config.name), environ))
    (write or write_staging_reports)(out_dir, report)
    return report


def write_staging_reports(out_dir: Path, report: dict[str, Any]) -> None:
    """report.json, junit.xml, report.md and report.html in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "report.json", report)
    write_junit(out_dir / "junit.xml", report)
    write_markdown(out_dir / "report.md", report)
    write_html(out_dir / "report.html", report)
