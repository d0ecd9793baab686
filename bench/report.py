"""The bench's verdicts (each measure against its target) and its terminal tables."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = [
    "LATE_MS",
    "P99_ADDED_MS",
    "RPS_FLOOR",
    "RSS_MB",
    "info",
    "load_targets",
    "missed",
    "print_report",
    "print_verdicts",
    "save_results",
    "streams_targets",
    "target",
]

LATE_MS = 250.0  # no event of the 1,000-stream case may arrive later than this past its upstream send
RSS_MB = 500.0  # the proxy's peak RSS over that case stays under this
# Throughput floor against plain mitmdump: no rules must cost nothing; all-on may cost 10%, whether its
# analysis runs on the proxy's loop or in a second process (proxy.analysis).
RPS_FLOOR = {"brownout": 1.0, "brownout-all-on": 0.90, "brownout-all-on-process": 0.90}
P99_ADDED_MS = 2.0  # at 1 connection, over plain mitmdump's p99
TTFT_ADDED_MS = 2.0  # time to first SSE chunk over direct, on a kept-alive connection
CLIENT_FLOOR_MS = 50.0  # direct p99 lateness above this: the client or upstream lags, not the proxy

_OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "<": operator.lt}


def target(
    value: float | None, op: str, bound: float, unit: str, detail: str = "", *, group: str | None = None
) -> dict[str, Any]:
    """A verdict row: `value` against `op bound`; `group` sets rows apart (e.g. "llm": the LLM-shaped cases)."""
    met = None if value is None else _OPS[op](value, bound)
    row = {
        "value": None if value is None else round(value, 3),
        "unit": unit.strip(),
        "target": f"{op} {bound:g}{unit}",
        "met": met,
        "kind": "target",
        "detail": detail,
    }
    if group is not None:
        row["group"] = group
    return row


def _info(value: float | None, detail: str = "", unit: str = "ms") -> dict[str, Any]:
    value = None if value is None else round(value, 3)
    return {"value": value, "unit": unit, "target": "informational", "met": None, "kind": "info", "detail": detail}


info = _info  # an informational row (no verdict), for the other benches' reports


def _get(results: dict[str, Any], *keys: str) -> Any:
    """results[k1][k2]...; None when any step is missing."""
    node: Any = results
    for key in keys:
        if not isinstance(node, dict) or node.get(key) is None:
            return None
        node = node[key]
    return node


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def load_targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Throughput, p99 and time to first chunk of each brownout path against mitmdump and direct."""
    out: dict[str, dict[str, Any]] = {}
    for name, floor in RPS_FLOOR.items():
        if name not in results and name != "brownout":
            continue  # all-on skipped on request; plain brownout missing is a miss
        for c in ("c1", "c8"):
            b, m = _get(results, name, c, "rps"), _get(results, "mitmdump", c, "rps")
            ratio = b / m if b is not None and m else None
            detail = f"{b:,.0f} vs {m:,.0f} req/s" if b is not None and m is not None else ""
            out[f"{name}: rps_ratio_vs_mitmdump_{c}"] = target(ratio, ">=", floor, "x", detail)
        b99, m99 = _get(results, name, "c1", "p99_ms"), _get(results, "mitmdump", "c1", "p99_ms")
        detail = f"p99 {b99:.3f} vs {m99:.3f} ms" if b99 is not None and m99 is not None else ""
        out[f"{name}: p99_added_vs_mitmdump_c1_ms"] = target(_diff(b99, m99), "<=", P99_ADDED_MS, " ms", detail)
        # Agents' SDKs keep connections alive (httpx pools), so that is the stream that counts.
        bt, dt = _get(results, name, "sse", "ttft_keepalive_ms"), _get(results, "direct", "sse", "ttft_keepalive_ms")
        detail = f"{bt:.2f} vs {dt:.2f} ms" if bt is not None and dt is not None else ""
        out[f"{name}: ttft_added_vs_direct_ms"] = target(_diff(bt, dt), "<=", TTFT_ADDED_MS, " ms", detail)
        out[f"{name}: p50_added_vs_mitmdump_c1_ms"] = _info(
            _diff(_get(results, name, "c1", "p50_ms"), _get(results, "mitmdump", "c1", "p50_ms"))
        )
        out[f"{name}: ttft_added_vs_direct_fresh_conn_ms"] = _info(
            _diff(_get(results, name, "sse", "ttft_ms"), _get(results, "direct", "sse", "ttft_ms"))
        )
        out[f"{name}: ttft_added_vs_streaming_mitmdump_ms"] = _info(
            _diff(bt, _get(results, "mitmdump-stream", "sse", "ttft_keepalive_ms"))
        )
    if "mitmdump" in results:  # for contrast: plain mitmdump buffers the whole stream
        out["mitmdump: ttft_added_vs_direct_ms"] = _info(
            _diff(
                _get(results, "mitmdump", "sse", "ttft_keepalive_ms"),
                _get(results, "direct", "sse", "ttft_keepalive_ms"),
            )
        )
    return out


