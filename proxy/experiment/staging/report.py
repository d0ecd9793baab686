"""The staging experiment's report document: phases, probes, brownout's figures, time series, the verdict.

Time series are Prometheus' own answers to range queries over the experiment (each check's query and
brownout's figures as rates), kept with the query, range and step that produced them, so anyone can
ask Prometheus again and get the same points. Status and exit code follow the command-shaped
experiments (proxy/experiment/verdict.py): aborted or errored 2; the steady state broken before the
chaos `failed` 1; broken during or after it `deviated` 1; else `completed`, 0 when the gate passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from importlib import metadata
from typing import Any

from brownout.proxy.experiment.report_json import SCHEMA_VERSION
from brownout.proxy.experiment.staging import figures
from brownout.proxy.experiment.staging.config import Check, StagingExperiment
from brownout.proxy.experiment.staging.model import PhaseRecord, Probe, StagingResult
from brownout.proxy.experiment.staging.promql import PromError, Prometheus
from brownout.proxy.experiment.verdict import verdict

__all__ = ["build_report", "collect", "hypotheses", "staging_gate"]

log = logging.getLogger(__name__)


def _version() -> str | None:
    try:
        return metadata.version("brownout")
    except metadata.PackageNotFoundError:
        return None


def _worst(check: Check, values: list[float]) -> float | None:
    if not values:
        return None
    return max(values) if check.op in ("<", "<=") else min(values)


def hypotheses(config: StagingExperiment, result: StagingResult) -> list[dict[str, Any]]:
    """Each steady-state check, judged on the probes after each phase's warm-up."""
    chaos = [i for i, p in enumerate(config.phases) if p.is_chaos]
    first_chaos = chaos[0] if chaos else len(config.phases)
    out = []
    for k, check in enumerate(config.steady_state):
        checks, failed_before = [], False
        for j, record in enumerate(result.phases):
            probes = [p for p in record.probes.get(k, []) if p.judged and p.ok is not None]
            if not probes:
                continue
            ok = all(p.ok for p in probes)
            value = _worst(check, [p.value for p in probes if p.value is not None])
            breaches = sum(1 for p in probes if not p.ok)
            checks.append({"label": record.name, "value": value, "ok": ok, "probes": len(probes), "breaches": breaches})
            failed_before = failed_before or (not ok and j < first_chaos)
        out.append(
            {
                "hypothesis": check.label,
                "metric": check.metric,
                "query": check.query,
                "op": check.op,
                "threshold": check.threshold,
                "scope": "phase" if check.phase else check.scope,
                "phase": check.phase,
                "ok": all(c["ok"] for c in checks) if checks else None,
                "failed_before": failed_before,
                "checks": checks,
            }
        )
    return out


def staging_gate(config: StagingExperiment, result: StagingResult) -> dict[str, Any]:
    """The gate's checks per phase in scope; one whose phase did not complete fails (never passes blind)."""
    checks: list[dict[str, Any]] = []
    for j, record in enumerate(result.phases):
        judged = {g["check"]: g for g in record.gate}
        for check in config.gate:
            if not config.in_scope(check, j):
                continue
            got = judged.get(check.label)
            entry = {"check": f"{check.label} [{record.name}]", "phase": record.name}
            if got is None:
                checks.append(
                    {
                        **entry,
                        "value": None,
                        "threshold": check.threshold,
                        "ok": False,
                        "note": "not measured: the phase did not complete",
                    }
                )
            else:
                checks.append(
                    {
                        **entry,
                        "value": got["value"],
                        "threshold": check.threshold,
                        "ok": got["ok"],
                        "note": got.get("note", ""),
                    }
                )
    return {"passed": all(c["ok"] for c in checks), "checks": checks}


