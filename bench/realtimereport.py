"""The markdown bench/publish.py puts in the docs for the committed runs of bench/realtime.py.

Several runs, one after the other at one commit, in one table each: every cell gives run 1 / run 2 / ...,
so the page shows how far the figures move from run to run as well as the figures.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NO_REALTIME_RUN", "render_realtime"]

NO_REALTIME_RUN = "No committed run of bench/realtime.py yet."
_PLACES = ("first", "middle", "last")


def _cells(values: list[Any]) -> str:
    return " / ".join("-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:g}" for v in values)


def _header(run: dict[str, Any]) -> str:
    meta, m = run["meta"], run["meta"]["machine"]
    dirty = " (uncommitted changes)" if m.get("brownout_dirty") else ""
    return (
        f"Run `{meta['command']}` on {m['date']}, brownout commit `{m['brownout_commit'][:12]}`{dirty}: "
        f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}, Python {m['python']}, "
        f"mitmproxy {m['mitmproxy']}, load from {m['load_tool']}."
    )


def _delay(runs: list[dict[str, Any]]) -> list[str]:
    first = runs[0]["added_delay"]
    cfg = first["config"]
    lines = [
        f"Added delay per server event, one session at a time ({cfg['rounds']} interleaved rounds, each "
        f"{cfg['delay_generations']} generations of {cfg['delay_events']} deltas {cfg['delay_interval_ms']:g} ms "
        "apart; an event's lateness is the client's read time minus the upstream's send stamp):",
        "",
        "| path | deltas | p50 ms | p99 ms | p99 added vs mitmdump ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in first["results"]:
        at = [run["added_delay"]["results"][name] for run in runs]
        lines.append(
            f"| {name} | {_cells([r['events'] for r in at])} | {_cells([r['p50_ms'] for r in at])} | "
            f"{_cells([r['p99_ms'] for r in at])} | {_cells([r.get('added_p99_ms_vs_mitmdump') for r in at])} |"
        )
    return lines


def _concurrent(runs: list[dict[str, Any]]) -> list[str]:
    first = runs[0]["concurrent"]
    cfg = first["config"]
    lines = [
        f"{cfg['sessions']} concurrent sessions, each a generation of {cfg['events']} deltas "
        f"{cfg['interval_ms']:g} ms apart (the maximum lateness is also given by a delta's place in its "
        "generation: its first 3 deltas, the middle ones, its last 2):",
        "",
        "| path | sessions complete | deltas delivered | lateness p50 ms | p99 ms | max ms "
        "| max, first 3 | max, middle | max, last 2 | peak RSS MB | proxy CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in first["results"]:
        at = [run["concurrent"]["results"][name] for run in runs]
        late = [r["lateness"] for r in at]
        proxy = [r.get("proxy") or {} for r in at]
        places = [_cells([r["lateness_by_position"][p]["max_ms"] for r in at]) for p in _PLACES]
        lines.append(
            f"| {name} | {_cells([r['sessions_complete'] for r in at])} | "
            f"{_cells([r['events_delivered'] for r in at])} | {_cells([x['p50_ms'] for x in late])} | "
            f"{_cells([x['p99_ms'] for x in late])} | {_cells([x['max_ms'] for x in late])} | "
            f"{' | '.join(places)} | {_cells([p.get('peak_rss_mb') for p in proxy])} | "
            f"{_cells([p.get('cpu_s') for p in proxy])} |"
        )
    return lines


def _verdicts(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["| target | measured | target | verdicts |", "|---|---:|---|---|"]
    for name, t in runs[0]["targets"].items():
        at = [run["targets"].get(name, {}) for run in runs]
        unit = t.get("unit", "").strip()
        values = _cells([x.get("value") for x in at]) + (f" {unit}" if unit else "")
        verdicts = " / ".join({True: "met", False: "missed"}.get(x.get("met"), "not measured") for x in at)
        lines.append(f"| {name} | {values} | {t['target']} | {verdicts} |")
    return lines


def render_realtime(runs: list[dict[str, Any]]) -> str:
    """The docs' markdown of the committed runs, in run order."""
    if not runs:
        return NO_REALTIME_RUN
    lines = [f"{i}. {_header(run)}" for i, run in enumerate(runs, 1)]
    order = " / ".join(f"run {i}" for i in range(1, len(runs) + 1))
    lines += ["", f"Each cell gives {order}.", "", *_delay(runs), "", *_concurrent(runs), "", *_verdicts(runs)]
    return "\n".join(lines)
