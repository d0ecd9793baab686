"""The bench's verdicts (ratios against the brief's targets) and its terminal table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["print_report", "targets_met"]


def _target(value: float | None, op: str, bound: float, unit: str) -> dict[str, Any]:
    met = None if value is None else (value >= bound if op == ">=" else value <= bound)
    return {"value": None if value is None else round(value, 3), "target": f"{op} {bound:g}{unit}", "met": met}


def _info(value: float) -> dict[str, Any]:
    return {"value": round(value, 3), "target": "informational", "met": None}


def targets_met(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Brownout against plain mitmdump and direct, as the brief states its targets."""
    d, m, ms = results.get("direct"), results.get("mitmdump"), results.get("mitmdump-stream")
    out: dict[str, dict[str, Any]] = {}
    for name in ("brownout", "brownout-all-on"):
        b = results.get(name)
        if not b:
            continue
        for c in ("c1", "c8"):
            ratio = b[c]["rps"] / m[c]["rps"] if m and m[c]["rps"] else None
            out[f"{name}: rps_ratio_vs_mitmdump_{c}"] = _target(ratio, ">=", 0.85, "x")
        added = b["c1"]["p50_ms"] - m["c1"]["p50_ms"] if m else None
        out[f"{name}: p50_added_vs_mitmdump_ms"] = _target(added, "<=", 0.5, " ms")
    b = results.get("brownout")
    if b and d:
        # Agents' SDKs keep connections alive (httpx pools), so that is the stream that counts.
        out["brownout: ttft_added_vs_direct_ms"] = _target(
            b["sse"]["ttft_keepalive_ms"] - d["sse"]["ttft_keepalive_ms"], "<=", 5.0, " ms"
        )
        out["brownout: ttft_added_vs_direct_fresh_conn_ms"] = _info(b["sse"]["ttft_ms"] - d["sse"]["ttft_ms"])
    if b and ms:
        out["brownout: ttft_added_vs_streaming_mitmdump_ms"] = _info(
            b["sse"]["ttft_keepalive_ms"] - ms["sse"]["ttft_keepalive_ms"]
        )
    if m and d:  # for contrast: plain mitmdump buffers the whole stream
        out["mitmdump: ttft_added_vs_direct_ms"] = _info(m["sse"]["ttft_keepalive_ms"] - d["sse"]["ttft_keepalive_ms"])
    return out


def print_report(data: dict[str, Any], console: Console | None = None) -> None:
    # The table has 12 columns: wrap the terminal rather than squeeze numbers into ellipses.
    console = console or Console(width=max(Console().width, 140))
    results = data["results"]
    direct_p50 = results.get("direct", {}).get("c1", {}).get("p50_ms")
    table = Table(
        title=f"brownout bench (load via {data['meta']['load_tool']}, "
        f"{data['meta']['duration_s']:g} s runs, {data['meta']['cpus']} CPUs)",
        title_justify="left",
    )
    cols = [
        "path",
        "req/s c1",
        "p50 ms",
        "p99 ms",
        "req/s c8",
        "p50 ms",
        "p99 ms",
        "added p50 ms",
        "TTFT ms",
        "TTFT new conn ms",
        "SSE total ms",
        "event gap ms",
    ]
    for col in cols:
        table.add_column(col, justify="left" if col == "path" else "right")
    for name, r in results.items():
        added = "-" if name == "direct" or direct_p50 is None else f"{r['c1']['p50_ms'] - direct_p50:+.3f}"
        gaps = r["sse"]["gaps_ms"]
        table.add_row(
            name,
            f"{r['c1']['rps']:,.0f}",
            f"{r['c1']['p50_ms']:.3f}",
            f"{r['c1']['p99_ms']:.3f}",
            f"{r['c8']['rps']:,.0f}",
            f"{r['c8']['p50_ms']:.3f}",
            f"{r['c8']['p99_ms']:.3f}",
            added,
            f"{r['sse']['ttft_keepalive_ms']:.1f}",
            f"{r['sse']['ttft_ms']:.1f}",
            f"{r['sse']['total_ms']:.1f}",
            f"{sorted(gaps)[len(gaps) // 2]:.1f}" if gaps else "-",
        )
    console.print(table)
    verdicts = Table(title="targets (brownout)", title_justify="left")
    for col in ("measure", "value", "target", "verdict"):
        verdicts.add_column(col)
    for name, t in data["targets"].items():
        verdict = {True: "[green]met[/]", False: "[red]missed[/]", None: "-"}[t["met"]]
        verdicts.add_row(name, "n/a" if t["value"] is None else f"{t['value']:g}", t["target"], verdict)
    console.print(verdicts)
    errors = {f"{n} {c}": r[c]["errors"] for n, r in results.items() for c in ("c1", "c8") if r[c]["errors"]}
    if errors:
        console.print(f"[yellow]load errors (socket errors or non-2xx): {errors}[/]")
    for note in data.get("notes", []):
        console.print(f"[yellow]note: {note}[/]")
