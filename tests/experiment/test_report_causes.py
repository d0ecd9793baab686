"""Every report names the cause: per phase the violations by invariant, their count and first message; runs link to theirs."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.api import write_reports
from brownout.proxy.experiment.causes import group_violations
from brownout.proxy.experiment.model import ExperimentResult
from brownout.proxy.experiment.report_json import load_report
from tests.experiment.builders import fixture_result
from tests.experiment.test_reports import make_report


def _v(invariant: str, severity: str, message: str, at: float) -> dict[str, Any]:
    return {"invariant": invariant, "severity": severity, "message": message, "timestamp": at}


def result_with_violations() -> ExperimentResult:
    """The fixture, with chaos runs 2, 3 and 4 breaking invariants (run 3 first in time, run 4 the worst)."""
    result = fixture_result()
    runs = {r.run_id: r for r in result.runs}
    runs["chaos-2"].violations = [
        _v("latency_budget", "warning", "total 3.1 s over budget 2 s", 112.0),
        _v("latency_budget", "warning", "total 2.5 s over budget 2 s", 113.0),
    ]
    runs["chaos-3"].violations = [_v("latency_budget", "warning", "total 9.9 s over budget 2 s", 111.0)]
    runs["chaos-4"].violations = [
        _v("retry_discipline", "error", "retried a 429 after 0.0 s, retry-after asked 2 s", 115.0),
        _v("retry_discipline", "critical", "11 retries of one request", 116.0),
    ]
    runs["chaos-4"].reason = "exit code 1 (expected 0)"
    return result


def report() -> dict[str, Any]:
    return make_report(result_with_violations())


def test_groups_by_invariant_worst_first_with_the_earliest_message() -> None:
    found = [
        ("r1", _v("a", "warning", "later", 5.0)),
        ("r2", _v("a", "warning", "earliest", 1.0)),
        ("r1", _v("a", "warning", "latest", 9.0)),
        ("r3", _v("b", "critical", "once", 7.0)),
        ("r3", {"invariant": "c", "severity": "info", "message": "no time"}),
    ]
    assert group_violations(found) == [
        {
            "invariant": "b",
            "count": 1,
            "severity": "critical",
            "by_severity": {"critical": 1},
            "first_message": "once",
            "first_run": "r3",
            "runs": ["r3"],
        },
        {
            "invariant": "a",
            "count": 3,
            "severity": "warning",
            "by_severity": {"warning": 3},
            "first_message": "earliest",
            "first_run": "r2",
            "runs": ["r1", "r2"],
        },
        {
            "invariant": "c",
            "count": 1,
            "severity": "info",
            "by_severity": {"info": 1},
            "first_message": "no time",
            "first_run": "r3",
            "runs": ["r3"],
        },
    ]


def test_report_json_has_each_phase_violations_by_invariant(tmp_path: Path) -> None:
    write_reports(tmp_path, report(), {}, [])
    baseline, chaos = load_report(tmp_path)["phases"]
    assert baseline["violations"]["invariants"] == []
    assert chaos["violations"]["invariants"] == [
        {
            "invariant": "retry_discipline",
            "count": 2,
            "severity": "critical",
            "by_severity": {"critical": 1, "error": 1},
            "first_message": "retried a 429 after 0.0 s, retry-after asked 2 s",
            "first_run": "chaos-4",
            "runs": ["chaos-4"],
        },
        {
            "invariant": "latency_budget",
            "count": 3,
            "severity": "warning",
            "by_severity": {"warning": 3},
            "first_message": "total 9.9 s over budget 2 s",  # run 3's came first
            "first_run": "chaos-3",
            "runs": ["chaos-2", "chaos-3"],
        },
    ]


def _md_rows(md: str, heading: str) -> list[str]:
    section = md.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    return [line for line in section.splitlines() if line.startswith(("| ", "- ", "  - "))]


def test_markdown_lists_the_causes_and_links_runs_to_their_violations() -> None:
    from brownout.proxy.experiment.report_md import render_markdown

    md = render_markdown(report())
    assert _md_rows(md, "Violations")[1:] == [
        "| chaos | `retry_discipline` | 2 | critical 1, error 1 | retried a 429 after 0.0 s, retry-after asked 2 s | "
        "[`chaos-4`](#run-14-violations) |",
        "| chaos | `latency_budget` | 3 | warning | total 9.9 s over budget 2 s | "
        "[`chaos-2`](#run-12-violations), [`chaos-3`](#run-13-violations) |",
    ]
    assert _md_rows(md, "Runs with violations") == [
        '- <a id="run-12-violations"></a>`chaos-2` passed; faults met: http_error',
        "  - `latency_budget` ×2 (warning): total 3.1 s over budget 2 s",
        '- <a id="run-13-violations"></a>`chaos-3` passed; faults met: http_error',
        "  - `latency_budget` ×1 (warning): total 9.9 s over budget 2 s",
        '- <a id="run-14-violations"></a>`chaos-4` failed: exit code 1 (expected 0); faults met: http_error',
        "  - `retry_discipline` ×2 (critical 1, error 1): retried a 429 after 0.0 s, retry-after asked 2 s",
    ]
    targets = set(re.findall(r"\]\(#([^)]+)\)", md))
    assert targets and targets <= set(re.findall(r'<a id="([^"]+)"></a>', md))


class _Links(HTMLParser):
    """Table rows as cell texts, with the ids and the fragment links of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.row_ids: list[str | None] = []
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (href, the text of the cell holding it)
        self._href: str | None = None
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "tr":
            self.rows.append([])
            self.row_ids.append(a.get("id"))
        elif tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
            self._in_cell = True
        elif tag == "a":
            self._href = a.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.rows[-1][-1] += data
        if self._href:
            self.links.append((self._href, data))


