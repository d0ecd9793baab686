"""report.md: a compact Markdown summary for a CI job summary ($GITHUB_STEP_SUMMARY) or a PR comment."""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.services import command_text, outcome

__all__ = ["render_markdown", "write_markdown"]

logger = logging.getLogger(__name__)

_ICON = {True: "✅", False: "❌", None: "➖"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _usd(x: float | None, sign: str = "") -> str:
    """US dollars with enough digits for a single LLM call (fractions of a cent)."""
    if x is None:
        return "n/a"
    return f"{'-' if x < 0 else sign if x > 0 else ''}${abs(x):.4f}"


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


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown text of a report document."""
    gate = report["gate"]
    lines = [
        f"## brownout experiment {_code(report['experiment'], in_table=False)}: {_text(report['status'])} "
        f"(gate {'passed' if gate['passed'] else 'failed'}, exit {report['exit_code']})",
        "",
        f"seed {report['seed']} · {len(report['runs'])} runs · {report['duration_s']:.1f} s"
        + (f" · aborted: {_text(report['abort_reason'])}" if report.get("abort_reason") else "")
        + (f" · error: {_text(report['error'])}" if report.get("error") else ""),
        "",
        "| phase | runs | success (95% CI) | drop vs baseline (p) | p50 / p95 s | calls/run | tokens/run | cost/run | faults | violations |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for p in report["phases"]:
        lo, hi = p["success_ci95"]
        vs = p.get("vs_baseline")
        drop = (
            f"{_pct(vs['drop'])} (p={_num(vs['p_value'], '.3f')})" + (" ⚠️" if vs["significant"] else "") if vs else ""
        )
        d = p["duration_s"]
        lines.append(
            f"| {_text(p['label'])}{' 🔥' if p['chaos'] else ''} | {p['runs']} | {_pct(p['success_rate'])} "
            f"[{_pct(lo)}, {_pct(hi)}] | {drop} | {_num(d['p50'])} / {_num(d['p95'])} | "
            f"{_num(p['calls_per_run'], '.1f')} | {_num(p['tokens_per_run'], '.0f')} | {_usd(p.get('cost_usd_per_run'))} | "
            f"{p['faults']} | {p['violations']['total']} |"
        )
    rob = report["robustness"]
    rec = report["recovery"]
    lines += [
        "",
        f"**Robustness** {_num(rob['score'], '.3f')} over {rob['runs_considered']} faulted runs · "
        f"**recovery** {_pct(rec['rate'])} ({rec['k']}/{rec['n']})",
        "",
    ]
    if repro := report.get("reproducibility"):
        lines += [f"**Reproducibility** {_num(repro['score'], '.2f')} over {repro['repeats']} passes", ""]
        lines += [f"- {_code(d['run'])} differs in pass {d['repeat']}: {_text(d['where'])}" for d in repro["differing"]]
        lines += [""] if repro["differing"] else []
    if report["hypotheses"]:
        lines += ["### Steady state", "", "| hypothesis | scope | result | values |", "|---|---|---|---|"]
        for h in report["hypotheses"]:
            vals = ", ".join(f"{_text(c['label'])}={_num(c['value'], '.3g')}" for c in h["checks"]) or "not evaluated"
            lines.append(f"| {_code(h['hypothesis'])} | {_text(h['scope'])} | {_ICON[h['ok']]} | {vals} |")
        lines.append("")
    if gate["checks"]:
        lines += ["### Gate", "", "| check | value | threshold | result |", "|---|---|---|---|"]
        for c in gate["checks"]:
            lines.append(
                f"| {_text(c['check'])} | {_num(c['value'], '.3g')} {_text(c.get('note', ''))} | {c['threshold']:g} | {_ICON[c['ok']]} |"
            )
        lines.append("")
    if report["fault_breakdown"]:
        lines += ["### Faults", "", "| fault | target | runs met | failed | failure rate |", "|---|---|---:|---:|---|"]
        for row in report["fault_breakdown"]:
            lines.append(
                f"| {_text(row['fault'])} | {_text(row['target'])} | {row['runs']} | {row['failed']} | {_pct(row['rate'])} |"
            )
        lines.append("")
    if report["cost_of_chaos"]:
        lines += ["### Cost of chaos", ""]
        money = report.get("cost_usd") or {}
        if money.get("extra_per_run") is not None:
            lines += [
                f"{_usd(money['extra_per_run'], '+')} per run under chaos (baseline {_usd(money['baseline_per_run'])}, "
                f"chaos {_usd(money['chaos_per_run'])}; USD at list prices)",
                "",
            ]
        lines += [
            "| fault | faulted calls | retries | retry tokens | retry cost | extra calls/run | extra cost/run |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind, c in report["cost_of_chaos"].items():
            lines.append(
                f"| {_text(kind)} | {c['faulted_exchanges']} | {c['retried_exchanges']} | {c['retry_tokens']} | "
                f"{_usd(c.get('retry_cost_usd'))} | {_num(c['extra_calls_per_run'], '+.1f')} | "
                f"{_usd(c.get('extra_cost_usd_per_run'), '+')} |"
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
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_markdown(report), encoding="utf-8")
