"""A search's report.md (for `$GITHUB_STEP_SUMMARY`): the breaking point, the levels, the runs against a grid."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.formatting import pct
from brownout.proxy.experiment.search.report import value_text

__all__ = ["render_search_markdown", "write_search_markdown"]

logger = logging.getLogger(__name__)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_search_markdown(report: dict[str, Any]) -> str:
    s, bp, grid, gate = report["search"], report["breaking_point"], report["grid"], report["gate"]
    conf = f"{s['confidence']:.0%}"
    lines = [
        f"# brownout search `{report['experiment']}`: {report['status']}, gate {'passed' if gate['passed'] else 'failed'}",
        "",
        f"**{_cell(report['summary'])}**",
        "",
        f"Seed {report['seed']} · {report['runs_spent']} runs · {report['duration_s']:.1f} s · exit {report['exit_code']}",
    ]
    if report.get("abort_reason"):
        lines.append(f"\n**Aborted:** {_cell(report['abort_reason'])}")
    if report.get("error"):
        lines.append(f"\n**Error:** {_cell(report['error'])}")
    lines += [
        "",
        "| breaking point | |",
        "|---|---|",
        f"| outcome | {report['outcome']} |",
        f"| estimate of `{s['parameter']}` | {value_text(bp['estimate'])} |",
        f"| {conf} interval | {value_text(bp['interval'][0])} to {value_text(bp['interval'][1])} |",
        f"| fit | {bp['method'] or 'none'} |",
        f"| goal | `{_cell(s['goal_label'])}`: at least {pct(s['target'])} of runs good |",
        "",
        "## Levels",
        "",
        f"| order | `{s['parameter']}` | runs | good | share (Wilson {conf}) | sequential test |",
        "|---|---|---|---|---|---|",
    ]
    for lv in report["levels"]:
        lines.append(
            f"| {lv['order']} ({lv['label']}) | {value_text(lv['value'])} | {lv['runs']} | {lv['good']} | "
            f"{pct(lv['share'])} [{pct(lv['wilson'][0])}, {pct(lv['wilson'][1])}] | {lv['decision'] or 'undecided'} |"
        )
    test = s["sequential_test"]
    lines += [
        "",
        "## Runs spent",
        "",
        f"{report['runs_spent']} runs of a budget of {s['max_runs']}. A fixed grid of the same resolution has "
        f"{grid['levels']} levels; telling each one's share from the goal with the same error rates "
        f"({pct(test['p_fails'])} against {pct(test['p_holds'])}, {pct(test['alpha'])} each way) takes "
        f"{grid['runs_per_level']} runs: {grid['runs']} runs. The search spent {pct(grid['ratio'])} of that.",
    ]
    if gate["checks"]:
        lines += ["", "## Gate", "", "| check | value | threshold | ok |", "|---|---|---|---|"]
        lines += [
            f"| {c['check']} | {value_text(c['value'])} | {value_text(c['threshold'])} | {'yes' if c['ok'] else 'no'} |"
            for c in gate["checks"]
        ]
    return "\n".join(lines) + "\n"


def write_search_markdown(path: Path, report: dict[str, Any]) -> None:
    path.write_text(render_search_markdown(report), encoding="utf-8")