def test_html_lists_the_causes_and_links_runs_to_their_violations() -> None:
    from brownout.proxy.experiment.report_html import render_html

    page = _Links()
    page.feed(render_html(report()))
    assert [
        "chaos",
        "retry_discipline",
        "2",
        "critical 1, error 1",
        "retried a 429 after 0.0 s, retry-after asked 2 s",
        "chaos-4",
    ] in page.rows
    assert ["chaos", "latency_budget", "3", "warning", "total 9.9 s over budget 2 s", "chaos-2, chaos-3"] in page.rows
    # The run's row links to its violations, which link back to it.
    i = page.rows.index(next(r for r in page.rows if r[:3] == ["chaos-4", "t", "failed"]))
    assert page.row_ids[i] == "run-14" and page.rows[i][7] == "2"
    assert ("#run-14-violations", "2") in page.links and ("#run-14", "chaos-4") in page.links
    j = page.row_ids.index("run-14-violations")
    assert page.rows[j] == [
        "chaos-4",
        "retry_discipline",
        "2",
        "critical 1, error 1",
        "retried a 429 after 0.0 s, retry-after asked 2 s",
    ]
    assert {href[1:] for href, _ in page.links} <= page.ids


def test_junit_failure_names_the_cause(tmp_path: Path) -> None:
    result = result_with_violations()
    runs = {r.run_id: r for r in result.runs}
    runs["chaos-6"].status, runs["chaos-6"].reason = "timeout", "timed out after 10 s"
    write_reports(tmp_path, make_report(result), {}, [])
    cases = {c.get("name").split()[0]: c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    failed = cases["chaos-4"].find("failure[@type='failed']")
    assert failed is not None
    assert failed.get("message") == (
        "exit code 1 (expected 0) (faults met: http_error | violations: retry_discipline x2 (critical 1, error 1): "
        "retried a 429 after 0.0 s, retry-after asked 2 s)"
    )
    assert (failed.text or "").startswith("faults met: http_error | violations: retry_discipline x2")
    timed_out = cases["chaos-6"].find("error")
    assert timed_out is not None and timed_out.get("message") == "timed out after 10 s (faults met: reset)"
    passed = cases["chaos-7"]
    assert passed.find("failure") is None and passed.find("error") is None


def test_a_violation_in_many_runs_links_the_first_five() -> None:
    from brownout.proxy.experiment.report_html import render_html
    from brownout.proxy.experiment.report_md import render_markdown

    result = fixture_result()
    for r in result.runs:
        if r.phase == "chaos":
            r.violations = [_v("no_loop", "warning", f"loop in {r.run_id}", 100.0 + r.index)]
    rep = make_report(result)
    row = _md_rows(render_markdown(rep), "Violations")[1]
    assert row.startswith("| chaos | `no_loop` | 10 | warning | loop in chaos-1 | [`chaos-1`](#run-11-violations), ")
    assert row.endswith("[`chaos-5`](#run-15-violations), +5 more |")
    page = _Links()
    page.feed(render_html(rep))
    assert [
        "chaos",
        "no_loop",
        "10",
        "warning",
        "loop in chaos-1",
        "chaos-1, chaos-2, chaos-3, chaos-4, chaos-5, +5 more",
    ] in page.rows
