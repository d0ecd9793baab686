"""report.html: one self-contained page (inline CSS and SVG, no scripts, no external URLs)."""

from __future__ import annotations

import logging
from html import escape
from pathlib import Path
from typing import Any

from brownout.proxy.experiment import svg
from brownout.proxy.experiment.report_md import _num, _pct

__all__ = ["render_html", "write_html"]

logger = logging.getLogger(__name__)

_CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1180px;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}table{border-collapse:collapse;font-size:.9rem}
td,th{border:1px solid #ddd;padding:.3rem .5rem;text-align:left}th{background:#f5f5f5}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(570px,1fr));gap:1rem}
.badge{padding:.15rem .5rem;border-radius:.3rem;color:#fff}.ok{background:#2e7d32}.bad{background:#c62828}
.passed{color:#2e7d32}.failed,.error,.timeout{color:#c62828}figure{margin:0}figcaption{font-weight:600}"""


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _charts(report: dict[str, Any]) -> str:
    phases = report["phases"]
    success = svg.bars_with_intervals(
        [(p["label"], p["success_rate"], p["success_ci95"][0], p["success_ci95"][1], p["chaos"]) for p in phases],
        "Success rate per phase with Wilson 95% intervals",
    )
    latency = svg.box_plots([(p["label"], p["duration_s"]["values"]) for p in phases], "Run duration per phase (s)")
    timeline = svg.timeline(
        [(v["t_s"], str(v["severity"]), str(v["label"])) for v in report["violation_timeline"]],
        report["duration_s"],
        "Violations over time (cumulative, by severity)",
    )
    faults = svg.hbars(
        [(f"{r['fault']} · {r['target']}", r["rate"], f"{r['failed']}/{r['runs']}") for r in report["fault_breakdown"]],
        "Failure rate of runs that met each fault",
    )
    figs = [
        ("Success per phase (95% CI)", success),
        ("Run duration", latency),
        ("Violations over time", timeline),
        ("Failure rate per fault", faults),
    ]
    return (
        '<div class="grid">'
        + "".join(f"<figure><figcaption>{escape(t)}</figcaption>{s}</figure>" for t, s in figs)
        + "</div>"
    )


def render_html(report: dict[str, Any]) -> str:
    """The HTML page of a report document."""
    gate = report["gate"]
    badge = f'<span class="badge {"ok" if gate["passed"] else "bad"}">gate {"passed" if gate["passed"] else "failed"}</span>'
    phase_rows = [
        [
            escape(p["label"]) + (" <small>(chaos)</small>" if p["chaos"] else ""),
            str(p["runs"]),
            f"{_pct(p['success_rate'])} [{_pct(p['success_ci95'][0])}, {_pct(p['success_ci95'][1])}]",
            (
                f"{_pct(p['vs_baseline']['drop'])} (p={_num(p['vs_baseline']['p_value'], '.3f')})"
                if p.get("vs_baseline")
                else ""
            ),
            f"{_num(p['duration_s']['p50'])} / {_num(p['duration_s']['p95'])}",
            _num(p["calls_per_run"], ".1f"),
            _num(p["tokens_per_run"], ".0f"),
            str(p["faults"]),
            str(p["violations"]["total"]),
        ]
        for p in phases_of(report)
    ]
    hyp_rows = [
        [
            f"<code>{escape(h['hypothesis'])}</code>",
            h["scope"],
            {True: "held", False: "deviated", None: "not evaluated"}[h["ok"]],
            escape(", ".join(f"{c['label']}={_num(c['value'], '.3g')}" for c in h["checks"])),
        ]
        for h in report["hypotheses"]
    ]
    gate_rows = [
        [
            c["check"],
            _num(c["value"], ".3g"),
            f"{c['threshold']:g}",
            "pass" if c["ok"] else f"fail {escape(c.get('note', ''))}",
        ]
        for c in gate["checks"]
    ]
    cost_rows = [
        [
            escape(k),
            str(c["faulted_exchanges"]),
            str(c["retried_exchanges"]),
            str(c["retry_tokens"]),
            _num(c["extra_calls_per_run"], "+.1f"),
            _num(c["extra_tokens_per_run"], "+.0f"),
        ]
        for k, c in report["cost_of_chaos"].items()
    ]
    run_rows = [
        [
            escape(r["run_id"]),
            escape(r["task"][:60]),
            f'<span class="{r["status"]}">{r["status"]}</span>',
            f"{r['duration_s']:.2f}",
            str(r["calls"]),
            str(r["tokens"]),
            escape(", ".join(sorted({f["fault"] for f in r["faults"]}))),
            str(len(r["violations"])),
            escape(r["reason"][:120]),
        ]
        for r in report["runs"]
    ]
    rob, rec = report["robustness"], report["recovery"]
    parts = [
        f"<h1>brownout experiment <code>{escape(report['experiment'])}</code>: {escape(report['status'])} {badge}</h1>",
        f"<p>seed {report['seed']} · {len(report['runs'])} runs · {report['duration_s']:.1f} s · exit {report['exit_code']}"
        + (f" · aborted: {escape(str(report['abort_reason']))}" if report.get("abort_reason") else "")
        + (f" · error: {escape(str(report['error']))}" if report.get("error") else "")
        + "</p>",
        f"<p><b>Robustness</b> {_num(rob['score'], '.3f')} over {rob['runs_considered']} faulted runs · "
        f"<b>recovery</b> {_pct(rec['rate'])} ({rec['k']}/{rec['n']})</p>",
        _charts(report),
        "<h2>Phases</h2>",
        _table(
            [
                "phase",
                "runs",
                "success (95% CI)",
                "drop vs baseline",
                "p50 / p95 s",
                "calls/run",
                "tokens/run",
                "faults",
                "violations",
            ],
            phase_rows,
        ),
    ]
    if hyp_rows:
        parts += ["<h2>Steady state</h2>", _table(["hypothesis", "scope", "result", "values"], hyp_rows)]
    if gate_rows:
        parts += ["<h2>Gate</h2>", _table(["check", "value", "threshold", "result"], gate_rows)]
    if cost_rows:
        parts += [
            "<h2>Cost of chaos</h2>",
            _table(
                ["fault", "faulted calls", "retries", "retry tokens", "extra calls/run", "extra tokens/run"], cost_rows
            ),
        ]
    parts += [
        "<h2>Runs</h2>",
        _table(["run", "task", "status", "s", "calls", "tokens", "faults", "violations", "reason"], run_rows),
    ]
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>brownout: {escape(report["experiment"])}'
        f"</title><style>{_CSS}</style></head><body>{''.join(parts)}</body></html>\n"
    )


def phases_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report["phases"])


def write_html(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_html(report), encoding="utf-8")
