"""report.md: a compact Markdown summary for a CI job summary ($GITHUB_STEP_SUMMARY) or a PR comment."""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.causes import (
    LINKED_RUNS,
    cut,
    run_positions,
    runs_with_violations,
    severity_text,
    violations_anchor,
)
from brownout.proxy.experiment.formatting import num, pct, usd
from brownout.proxy.experiment.services import command_text, outcome

__all__ = ["render_markdown", "write_markdown"]

logger = logging.getLogger(__name__)

_ICON = {True: "✅", False: "❌", None: "➖"}
RUNS_LISTED = 50  # runs with violations listed one by one; report.json has every one


def _text(value: Any) -> str:
    # GitHub renders inline HTML in job summaries and PR comments, and `|` ends a table cell: names and
    # reasons come from the experiment file, the agent and the model, so they are shown, never interpreted.
    text = html.escape(" ".join(str(value).split()), quote=False)
    return re.sub(r"([\\`*\[\]|])", r"\\\1", text)


def _code(value: Any, *, in_table: bool = True) -> str:
    # A code span shows its text literally; its fence is longer than any backtick run inside it. Only a
    # table needs its `|` escaped, even in a code span.
    text = " ".join(str(value).split())
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _run_link(run_id: Any, position: int | None) -> str:
    text = _code(run_id)
    return text if position is None else f"[{text}](#{violations_anchor(position)})"


def _violations(report: dict[str, Any]) -> list[str]:
    """Per phase, each invariant violated: how often, how severe, its first message and the runs, linked."""
    rows = []
    positions = run_positions(report)
    for p in report["phases"]:
        for g in p["violations"].get("invariants", []):
            runs = [_run_link(r, positions.get(r)) for r in g["runs"][:LINKED_RUNS]]
            more = len(g["runs"]) - LINKED_RUNS
            runs += [f"+{more} more"] if more > 0 else []
            rows.append(
                f"| {_text(p['label'])} | {_code(g['invariant'])} | {g['count']} | {_text(severity_text(g))} | "
                f"{_text(cut(g['first_message']))} | {', '.join(runs)} |"
            )
    if not rows:
        return []
    head = ["### Violations", "", "| phase | invariant | count | severity | first message | runs |"]
    return [*head, "|---|---|---:|---|---|---|", *rows, ""]


def _runs_with_violations(report: dict[str, Any]) -> list[str]:
    """Each run with violations, anchored for the links above, with its violations by invariant."""
    found = runs_with_violations(report)
    if not found:
        return []
    lines = ["### Runs with violations", ""]
    for position, r, groups in found[:RUNS_LISTED]:
        why = f": {_text(cut(r['reason']))}" if r.get("reason") else ""
        faults = sorted({str(f["fault"]) for f in r.get("faults", [])})
        met = f"; faults met: {_text(', '.join(faults))}" if faults else ""
        # The one piece of raw HTML: an id made from the run's position, never from its name.
        lines.append(
            f'- <a id="{violations_anchor(position)}"></a>{_code(r["run_id"], in_table=False)} {_text(r["status"])}{why}{met}'
        )
        lines += [
            f"  - {_code(g['invariant'], in_table=False)} ×{g['count']} ({_text(severity_text(g))}): {_text(cut(g['first_message']))}"
            for g in groups
        ]
    if len(found) > RUNS_LISTED:
        lines.append(f"- … {len(found) - RUNS_LISTED} more runs with violations in report.json")
    return [*lines, ""]


