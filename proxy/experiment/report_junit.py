"""junit.xml: one testsuite per phase execution, one testcase per run.

Shape follows the common JUnit XSD (Jenkins junit-10, read by GitLab, GitHub actions and Azure):
per testcase `error*` then `failure*` then `system-out`. A run with status error/timeout is an
<error>; a failed run, and each error- or critical-severity violation, is a <failure>; lower
severities go to system-out. Counts: a testcase with any <error> counts in `errors`, otherwise
with any <failure> in `failures`.
"""

from __future__ import annotations

import logging
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.causes import cut, group_violations, severity_text

__all__ = ["FAILING_SEVERITIES", "junit_tree", "write_junit"]

logger = logging.getLogger(__name__)

FAILING_SEVERITIES = ("error", "critical")
# Characters XML 1.0 forbids (agent output may carry terminal control codes).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _safe(text: str | None) -> str:
    return _INVALID_XML.sub("\ufffd", text or "")


def _cause(run: dict[str, Any]) -> str:
    """What the run met and what it broke: the fault types, then its violations by invariant, worst first."""
    parts = []
    faults = sorted({str(f["fault"]) for f in run.get("faults", [])})
    if faults:
        parts.append("faults met: " + ", ".join(faults))
    groups = group_violations((str(run.get("run_id")), v) for v in run.get("violations", []))
    if groups:
        parts.append(
            "violations: "
            + "; ".join(
                f"{g['invariant']} x{g['count']} ({severity_text(g)}): {cut(g['first_message'])}" for g in groups
            )
        )
    return " | ".join(parts)


def _message(what: str, cause: str) -> str:
    return _safe(f"{what} ({cause})" if cause else what)


def _case(run: dict[str, Any], classname: str) -> tuple[ET.Element, str]:
    case = ET.Element(
        "testcase",
        name=f"{run['run_id']}" + (f" [{run['task']}]" if run.get("task") else ""),
        classname=classname,
        time=f"{run.get('duration_s', 0.0):.3f}",
    )
    kind = "passed"
    status = run.get("status")
    cause = _cause(run)
    head = f"{cause}\n\n" if cause else ""
    if status in ("error", "timeout"):
        ET.SubElement(
            case, "error", message=_message(run.get("reason") or str(status), cause), type=status
        ).text = _safe(head + (run.get("stderr_tail") or ""))
        kind = "error"
    if status == "failed":
        ET.SubElement(
            case, "failure", message=_message(run.get("reason") or "run failed", cause), type="failed"
        ).text = _safe(head + (run.get("stdout_tail") or "") + (run.get("stderr_tail") or ""))
        kind = "failure"
    quiet = []
    for v in run.get("violations", []):
        text = _safe(f"{v.get('invariant')} ({v.get('severity')}): {v.get('message')}")
        if v.get("severity") in FAILING_SEVERITIES:
            ET.SubElement(case, "failure", message=text, type=f"violation.{v.get('invariant')}").text = text
            kind = "error" if kind == "error" else "failure"
        else:
            quiet.append(text)
    faults = [f"{f['rule']}:{f['fault']}" for f in run.get("faults", [])]
    out = [
        f"session(s): {', '.join(run.get('sessions', []))}",
        f"calls: {run.get('calls')} tokens: {run.get('tokens')}",
    ]
    if faults:
        out.append("faults: " + ", ".join(faults))
    out.extend(quiet)
    ET.SubElement(case, "system-out").text = "\n".join(out)
    return case, kind


def junit_tree(report: dict[str, Any]) -> ET.ElementTree:
    """Build the XML tree from a report document."""
    root = ET.Element("testsuites", name=f"brownout experiment {report['experiment']}")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for phase in report["phases"]:
        runs = [r for r in report["runs"] if r["label"] == phase["label"]]
        suite = ET.SubElement(root, "testsuite", name=phase["label"])
        counts = {"tests": 0, "failures": 0, "errors": 0}
        suite_time = 0.0
        for run in runs:
            case, kind = _case(run, f"brownout.{report['experiment']}.{phase['label']}")
            suite.append(case)
            counts["tests"] += 1
            counts["failures"] += kind == "failure"
            counts["errors"] += kind == "error"
            suite_time += float(run.get("duration_s") or 0.0)
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", str(counts["errors"]))
        suite.set("skipped", "0")
        suite.set("time", f"{suite_time:.3f}")
        suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(report.get("started_at") or 0)))
        for k in totals:
            totals[k] += counts[k]
        total_time += suite_time
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: Path, report: dict[str, Any]) -> None:
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)
