"""bench/fleet.py's verdicts, its terminal tables, and the markdown bench/publish.py puts in the docs."""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.fleetload import LOAD
from bench.report import info, print_verdicts, target

__all__ = ["NO_FLEET_RUN", "P50_ADDED_MS", "print_fleet", "render_fleet", "targets"]

P50_ADDED_MS = 0.5  # what the Redis backend may add to an exchange's median latency
NO_FLEET_RUN = "No committed run of bench/fleet.py yet."
_SHARED = ("upstream", "redis-server", LOAD)


def _fig(data: dict[str, Any], case: str, path: str, c: str, key: str) -> float | None:
    value = data.get(case, {}).get(path, {}).get(c, {}).get(key)
    return None if value is None else float(value)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _paired(
    data: dict[str, Any], c: str, key: str, path: str = "redis", base: str = "memory"
) -> tuple[float | None, list[float]]:
    """What `path` adds to `key` at `c` over `base`: the median of each round's difference (the two ran one
    right after the other), and those differences."""
    state = data.get("state", {})
    try:
        added, under = state[path][c]["rounds"][key], state[base][c]["rounds"][key]
    except KeyError:
        return None, []
    diffs = [round(a - b, 3) for a, b in zip(added, under, strict=False)]
    return (statistics.median(diffs) if diffs else None), diffs


def targets(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What Redis adds to an exchange (p50 at 1 connection: the target; the rest informational), and
    what a second worker gives."""
    out: dict[str, dict[str, Any]] = {}
    if "state" in data:
        added, diffs = _paired(data, "c1", "p50_ms")
        detail = f"per round {diffs} ms" if diffs else ""
        out["redis: p50_added_vs_memory_c1_ms"] = target(added, "<=", P50_ADDED_MS, " ms", detail)
        for c, key in (("c8", "p50_ms"), ("c1", "p99_ms"), ("c8", "p99_ms")):
            added, diffs = _paired(data, c, key)
            out[f"redis: {key[:3]}_added_vs_memory_{c}_ms"] = info(added, f"per round {diffs} ms" if diffs else "")
        for c in ("c1", "c8"):
            rps = _ratio(_fig(data, "state", "redis", c, "rps"), _fig(data, "state", "memory", c, "rps"))
            out[f"redis: rps_ratio_vs_memory_{c}"] = info(rps, unit="x")
        cpu = _ratio(_cpu(data, "state", "redis", "brownout"), _cpu(data, "state", "memory", "brownout"))
        out["redis: brownout_cpu_per_request_vs_memory_c8"] = info(cpu, unit="x")
        # Rules that may act before the request goes: decided before the upstream call, one round trip on it.
        for c in ("c1", "c8"):
            added, diffs = _paired(data, c, "p50_ms", "redis-first", "memory-first")
            if added is not None:
                out[f"redis-first: p50_added_vs_memory-first_{c}_ms"] = info(added, f"per round {diffs} ms")
    if "workers" in data:
        for c in ("c1", "c8"):
            rps = _ratio(_fig(data, "workers", "workers-2", c, "rps"), _fig(data, "workers", "workers-1", c, "rps"))
            out[f"workers-2: rps_ratio_vs_workers-1_{c}"] = info(rps, unit="x")
    return out


def _cpu(data: dict[str, Any], case: str, path: str, process: str) -> float | None:
    value = data.get(case, {}).get(path, {}).get("c8", {}).get("cpu_s_per_1k", {}).get(process)
    return None if value is None else float(value)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _processes(case: dict[str, Any]) -> list[str]:
    """The processes accounted in a case: each path's own first, then the shared ones."""
    names: list[str] = []
    for path in case.values():
        for name in path["c8"]["cpu_s_per_1k"]:
            if name not in names and name not in _SHARED:
                names.append(name)
    return names + [n for n in _SHARED if any(n in p["c8"]["cpu_s_per_1k"] for p in case.values())]


def _rows(case: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    procs = _processes(case)
    cols = ["path", "req/s 1 conn", "p50 ms", "p99 ms", "req/s 8 conns", "p50 ms", "p99 ms"]
    cols += [f"{p} CPU s/1k" for p in procs]
    rows = []
    for name, r in case.items():
        row = [name]
        for c in ("c1", "c8"):
            row += [_num(r[c]["rps"], 0), _num(r[c]["p50_ms"], 3), _num(r[c]["p99_ms"], 3)]
        cpu = r["c8"]["cpu_s_per_1k"]
        row += [_num(cpu.get(p), 3) for p in procs]
        rows.append(row)
    return cols, rows


def _spread(case: dict[str, Any]) -> list[str]:
    out = []
    for name, r in case.items():
        for c in ("c1", "c8"):
            rounds = r[c]["rounds"]
            out.append(f"{name} {c}: req/s {rounds['rps']}, p50 ms {rounds['p50_ms']}, p99 ms {rounds['p99_ms']}")
    return out


def print_fleet(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(width=max(Console().width, 200))
    machine = data["meta"]["machine"]
    for case, title in (("state", "state backend: memory vs redis"), ("workers", "--workers 1 vs 2, no rules")):
        if case not in data:
            continue
        cols, rows = _rows(data[case])
        where = f"{machine.get('cores', '?')} cores, load via {machine.get('load_tool', '?')}"
        table = Table(title=escape(f"{title} (median of the rounds; CPU at 8 connections; {where})"))
        for col in cols:
            table.add_column(escape(col))
        for row in rows:
            table.add_row(*row)
        console.print(table)
        for line in _spread(data[case]):
            console.print(escape(f"  rounds: {line}"))
    print_verdicts(data["targets"], console)


def render_fleet(data: dict[str, Any] | None) -> str:
    """The docs' markdown of a committed run (bench/publish.py)."""
    if not data:
        return NO_FLEET_RUN
    meta, m = data["meta"], data["meta"]["machine"]
    dirty = " (uncommitted changes)" if m.get("brownout_dirty") else ""
    lines = [
        f"Run `{meta['command']}` on {m['date']}, brownout commit `{m['brownout_commit'][:12]}`{dirty}: "
        f"{m['cpu_model']}, {m['cores']} cores, {m['os']}, Python {m['python']}, load from {m['load_tool']}; "
        f"{meta['rounds']} interleaved rounds of {meta['duration_s']:g} s per path, each figure the median; "
        "CPU seconds per 1,000 requests at 8 connections.",
    ]
    for case in ("state", "workers"):
        if case not in data:
            continue
        cols, rows = _rows(data[case])
        lines += ["", "| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", "| measure | value | target | verdict |", "|---|---:|---|---|"]
    for name, t in data["targets"].items():
        verdict = {True: "met", False: "missed", None: "-" if t["kind"] == "info" else "not measured"}[t["met"]]
        value = "-" if t["value"] is None else f"{t['value']:g}{t.get('unit', '')}"
        lines.append(f"| {name} | {value} | {t['target']} | {verdict} |")
    return "\n".join(lines)