def streams_targets(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The concurrent-streams case: every event delivered, none late, bounded RSS, for each brownout path."""
    results = case["results"]
    out: dict[str, dict[str, Any]] = {}
    for name in ("brownout-all-on", "brownout"):
        r = results.get(name)
        if r is None:
            continue
        delivered, expected = r["events_delivered"], r["events_expected"]
        out[f"{name}: streams_events_delivered"] = target(
            delivered, ">=", expected, "", f"{delivered:,} of {expected:,} events"
        )
        out[f"{name}: streams_complete"] = target(
            r["streams_complete"], ">=", r["streams"], "", f"{r['streams_complete']:,} of {r['streams']:,} streams"
        )
        late = r["lateness"]
        detail = f"p50 {late['p50_ms']} ms, p99 {late['p99_ms']} ms; {late['late_events']} events over"
        out[f"{name}: streams_max_lateness_ms"] = target(late["max_ms"], "<=", LATE_MS, " ms", detail)
        out[f"{name}: streams_peak_rss_mb"] = target(_get(r, "proxy", "peak_rss_mb"), "<", RSS_MB, " MB")
        out[f"{name}: streams_cpu_s"] = _info(_get(r, "proxy", "cpu_s"), "the proxy's CPU time over the case", "s")
    if not out:
        out["brownout: streams_complete"] = target(None, ">=", case["config"]["streams"], "", "no brownout path ran")
    for name, what in (("direct", "the client's own floor"), ("mitmdump-stream", "mitmdump streaming")):
        if name in results:
            out[f"{name}: streams_max_lateness_ms"] = _info(results[name]["lateness"]["max_ms"], what)
    if "mitmdump" in results:
        out["mitmdump: streams_p50_lateness_ms"] = _info(
            results["mitmdump"]["lateness"]["p50_ms"], "buffers: events wait for the end of their stream"
        )
    return out


def save_results(data: dict[str, Any], output: Path, *, check: bool) -> int:
    """Write a run's results (with `data["targets"]`) as JSON; the exit status: 1 when `check` and a target was missed."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(data, indent=2) + "\n")
    print(f"results written to {output}")
    misses = missed(data["targets"])
    if check and misses:
        print("targets missed:\n  " + "\n  ".join(misses))
        return 1
    return 0


def missed(targets: dict[str, dict[str, Any]]) -> list[str]:
    """One line per target not met, an unmeasured one included."""
    lines = []
    for name, t in targets.items():
        if t.get("kind") == "target" and t["met"] is not True:
            value = "not measured" if t["value"] is None else _value(t)
            lines.append(f"{name}: {value} (target {t['target']})")
    return lines


def _value(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return "n/a"
    unit = t.get("unit", "")
    return f"{t['value']:g}{unit if unit == 'x' else ' ' + unit if unit else ''}"


def _console() -> Console:
    # The tables have up to 12 columns: wrap the terminal rather than squeeze numbers into ellipses.
    return Console(width=max(Console().width, 200))


def print_verdicts(targets: dict[str, dict[str, Any]], console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title="targets", title_justify="left")
    for col in ("measure", "value", "target", "verdict", "detail"):
        table.add_column(col)
    for name, t in targets.items():
        verdict = {True: "[green]met[/]", False: "[red]missed[/]", None: "-"}[t["met"]]
        if t.get("kind") == "target" and t["value"] is None:
            verdict = "[red]not measured[/]"
        table.add_row(name, _value(t), t["target"], verdict, escape(t.get("detail", "")))
    console.print(table)


def _load_table(data: dict[str, Any], console: Console) -> None:
    results, meta = data["results"], data["meta"]
    machine = meta.get("machine", {})
    direct_p50 = _get(results, "direct", "c1", "p50_ms")
    table = Table(
        title=escape(
            f"brownout bench (load via {machine.get('load_tool', '?')}, {meta.get('duration_s', 0):g} s runs, "
            f"{machine.get('cores', '?')} cores: {machine.get('cpu_model', '?')})"
        ),
        title_justify="left",
    )
    cols = ["path", "req/s c1", "p50 ms", "p99 ms", "req/s c8", "p50 ms", "p99 ms", "added p50 ms"]
    cols += ["TTFT ms", "TTFT new conn ms", "SSE total ms", "event gap ms"]
    for col in cols:
        table.add_column(col, justify="left" if col == "path" else "right", min_width=15 if col == "path" else None)
    for name, r in results.items():
        added = "-" if name == "direct" or direct_p50 is None else f"{r['c1']['p50_ms'] - direct_p50:+.3f}"
        gaps = r["sse"]["gaps_ms"]
        c1, c8, sse = r["c1"], r["c8"], r["sse"]
        table.add_row(
            name,
            f"{c1['rps']:,.0f}",
            f"{c1['p50_ms']:.3f}",
            f"{c1['p99_ms']:.3f}",
            f"{c8['rps']:,.0f}",
            f"{c8['p50_ms']:.3f}",
            f"{c8['p99_ms']:.3f}",
            added,
            f"{sse['ttft_keepalive_ms']:.1f}",
            f"{sse['ttft_ms']:.1f}",
            f"{sse['total_ms']:.1f}",
            f"{sorted(gaps)[len(gaps) // 2]:.1f}" if gaps else "-",
        )
    console.print(table)
    errors = {f"{n} {c}": r[c]["errors"] for n, r in results.items() for c in ("c1", "c8") if r[c]["errors"]}
    if errors:
        console.print(f"[yellow]load errors (socket errors or non-2xx): {errors}[/]")


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def print_streams(case: dict[str, Any], console: Console | None = None) -> None:
    console = console or _console()
    cfg = case["config"]
    table = Table(
        title=f"{cfg['streams']:,} concurrent SSE streams x {cfg['events']} events, {cfg['interval_ms']} ms apart "
        f"({cfg['client_processes']} client processes)",
        title_justify="left",
    )
    cols = ["path", "streams complete", "events delivered", "late p50 ms", "p99 ms", "max ms", f"> {LATE_MS:g} ms"]
    cols += ["1st event p50/max ms", "peak RSS MB", "proxy CPU s", "client CPU s", "upstr. CPU s"]
    for col in cols:
        table.add_column(col, justify="left" if col == "path" else "right", min_width=15 if col == "path" else None)
    for name, r in case["results"].items():
        late, first = r["lateness"], r.get("first_event", {})
        table.add_row(
            name,
            f"{r['streams_complete']:,}/{r['streams']:,}",
            f"{r['events_delivered']:,}/{r['events_expected']:,}",
            *(_cell(late[k]) for k in ("p50_ms", "p99_ms", "max_ms", "late_events")),
            "/".join(f"{v:.0f}" if v is not None else "-" for v in (first.get("p50_ms"), first.get("max_ms"))),
            _cell(_get(r, "proxy", "peak_rss_mb")),
            _cell(_get(r, "proxy", "cpu_s")),
            _cell(round(sum(r["client_cpu_s"]), 2)),
            _cell(r["upstream_cpu_s"]),
        )
    console.print(table)
    floor = _get(case, "results", "direct", "lateness", "p99_ms")
    if floor is not None and floor > CLIENT_FLOOR_MS:
        console.print(
            f"[yellow]direct p99 lateness {floor} ms: the client or the upstream lags (a busy machine?); "
            "every path's lateness includes it[/]"
        )
    for name, r in case["results"].items():
        if r["errors"]:
            console.print(f"[yellow]{name}: stream errors {escape(str(r['errors']))}[/]")


def print_llm(llm: dict[str, Any], console: Console | None = None) -> None:
    """The LLM-shaped cases (bench/llm.py): each case through each path."""
    console = console or _console()
    table = Table(title="LLM-shaped traffic (bench/llm.py)", title_justify="left")
    for col in ("case", "path", "req/s c1", "p50 ms", "p99 ms", "req/s c8", "p99 ms", "whole answer"):
        table.add_column(col, justify="left" if col in ("case", "path") else "right")
    for case, results in llm.get("cases", {}).items():
        for name, r in results.items():
            c1, c8 = r["c1"], r["c8"]
            ok = llm.get("checked", {}).get(case, {}).get(name)
            table.add_row(
                case,
                name,
                f"{c1['rps']:,.0f}",
                f"{c1['p50_ms']:.3f}",
                f"{c1['p99_ms']:.3f}",
                f"{c8['rps']:,.0f}",
                f"{c8['p99_ms']:.3f}",
                {True: "yes", False: "[red]no[/]", None: "-"}[ok],
            )
    console.print(table)


def print_report(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or _console()
    if data.get("results"):
        _load_table(data, console)
    if data.get("llm"):
        print_llm(data["llm"], console)
    if data.get("streams"):
        print_streams(data["streams"], console)
    print_verdicts(data["targets"], console)
    for note in data.get("notes", []):
        console.print(f"[yellow]note: {escape(note)}[/]")
