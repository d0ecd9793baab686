"""Reports from the fixture: JSON parses with its schema version, JUnit has a valid structure, HTML is self-contained."""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
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


def _bad(field: str) -> str:
    """Markup, quotes, a pipe, a backtick and an entity-looking ampersand, tagged with the field it goes into."""
    return f'<script>alert("{field}")</script>|`\'&amp;{field}'


def _hostile_report() -> dict[str, Any]:
    """A report whose every user-controlled string is markup."""
    result = fixture_result()
    for r in result.runs:
        for v in r.violations:  # invariant names come from the config, messages from the traffic
            v["invariant"], v["message"] = _bad("invariant"), _bad("message")
    report = make_report(result)
    report["experiment"] = _bad("experiment")
    report["abort_reason"], report["error"] = _bad("abort"), _bad("error")
    labels = {}
    for p in report["phases"]:
        labels[p["label"]] = p["label"] = _bad(f"phase-{p['label']}")
    for r in report["runs"]:
        r["label"] = labels[r["label"]]
        r["run_id"], r["task"], r["reason"] = _bad("run"), _bad("task"), _bad("reason")
        r["status"] = _bad("status")
        r["faults"] = [{"rule": _bad("rule"), "fault": _bad("fault"), "tool": None, "provider": "openai"}]
    for v in report["violation_timeline"]:
        v["label"] = _bad("timeline")
    for row in report["fault_breakdown"]:
        row["fault"], row["target"] = _bad("kind"), _bad("target")
    report["cost_of_chaos"] = {_bad("cost"): next(iter(report["cost_of_chaos"].values()))}
    report["hypotheses"] = [
        {
            "hypothesis": _bad("hypothesis"),
            "metric": "success_rate",
            "op": ">=",
            "threshold": 1.0,
            "scope": _bad("scope"),
            "phase": None,
            "ok": False,
            "checks": [{"label": _bad("check-label"), "value": 0.5, "ok": False}],
        }
    ]
    report["services"] = [
        {
            "name": _bad("service"),
            "command": [_bad("argv"), "--port", "1"],
            "log": "javascript:alert(1)",
            "port": 1,
            "pid": 1,
            "ready_after_s": None,
            "exit_code": 3,
            "stopped_by": None,
            "exited_early": True,
            "error": _bad("service-error"),
        }
    ]
    report["gate"]["checks"].append(
        {"check": _bad("check"), "value": None, "threshold": 1, "ok": False, "note": _bad("note")}
    )
    return report