def heading(kind: str, report: dict[str, Any], facts: str) -> list[str]:
    """A report's title (kind, name, status, gate, exit code) and its facts line, with the abort and error."""
    gate = report["gate"]
    return [
        f"## brownout {kind} {_code(report['experiment'], in_table=False)}: {_text(report['status'])} "
        f"(gate {'passed' if gate['passed'] else 'failed'}, exit {report['exit_code']})",
        "",
        f"{facts} · {report['duration_s']:.1f} s"
        + (f" · aborted: {_text(report['abort_reason'])}" if report.get("abort_reason") else "")
        + (f" · error: {_text(report['error'])}" if report.get("error") else ""),
        "",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown text of a report document."""
    gate = report["gate"]
    lines = [
        *heading("experiment", report, f"seed {report['seed']} · {len(report['runs'])} runs"),
        "| phase | runs | success (95% CI) | drop vs baseline (p) | p50 / p95 s | calls/run | tokens/run | cost/run | faults | violations |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for p in report["phases"]:
        lo, hi = p["success_ci95"]
        vs = p.get("vs_baseline")
        drop = f"{pct(vs['drop'])} (p={num(vs['p_value'], '.3f')})" + (" ⚠️" if vs["significant"] else "") if vs else ""
        d = p["duration_s"]
        lines.append(
            f"| {_text(p['label'])}{' 🔥' if p['chaos'] else ''} | {p['runs']} | {pct(p['success_rate'])} "
            f"[{pct(lo)}, {pct(hi)}] | {drop} | {num(d['p50'])} / {num(d['p95'])} | "
            f"{num(p['calls_per_run'], '.1f')} | {num(p['tokens_per_run'], '.0f')} | {usd(p.get('cost_usd_per_run'))} | "
            f"{p['faults']} | {p['violations']['total']} |"
        )
    rob = report["robustness"]
    rec = report["recovery"]
    lines += [
        "",
        f"**Robustness** {num(rob['score'], '.3f')} over {rob['runs_considered']} faulted runs · "
        f"**recovery** {pct(rec['rate'])} ({rec['k']}/{rec['n']})",
        "",
    ]
    lines += _violations(report)
    if repro := report.get("reproducibility"):
        lines += [f"**Reproducibility** {num(repro['score'], '.2f')} over {repro['repeats']} passes", ""]
        lines += [f"- {_code(d['run'])} differs in pass {d['repeat']}: {_text(d['where'])}" for d in repro["differing"]]
        lines += [""] if repro["differing"] else []
    if report["hypotheses"]:
        lines += ["### Steady state", "", "| hypothesis | scope | result | values |", "|---|---|---|---|"]
        for h in report["hypotheses"]:
            vals = ", ".join(f"{_text(c['label'])}={num(c['value'], '.3g')}" for c in h["checks"]) or "not evaluated"
            lines.append(f"| {_code(h['hypothesis'])} | {_text(h['scope'])} | {_ICON[h['ok']]} | {vals} |")
        lines.append("")
    if gate["checks"]:
        lines += ["### Gate", "", "| check | value | threshold | result |", "|---|---|---|---|"]
        for c in gate["checks"]:
            lines.append(
                f"| {_text(c['check'])} | {num(c['value'], '.3g')} {_text(c.get('note', ''))} | {c['threshold']:g} | {_ICON[c['ok']]} |"
            )
        lines.append("")
    if report["fault_breakdown"]:
        lines += ["### Faults", "", "| fault | target | runs met | failed | failure rate |", "|---|---|---:|---:|---|"]
        for row in report["fault_breakdown"]:
            lines.append(
                f"| {_text(row['fault'])} | {_text(row['target'])} | {row['runs']} | {row['failed']} | {pct(row['rate'])} |"
            )
        lines.append("")
    if report["cost_of_chaos"]:
        lines += ["### Cost of chaos", ""]
        money = report.get("cost_usd") or {}
        if money.get("extra_per_run") is not None:
            lines += [
                f"{usd(money['extra_per_run'], '+')} per run under chaos (baseline {usd(money['baseline_per_run'])}, "
                f"chaos {usd(money['chaos_per_run'])}; USD at list prices)",
                "",
            ]
        lines += [
            "| fault | faulted calls | retries | retry tokens | retry cost | extra calls/run | extra cost/run |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind, c in report["cost_of_chaos"].items():
            lines.append(
                f"| {_text(kind)} | {c['faulted_exchanges']} | {c['retried_exchanges']} | {c['retry_tokens']} | "
                f"{usd(c.get('retry_cost_usd'))} | {num(c['extra_calls_per_run'], '+.1f')} | "
                f"{usd(c.get('extra_cost_usd_per_run'), '+')} |"
            )
        lines.append("")
    if report.get("services"):
        lines += ["### Services", "", "| service | command | outcome | log |", "|---|---|---|---|"]
        for svc in report["services"]:
            lines.append(
                f"| {_text(svc['name'])} | {_code(command_text(svc['command']))} | {_text(outcome(svc))} | "
                f"{_text(svc['log'])} |"
            )
        lines.append("")
    lines += _runs_with_violations(report)
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_markdown(report), encoding="utf-8")