async def _series(
    prom: Prometheus,
    name: str,
    kind: str,
    query: str,
    start: float,
    end: float,
    step: float,
    threshold: float | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "kind": kind, "query": query, "start": start, "end": end, "step_s": step}
    if threshold is not None:
        entry["threshold"] = threshold
    try:
        found = await prom.query_range(query, start, end, step)
    except PromError as e:
        return {**entry, "series": [], "error": str(e)}
    entry["series"] = [{"labels": s.labels, "points": [[t, v] for t, v in s.points]} for s in found]
    return entry


async def collect(
    config: StagingExperiment, result: StagingResult, prom: Prometheus
) -> tuple[list[dict[str, Any] | None], list[dict[str, Any]]]:
    """brownout's figures per phase that ran, and the time series over the whole experiment."""
    source = config.prometheus
    # The series run on past the end (the settle time): how the service came back after the chaos.
    start, end, step = result.started_at, max(result.finished_at, time.time()), source.probe_interval_s

    async def phase_figures(record: PhaseRecord) -> dict[str, Any] | None:
        if record.started_at is None or record.finished_at is None:
            return None
        try:
            return await figures.figures(prom, source.selector, record.started_at, record.finished_at)
        except PromError as e:
            return {"error": str(e)}

    jobs = [
        _series(prom, c.label, "steady_state", figures.fill(c.query, source.window_s), start, end, step, c.threshold)
        for c in config.steady_state
        if c.query is not None
    ]
    jobs += [
        _series(prom, name, "brownout", query, start, end, step)
        for name, query in figures.series_queries(source.selector, config.name, source.window_s)
    ]
    per_phase = await asyncio.gather(*(phase_figures(r) for r in result.phases))
    series = await asyncio.gather(*jobs)
    return list(per_phase), list(series)


def _probe(p: Probe) -> list[Any]:
    return [round(p.t, 3), p.value, p.ok, p.judged]


def build_report(
    config: StagingExperiment,
    result: StagingResult,
    phase_figures: list[dict[str, Any] | None],
    series: list[dict[str, Any]],
) -> dict[str, Any]:
    """The report document; report.md, junit.xml and report.html are rendered from it."""
    hyps = hypotheses(config, result)
    gate = staging_gate(config, result)
    judged = [{"ok": h["ok"], "scope": "before" if h["failed_before"] else h["scope"]} for h in hyps]
    if result.skipped_chaos is not None:
        judged.append({"ok": False, "scope": "before"})
    status, code = verdict(result.status, result.error, judged, gate)
    phases = []
    for j, (record, figs) in enumerate(zip(result.phases, phase_figures, strict=True)):
        phases.append(
            {
                "name": record.name,
                "label": record.name,
                "chaos": record.chaos,
                "status": record.status,
                "warmup_s": record.warmup_s,
                "duration_s": record.duration_s,
                "started_at": record.started_at,
                "finished_at": record.finished_at,
                "rules": record.rules,
                "applied_at": record.applied_at,
                "acknowledged": record.acknowledged,
                "acknowledged_after_s": record.acknowledged_after_s,
                "removed_at": record.removed_at,
                "figures": figs,
                "probes": [
                    {"check": c.label, "probes": [_probe(p) for p in record.probes.get(k, [])]}
                    for k, c in enumerate(config.steady_state)
                    if config.in_scope(c, j) and record.probes.get(k)
                ],
                "gate": record.gate,
            }
        )
    source = config.prometheus
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "staging",
        "brownout_version": _version(),
        "experiment": result.name,
        "run_id": result.run_id,
        "status": status,
        "exit_code": code,
        "abort_reason": result.abort["reason"]
        if result.abort
        else (result.skipped_chaos and f"chaos skipped: {result.skipped_chaos}"),
        "abort": result.abort,
        "interrupted": result.interrupted,
        "error": result.error,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "duration_s": max(0.0, result.finished_at - result.started_at),
        "target": {**result.target, "lease_s": config.target.lease_s},
        "prometheus": {
            "url": source.url,
            "probe_interval_s": source.probe_interval_s,
            "window_s": source.window_s,
            "selector": source.selector,
        },
        "phases": phases,
        "events": result.events,
        "series": series,
        "hypotheses": hyps,
        "gate": gate,
    }