class _Page(HTMLParser):
    """Every tag, attribute and piece of text of a page, as a browser would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.text: list[str] = []
        self.ids: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attrs.add(name)
            self.text.append(value or "")
            {"id": self.ids, "href": self.hrefs}.get(name, []).append(value or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


# What the template itself writes; anything else was injected.
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b", "code", "span", "small", "div"}
HTML_TAGS |= {"figure", "figcaption", "table", "thead", "tbody", "tr", "th", "td", "a"}
SVG_TAGS = {"svg", "line", "text", "rect", "circle", "path", "tspan"}
ATTRS = {"lang", "charset", "class", "role", "aria-label", "viewbox", "width", "height", "font-family", "font-size"}
ATTRS |= {"id", "href", "fill-opacity"}
ATTRS |= {"x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "d", "fill", "stroke", "stroke-width", "text-anchor"}


def test_html_escapes_every_user_string(tmp_path: Path) -> None:
    report = _hostile_report()
    write_reports(tmp_path, report, {}, [])
    html = (tmp_path / "report.html").read_text()
    assert "<script" not in html and 'alert("' not in html and "&amp;experiment" not in html
    page = _Page()
    page.feed(html)
    assert page.tags <= HTML_TAGS | SVG_TAGS, page.tags - HTML_TAGS - SVG_TAGS
    assert page.attrs <= ATTRS, page.attrs - ATTRS
    shown = "\n".join(page.text)
    fields = ["experiment", "abort", "error", "phase-baseline", "phase-chaos", "run", "task", "reason", "status"]
    fields += ["fault", "cost", "hypothesis", "scope", "check-label", "check", "note", "service", "invariant"]
    fields += ["message"]
    for field in fields:
        assert _bad(field) in shown, f"{field} is not shown as text"
    # The only links are to the page's own anchors, made from run positions (a log name that is not a
    # plain file name is not a link).
    assert page.hrefs and all(re.fullmatch(r"#run-\d+(-violations)?", h) for h in page.hrefs), page.hrefs
    assert {h[1:] for h in page.hrefs} <= set(page.ids) and len(page.ids) == len(set(page.ids))
    assert shlex.join([_bad("argv"), "--port", "1"]) in shown
    row = report["fault_breakdown"][0]
    assert f"{row['fault']} · {row['target']}"[:34] in shown  # the chart label, cut to fit
    ET.fromstring(html.split("<body>", 1)[1].split("</body>")[0].join(["<div>", "</div>"]))


def test_markdown_shows_markup_as_text(tmp_path: Path) -> None:
    write_reports(tmp_path, _hostile_report(), {}, [])
    md = (tmp_path / "report.md").read_text()
    # The one piece of raw HTML: anchors built from run positions
    prose = re.sub(r'<a id="run-\d+-violations"></a>', "", md)
    prose = re.sub(r"\\[\\`*\[\]|]", "", prose)  # backslash escapes are literal characters
    prose = re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", prose)  # so are code spans
    assert "<" not in prose, "raw markup in report.md"
    assert "&amp;amp;abort" in md  # an ampersand that looks like an entity stays visible as typed
    table: list[str] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            # An unescaped | in a value would add a column to its row.
            widths = {len(re.findall(r"(?<!\\)\|", row)) for row in table}
            assert len(widths) == 1, table
            table = []
    assert "alert" in md and "hypothesis" in md and '&lt;script&gt;alert("message")' in md


def test_cost_of_chaos_in_currency_in_markdown_and_html() -> None:
    from brownout.proxy.experiment.report_html import render_html
    from brownout.proxy.experiment.report_md import render_markdown

    report = make_report()
    assert report["cost_usd"]["extra_per_run"] == pytest.approx(-6e-4)
    md = render_markdown(report)
    assert "-$0.0006 per run under chaos (baseline $0.002, chaos $0.0014; USD at list prices)" in md
    # http_error: four retries at $0.0005; its runs cost $0.0015 against the baseline's $0.002.
    assert "| http_error | 4 | 4 | 20 | $0.002 | +1.0 | -$0.0005 |" in md
    assert "| reset | 2 | 0 | 0 | n/a | -1.0 | n/a |" in md
    assert "| 10 | 100.0% [72.2%, 100.0%] |  | 5.50 / 9.55 | 2.0 | 20 | $0.002 |" in md
    page = render_html(report)
    assert "-$0.0006 per run under chaos" in page and "<td>$0.002</td>" in page


def test_a_cost_difference_that_rounds_to_nothing_is_never_a_negative_zero() -> None:
    from brownout.proxy.experiment.report_html import render_html
    from brownout.proxy.experiment.report_md import render_markdown

    result = fixture_result()
    for r in result.runs:
        for ex in r.exchanges:  # chaos runs come out a few millionths of a dollar cheaper
            ex.cost_usd = None if ex.cost_usd is None else 1e-6 if r.phase == "baseline" else 1e-7
    report = make_report(result)
    assert -1e-4 < report["cost_usd"]["extra_per_run"] < 0
    md, page = render_markdown(report), render_html(report)
    assert "-<$0.0001 per run under chaos (baseline <$0.0001, chaos <$0.0001;" in md
    assert "-&lt;$0.0001 per run under chaos" in page  # autoescaped
    for text in (md, page):
        assert not re.search(r"-\$0(\.0+)?\b", text)
