"""A staging experiment's report from a recorded run: the verdict, the checks, and the four renderings."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_experiment
from brownout.proxy.experiment.staging.model import PhaseRecord, Probe, StagingResult, judge
from brownout.proxy.experiment.staging.report import build_report
from brownout.proxy.experiment.staging.run import write_staging_reports
from tests.experiment.test_reports import validate_junit

T0 = 1_800_000_000.0


def config(**extra: Any) -> StagingExperiment:
    data = {
        "version": 1,
        "name": "gameday",
        "target": {"control": ["http://127.0.0.1:9465"]},
        "prometheus": {"url": "http://127.0.0.1:9090", "probe_interval_s": 1},
        "phases": [
            {"name": "baseline", "duration_s": 2},
            {"name": "outage", "duration_s": 3, "rules": [{"name": "r", "fault": {"type": "reset"}}]},
            {"name": "recovery", "duration_s": 2},
        ],
        "steady_state": [{"name": "slo | ok", "metric": "promql", "query": "x", "op": ">=", "threshold": 0.9}],
        "gate": [{"metric": "faults", "op": ">", "threshold": 0, "scope": "during"}],
        **extra,
    }
    parsed = parse_any_experiment(yaml.safe_dump(data), "exp.yaml")
    assert isinstance(parsed, StagingExperiment)
    return parsed


def result(
    probes: list[list[tuple[float, bool | None]]], statuses: tuple[str, ...] = ("completed",) * 3
) -> StagingResult:
    r = StagingResult("gameday", "gameday-run", {"kind": "control", "control": ["http://127.0.0.1:9465"]}, T0)
    t = T0
    for (name, chaos), values, status in zip(
        [("baseline", False), ("outage", True), ("recovery", False)], probes, statuses, strict=True
    ):
        record = PhaseRecord(name, chaos, 0.0, 2.0, status=status)
        if status != "skipped":
            record.started_at, record.finished_at = t, t + len(values)
            record.probes[0] = [Probe(t + i + 1, v, ok, True) for i, (v, ok) in enumerate(values)]
            if chaos and status == "completed":
                record.gate.append({"check": "faults > 0", "value": 12.0, "threshold": 0.0, "ok": True})
            t += len(values)
        r.phases.append(record)
    r.finished_at = t
    return r


def report(r: StagingResult, cfg: StagingExperiment | None = None) -> dict[str, Any]:
    cfg = cfg or config()
    figs = [
        {"exchanges": 40.0, "faults": 3.0, "faults_by_rule": [{"rule": "gameday/outage/r", "fault": "reset", "count": 3.0}],
         "violations": 0.0, "violations_by_invariant": [], "error_rate": 0.1, "p95_latency_s": 0.2, "cost_usd": None}
        if p.started_at is not None else None
        for p in r.phases
    ]  # fmt: skip
    series = [
        {"name": "slo | ok", "kind": "steady_state", "query": "x", "start": T0, "end": r.finished_at + 2, "step_s": 1,
         "threshold": 0.9, "series": [{"labels": {}, "points": [[T0 + i, 1.0 if i < 3 else 0.5] for i in range(8)]}]},
    ]  # fmt: skip
    return build_report(cfg, r, figs, series)


GOOD = [(1.0, True), (0.99, True)]
BAD = [(0.5, False), (0.4, False)]


def test_judge_takes_the_worst_series_and_says_no_data() -> None:
    cfg = config()
    slo = cfg.steady_state[0]
    assert judge(slo, [0.95, 0.5, 1.0]) == (0.5, False)
    assert judge(slo, [0.95, 0.99]) == (0.95, True)
    assert judge(slo, []) == (None, None)
    breach = slo.model_copy(update={"no_data": "breach"})
    assert judge(breach, [None]) == (None, False)
    latency = slo.model_copy(update={"op": "<=", "threshold": 2.0})
    assert judge(latency, [1.0, 3.0, 2.5]) == (3.0, False)


@pytest.mark.parametrize(
    ("probes", "statuses", "expected"),
    [
        ([GOOD, GOOD, GOOD], ("completed",) * 3, ("completed", 0)),
        ([GOOD, BAD, GOOD], ("completed",) * 3, ("deviated", 1)),
        ([BAD, [], []], ("completed", "skipped", "completed"), ("failed", 1)),
        ([GOOD, BAD, []], ("completed", "aborted", "skipped"), ("aborted", 2)),
    ],
    ids=["held", "deviated-during", "broken-before", "aborted"],
)
def test_status_and_exit_code(probes: Any, statuses: tuple[str, ...], expected: tuple[str, int]) -> None:
    r = result(probes, statuses)
    if "aborted" in statuses:
        r.status, r.abort = "aborted", {"at": T0 + 3, "reason": "steady state breached", "phase": "outage"}
    if statuses[1] == "skipped" and "aborted" not in statuses:
        r.skipped_chaos = "steady state 'slo | ok' did not hold in phase baseline"
    doc = report(r)
    assert (doc["status"], doc["exit_code"]) == expected
    if expected[0] == "aborted":
        # The gate check of a phase that did not complete fails: a gate never passes blind.
        assert doc["gate"]["checks"] == [
            {"check": "faults > 0 [outage]", "phase": "outage", "value": None, "threshold": 0.0, "ok": False,
             "note": "not measured: the phase did not complete"}
        ]  # fmt: skip


def test_every_rendering_is_written_names_shown_never_interpreted(tmp_path: Path) -> None:
    r = result([GOOD, BAD, GOOD], ("completed", "aborted", "skipped"))
    r.status = "aborted"
    r.abort = {"at": T0 + 3.5, "reason": "<script>alert(1)</script> breached", "phase": "outage", "paused_at": T0 + 3.6}
    r.event("abort: <script>alert(1)</script>")
    doc = report(r)
    write_staging_reports(tmp_path, doc)
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    validate_junit(junit)
    outage = next(s for s in junit if s.get("name") == "outage")
    assert outage.find("testcase[@name='abort']/error") is not None
    assert next(s for s in junit if s.get("name") == "recovery").find("testcase/skipped") is not None
    md = (tmp_path / "report.md").read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md and "slo \\| ok" in md
    assert "| outage 🔥 | aborted | +2.0 s | 0 replicas (not every replica said so) | 40 | 3 |" in md
    html = (tmp_path / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'stroke="#c62828" stroke-width="2"><title>abort</title>' in html  # the abort line on the chart
    assert "stroke-dasharray" in html and '<path d="M' in html  # the threshold and the series
    assert (tmp_path / "report.json").read_text().startswith("{")
