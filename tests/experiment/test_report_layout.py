"""report.html's charts stay readable with many phases: no text overlaps another text or leaves its chart.

Two checks of the same promise. Without a browser: every <text> of every chart, boxed with the
width estimate the layout uses (`textfit.text_width`), against every other. With Chromium (Debian's
`chromium`, which `make test` installs): the page rendered headless, every text measured by the
browser with its real font; the estimate must bound each real width, so the first check means
something on machines without a browser.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.experiment.analysis import analyze
from brownout.proxy.experiment.charts import FONT_PX
from brownout.proxy.experiment.config import ExperimentConfig
from brownout.proxy.experiment.model import ExperimentResult, PhaseRun
from brownout.proxy.experiment.report_html import render_html
from brownout.proxy.experiment.report_json import build_report
from brownout.proxy.experiment.textfit import text_width
from brownout.proxy.experiment.verdict import check_hypotheses, evaluate_gate, verdict
from tests.discover.test_generate import generated
from tests.experiment.builders import exchange, run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="chromium absent: `make test` installs the Debian package chromium"
)
# A text's box: the font's ascent above the baseline and its descent below (DejaVu Sans: 0.93 and 0.24 em).
ASCENT, DESCENT = 0.95 * FONT_PX, 0.25 * FONT_PX
SLACK = 0.5  # px: rounding of the positions the charts write with one decimal


@dataclass(frozen=True)
class Box:
    text: str
    left: float
    right: float
    top: float
    bottom: float

    def overlaps(self, other: Box) -> bool:
        return (
            min(self.right, other.right) - max(self.left, other.left) > SLACK
            and min(self.bottom, other.bottom) - max(self.top, other.top) > SLACK
        )


def _report(doc: dict[str, Any], result: ExperimentResult) -> dict[str, Any]:
    cfg = ExperimentConfig.model_validate(doc)
    a = analyze(result, cfg)
    hyp = check_hypotheses(cfg, a["phases"])
    gate = evaluate_gate(cfg, a)
    status, code = verdict(result.status, result.error, hyp, gate)
    return build_report(result, a, hyp, gate, status, code)


def _result(doc: dict[str, Any]) -> ExperimentResult:
    """Three runs per phase; a chaos run meets every rule of its phase, one in three fails."""
    runs = []
    for k, phase in enumerate(doc["phases"]):
        for i in range(1, 4):
            exs = [
                exchange(faults=(r["fault"]["type"],), tool=r["match"].get("tool") or r["match"].get("host"), at=i)
                for r in phase.get("rules", [])
            ] or [exchange()]
            violations = [
                {"invariant": "retry_discipline", "severity": "error", "message": "m", "timestamp": 100.0 + k}
            ]
            status = "failed" if k and i == 1 else "passed"
            runs.append(run(phase["name"], i, status, exs, violations if k else [], duration=float(k + i)))
    phases = [PhaseRun(p["name"], p["name"], 1, bool(p.get("rules")), "x") for p in doc["phases"]]
    return ExperimentResult(doc["name"], 0, started_at=100.0, finished_at=160.0, phases=phases, runs=runs)


def discovered_report() -> dict[str, Any]:
    """A run of the experiment `brownout discover` generates (ten phases)."""
    doc = generated()
    assert len(doc["phases"]) == 10
    return _report(doc, _result(doc))


def crowded_report() -> dict[str, Any]:
    """Forty phases with names of the longest length allowed, and faults on tools with wide names."""
    wide_tool = "天気を調べる_🌦️_" + "W" * 40
    phases: list[dict[str, Any]] = [{"name": "baseline"}]
    for i in range(1, 40):
        tool = wide_tool if i % 2 else f"tool-{i:02d}-" + "m" * 50
        rule = {"name": f"r{i}", "match": {"tool": tool}, "fault": {"type": "latency", "delay_ms": 1}}
        phases.append({"name": f"phase-{i:02d}-" + "M" * 55, "rules": [rule]})
    doc = {"name": "crowded", "agent": {"command": ["true"]}, "phases": phases}
    return _report(doc, _result(doc))


REPORTS = {"discovered": discovered_report, "crowded": crowded_report}


def _svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]


def _shown(text: ET.Element) -> str:
    """What a <text> draws: its own text and its <tspan>s', never its <title> (a tooltip)."""
    parts = [text.text or ""]
    for child in text:
        if child.tag != "title":
            parts.append("".join(child.itertext()))
        parts.append(child.tail or "")
    return "".join(parts)


