"""report.md, junit.xml and report.html of a staging experiment, from its report document.

They reuse the command-shaped reports' machinery: Markdown's escaping (names and messages are shown,
never interpreted), the JUnit shape CI servers read (a testsuite per phase, a testcase per check), and
the HTML page's autoescaping environment and inline-SVG charts, here time series with the phases as
bands and the abort moment as a red line.
"""

from __future__ import annotations

import logging
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from brownout.proxy.experiment import charts
from brownout.proxy.experiment.formatting import num, pct, usd
from brownout.proxy.experiment.report_html import _environment
from brownout.proxy.experiment.report_junit import _safe
from brownout.proxy.experiment.report_md import _code, _text, heading

__all__ = ["render_html", "render_markdown", "staging_charts", "write_html", "write_junit", "write_markdown"]

log = logging.getLogger(__name__)

_ICON = {True: "✅", False: "❌", None: "➖"}


def _t(report: dict[str, Any], at: float | None) -> str:
    return "" if at is None else f"+{at - report['started_at']:.1f} s"


def _applied(phase: dict[str, Any]) -> str:
    if not phase["chaos"]:
        return "fleet's own rules"
    acks = phase.get("acknowledged") or {}
    after = phase.get("acknowledged_after_s")
    ok = sum(1 for a in acks.values() if a == "ok")
    return f"{ok} replicas" + (f" in {after:.2f} s" if after is not None else " (not every replica said so)")


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown text of a staging report."""
    gate = report["gate"]
    lines = [
        *heading("staging experiment", report, f"run {_code(report['run_id'], in_table=False)}"),
        "| phase | status | from | applied | exchanges | faults | violations | error rate | p95 s | cost |",
        "|---|---|---|---|---:|---:|---:|---|---|---:|",
    ]
    for p in report["phases"]:
        f = p.get("figures") or {}
        lines.append(
            f"| {_text(p['name'])}{' 🔥' if p['chaos'] else ''} | {_text(p['status'])} | {_t(report, p['started_at'])} | "
            f"{_text(_applied(p))} | {num(f.get('exchanges'), '.0f')} | {num(f.get('faults'), '.0f')} | "
            f"{num(f.get('violations'), '.0f')} | {pct(f.get('error_rate'))} | {num(f.get('p95_latency_s'))} | "
            f"{usd(f.get('cost_usd'))} |"
        )
    lines.append("")
    if abort := report.get("abort"):
        pulled = (
            f"kill switch pulled {_t(report, abort['paused_at'])}"
            if abort.get("paused_at")
            else "kill switch not pulled"
        )
        lines += [f"**Aborted** {_t(report, abort['at'])}: {_text(abort['reason'])}; {_text(pulled)}", ""]
    if report["hypotheses"]:
        lines += ["### Steady state", "", "| check | scope | result | worst value per phase |", "|---|---|---|---|"]
        for h in report["hypotheses"]:
            vals = ", ".join(
                f"{_text(c['label'])}={num(c['value'], '.4g')} ({c['breaches']}/{c['probes']} breached)"
                for c in h["checks"]
            )
            lines.append(
                f"| {_code(h['hypothesis'])} | {_text(h['scope'])} | {_ICON[h['ok']]} | {vals or 'not evaluated'} |"
            )
        lines.append("")
    if gate["checks"]:
        lines += ["### Gate", "", "| check | value | threshold | result |", "|---|---|---|---|"]
        for c in gate["checks"]:
            note = f" {_text(c['note'])}" if c.get("note") else ""
            lines.append(
                f"| {_code(c['check'])} | {num(c['value'], '.4g')}{note} | {c['threshold']:g} | {_ICON[c['ok']]} |"
            )
        lines.append("")
    faults = [(p["name"], r) for p in report["phases"] for r in (p.get("figures") or {}).get("faults_by_rule", [])]
    if faults:
        lines += ["### Faults", "", "| phase | rule | fault | count |", "|---|---|---|---:|"]
        lines += [f"| {_text(ph)} | {_code(r['rule'])} | {_text(r['fault'])} | {r['count']:g} |" for ph, r in faults]
        lines.append("")
    broken = [
        (p["name"], r) for p in report["phases"] for r in (p.get("figures") or {}).get("violations_by_invariant", [])
    ]
    if broken:
        lines += ["### Violations", "", "| phase | invariant | severity | count |", "|---|---|---|---:|"]
        lines += [
            f"| {_text(ph)} | {_code(r['invariant'])} | {_text(r['severity'])} | {r['count']:g} |" for ph, r in broken
        ]
        lines.append("")
    lines += ["### Timeline", ""]
    lines += [f"- {_t(report, e['t'])} {_text(e['event'])}" for e in report["events"]]
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_markdown(report), encoding="utf-8")


def junit_tree(report: dict[str, Any]) -> ET.ElementTree:
    """A testsuite per phase; a testcase per steady-state check and gate check in it; the abort an <error>."""
    root = ET.Element("testsuites", name=f"brownout staging experiment {report['experiment']}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    abort = report.get("abort") or {}
    for p in report["phases"]:
        suite = ET.SubElement(root, "testsuite", name=p["name"])
        counts = dict.fromkeys(totals, 0)
        cases: list[tuple[str, bool | None, str]] = []
        for h in report["hypotheses"]:
            for c in h["checks"]:
                if c["label"] == p["name"]:
                    why = f"worst value {num(c['value'], '.4g')}; {c['breaches']} of {c['probes']} probes breached"
                    cases.append((f"steady state: {h['hypothesis']}", c["ok"], why))
        for c in report["gate"]["checks"]:
            if c.get("phase") == p["name"]:
                cases.append((f"gate: {c['check']}", c["ok"], f"value {num(c['value'], '.4g')} {c.get('note', '')}"))
        for name, ok, why in cases:
            case = ET.SubElement(
                suite, "testcase", name=_safe(name), classname=f"brownout.{report['experiment']}.{p['name']}", time="0"
            )
            if ok is False:
                ET.SubElement(case, "failure", message=_safe(why), type="deviated").text = _safe(why)
                counts["failures"] += 1
        if p["status"] == "skipped":
            case = ET.SubElement(
                suite, "testcase", name="phase", classname=f"brownout.{report['experiment']}", time="0"
            )
            ET.SubElement(case, "skipped", message=_safe(report.get("abort_reason") or "not run"))
            counts["skipped"] += 1
        if abort.get("phase") == p["name"] or (p["status"] == "aborted" and abort):
            case = ET.SubElement(
                suite, "testcase", name="abort", classname=f"brownout.{report['experiment']}", time="0"
            )
            ET.SubElement(case, "error", message=_safe(abort.get("reason", "")), type="aborted").text = _safe(
                abort.get("reason", "")
            )
            counts["errors"] += 1
        counts["tests"] = len(suite)
        started = p.get("started_at") or report["started_at"]
        spent = (p.get("finished_at") or started) - started
        suite.attrib.update({k: str(v) for k, v in counts.items()})
        suite.set("time", f"{spent:.3f}")
        suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)))
        for k in totals:
            totals[k] += counts[k]
    root.attrib.update({k: str(v) for k, v in totals.items() if k != "skipped"})
    root.set("time", f"{report['duration_s']:.3f}")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, report: dict[str, Any]) -> None:
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)


def staging_charts(report: dict[str, Any]) -> list[tuple[str, charts.Chart]]:
    """A time-series chart per query: the checks' first, then brownout's figures."""
    t0 = report["started_at"]
    phases = [
        (p["name"], p["started_at"] - t0, (p["finished_at"] or p["started_at"]) - t0, p["chaos"])
        for p in report["phases"]
        if p.get("started_at") is not None
    ]
    abort = report.get("abort")
    end = max([report["duration_s"], *(s["end"] - t0 for s in report["series"])])
    out = []
    for s in report["series"]:
        lines = [
            (
                ", ".join(f"{k}={v}" for k, v in sorted(x["labels"].items())) or s["name"],
                [(t - t0, v) for t, v in x["points"]],
            )
            for x in s["series"]
        ]
        chart = charts.series(
            lines,
            phases,
            end,
            f"{s['name']}: {s['query']}",
            abort_s=None if not abort else abort["at"] - t0,
            threshold=s.get("threshold"),
        )
        out.append((s["name"] + (f" (error: {s['error']})" if s.get("error") else ""), chart))
    return out


def render_html(report: dict[str, Any]) -> str:
    """The self-contained HTML page of a staging report."""
    template = _environment().get_template("staging.html.j2")
    return template.render(
        report=report, charts=staging_charts(report), since=lambda at: _t(report, at), applied=_applied
    )


def write_html(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_html(report), encoding="utf-8")
