"""Reports from the fixture: JSON parses with its schema version, JUnit has a valid structure, HTML is self-contained."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.experiment.analysis import analyze
from brownout.proxy.experiment.api import write_reports
from brownout.proxy.experiment.report_json import SCHEMA_VERSION, build_report, load_report
from brownout.proxy.experiment.verdict import check_hypotheses, evaluate_gate, verdict
from tests.experiment.builders import config, fixture_result


def make_report(result: Any = None) -> dict[str, Any]:
    cfg = config(gate={"min_success_rate": 0.5})
    result = result or fixture_result()
    a = analyze(result, cfg)
    hyp = check_hypotheses(cfg, a["phases"])
    gate = evaluate_gate(cfg, a)
    status, code = verdict(result.status, result.error, hyp, gate)
    return build_report(result, a, hyp, gate, status, code)


def validate_junit(root: ET.Element) -> None:
    """The rules of the common JUnit XSD (Jenkins junit-10) that CI systems rely on."""
    assert root.tag == "testsuites"
    tot = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root:
        assert suite.tag == "testsuite"
        for attr in ("name", "tests", "failures", "errors", "time"):
            assert attr in suite.attrib, attr
        counts = {"tests": 0, "failures": 0, "errors": 0}
        for case in suite:
            assert case.tag == "testcase"
            assert case.get("name") and case.get("classname")
            float(case.get("time", "x"))
            order = {"skipped": 0, "error": 1, "failure": 2, "system-out": 3, "system-err": 4}
            ranks = [order[c.tag] for c in case]  # unknown children raise KeyError
            assert ranks == sorted(ranks), "children out of XSD sequence order"
            assert all(c.get("message") is not None for c in case if c.tag in ("error", "failure"))
            counts["tests"] += 1
            if case.find("error") is not None:
                counts["errors"] += 1
            elif case.find("failure") is not None:
                counts["failures"] += 1
        for k, v in counts.items():
            assert int(suite.get(k)) == v, (suite.get("name"), k)
            tot[k] += v
    for k, v in tot.items():
        assert int(root.get(k)) == v


def test_all_reports_written_and_parse(tmp_path: Path) -> None:
    report = make_report()
    write_reports(tmp_path, report, {"seed": 1}, [{"session": "s", "rule": "r", "outcome": "fired"}])
    for name in ("report.json", "junit.xml", "report.md", "report.html", "manifest.json", "decisions.jsonl"):
        assert (tmp_path / name).stat().st_size > 0, name
    loaded = load_report(tmp_path)
    assert loaded["schema_version"] == SCHEMA_VERSION
    assert loaded["phases"][1]["success_ci95"] == pytest.approx([0.4902, 0.9433], abs=1e-4)
    assert {
        "phases",
        "chaos_pooled",
        "recovery",
        "cost_of_chaos",
        "robustness",
        "fault_breakdown",
        "hypotheses",
        "gate",
        "runs",
        "manifest",
        "status",
        "exit_code",
    } <= set(loaded)
    md = (tmp_path / "report.md").read_text()
    assert "| chaos 🔥 | 10 |" in md and "Robustness" in md


def test_junit_structure(tmp_path: Path) -> None:
    result = fixture_result()
    result.runs[-1].status, result.runs[-1].reason, result.runs[-1].stderr_tail = "timeout", "slow", "\x1b[31mred\x00"
    write_reports(tmp_path, make_report(result), {}, [])
    root = ET.parse(tmp_path / "junit.xml").getroot()
    validate_junit(root)
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"baseline", "chaos"}
    chaos = suites["chaos"]
    # run 4 failed with an error violation, run 6 failed, run 10 timed out
    assert (chaos.get("tests"), chaos.get("failures"), chaos.get("errors")) == ("10", "2", "1")
    run4 = next(c for c in chaos if c.get("name").startswith("chaos-4 "))
    assert [f.get("type") for f in run4.findall("failure")] == ["failed", "violation.retry_discipline"]


def test_html_self_contained(tmp_path: Path) -> None:
    write_reports(tmp_path, make_report(), {}, [])
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == 4
    assert "://" not in html  # no external URL at all: renders offline
    assert "<script" not in html and "<link" not in html
    ET.fromstring(html.split("<body>", 1)[1].split("</body>")[0].join(["<div>", "</div>"]).replace("<br>", ""))