def estimated_boxes(svg: ET.Element) -> list[Box]:
    boxes = []
    for t in svg.iter("text"):
        shown = _shown(t)
        width = text_width(shown, FONT_PX)
        x, y = float(t.get("x", 0)), float(t.get("y", 0))
        left = {"end": x - width, "middle": x - width / 2}.get(t.get("text-anchor", "start"), x)
        boxes.append(Box(shown, left, left + width, y - ASCENT, y + DESCENT))
    return boxes


def assert_readable(title: str, width: float, height: float, boxes: list[Box]) -> None:
    assert boxes, f"{title}: no text found"
    for b in boxes:
        inside = b.left >= -SLACK and b.right <= width + SLACK and b.top >= -SLACK and b.bottom <= height + SLACK
        assert inside, f"{title}: {b} leaves the {width}x{height} chart"
    clashes = [(a.text, b.text) for a, b in combinations(boxes, 2) if a.overlaps(b)]
    assert not clashes, f"{title}: overlapping texts {clashes[:5]}"


@pytest.mark.parametrize("name", REPORTS)
def test_no_chart_text_overlaps_or_leaves_its_chart(name: str) -> None:
    svgs = _svgs(render_html(REPORTS[name]()))
    assert len(svgs) == 4
    for svg in svgs:
        assert_readable(
            str(svg.get("aria-label")), float(svg.get("width", 0)), float(svg.get("height", 0)), estimated_boxes(svg)
        )


def test_every_phase_has_its_row_and_a_cut_label_keeps_its_name() -> None:
    report = crowded_report()
    success, durations, _, faults = _svgs(render_html(report))
    for svg in (success, durations):
        labels = [t for t in svg.iter("text") if t.get("text-anchor") == "end"]
        assert len(labels) == 40
        for t, phase in zip(labels, report["phases"], strict=True):
            title = t.find("title")
            shown = _shown(t)
            if title is None:
                assert shown == phase["label"]
            else:  # cut to fit, the whole name a hover away
                assert title.text == phase["label"] and shown.endswith("…") and phase["label"].startswith(shown[:-1])
    assert len([t for t in faults.iter("text") if t.get("text-anchor") == "end"]) == len(report["fault_breakdown"])


# Run in the page by the browser test only (the report itself has no scripts): every chart's size and
# every text's rendered box and advance width, relative to its chart.
MEASURE = """<script>
const out = [];
for (const svg of document.querySelectorAll("svg")) {
  const c = svg.getBoundingClientRect();
  const texts = [];
  for (const t of svg.querySelectorAll("text")) {
    const r = t.getBoundingClientRect();
    const shown = [...t.childNodes].filter(n => n.nodeName !== "title").map(n => n.textContent).join("");
    texts.push({text: shown, width: t.getComputedTextLength(), left: r.left - c.left, right: r.right - c.left,
                top: r.top - c.top, bottom: r.bottom - c.top});
  }
  out.push({title: svg.getAttribute("aria-label"), width: c.width, height: c.height, texts});
}
const pre = document.createElement("pre");
pre.id = "measured";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def measure_in_chromium(page: str, tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    args += [
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    done = subprocess.run([*args, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, flags=re.S)
    assert found, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


@needs_chromium
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", REPORTS)
def test_rendered_in_chromium_no_text_overlaps_and_the_estimate_bounds_every_width(name: str, tmp_path: Path) -> None:
    charts = measure_in_chromium(render_html(REPORTS[name]()), tmp_path)
    assert len(charts) == 4
    for chart in charts:
        boxes = [Box(t["text"], t["left"], t["right"], t["top"], t["bottom"]) for t in chart["texts"]]
        assert_readable(chart["title"], chart["width"], chart["height"], boxes)
        for t in chart["texts"]:
            assert text_width(t["text"], FONT_PX) >= t["width"], f"{t['text']!r}: rendered {t['width']:.1f} px wide"
