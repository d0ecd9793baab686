"""The markdown bench/publish.py puts in the docs for the committed runs of bench/realtime.py.

Several runs, one after the other at one commit, in one table each: every cell gives run 1 / run 2 / ...,
so the page shows how far the figures move from run to run as well as the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["NO_REALTIME_RUN", "render_realtime"]

NO_REALTIME_RUN = "No committed run of bench/realtime.py yet."
_PLACES = ("first", "middle", "last")
_PLACE_LABELS = ("first 3", "middle", "last 2")


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


Column = tuple[str, Callable[[dict[str, Any]], Any]]  # a header, and its value in one path's results


def _table(runs: list[dict[str, Any]], case: str, intro: str, columns: list[Column]) -> list[str]:
    """One row per path of `case`, each cell the column's value in every run."""
    lines = [intro, "", "| path | " + " | ".join(h for h, _ in columns) + " |", "|---|" + "---:|" * len(columns)]
    for name in runs[0][case]["results"]:
        at = [run[case]["results"][name] for run in runs]
        lines.append(f"| {name} | " + " | ".join(_cells([get(r) for r in at]) for _, get in columns) + " |")
    return lines


def _delay(runs: list[dict[str, Any]]) -> list[str]:
    cfg = runs[0]["added_delay"]["config"]
    intro = (
        f"Added delay per server event, one session at a time ({cfg['rounds']} interleaved rounds, each "
        f"{cfg['delay_generations']} generations of {cfg['delay_events']} deltas {cfg['delay_interval_ms']:g} ms "
        "apart; an event's lateness is the client's read time minus the upstream's send stamp):"
    )
    columns: list[Column] = [
        ("deltas", lambda r: r["events"]),
        ("p50 ms", lambda r: r["p50_ms"]),
        ("p99 ms", lambda r: r["p99_ms"]),
        ("p99 added vs mitmdump ms", lambda r: r.get("added_p99_ms_vs_mitmdump")),
    ]
    return _table(runs, "added_delay", intro, columns)


def _concurrent(runs: list[dict[str, Any]]) -> list[str]:
    cfg = runs[0]["concurrent"]["config"]
    intro = (
        f"{cfg['sessions']} concurrent sessions, each a generation of {cfg['events']} deltas "
        f"{cfg['interval_ms']:g} ms apart (the maximum lateness is also given by a delta's place in its "
        "generation: its first 3 deltas, the middle ones, its last 2):"
    )
    places = [(f"max, {label}", _place(place)) for place, label in zip(_PLACES, _PLACE_LABELS, strict=True)]
    columns: list[Column] = [
        ("sessions complete", lambda r: r["sessions_complete"]),
        ("deltas delivered", lambda r: r["events_delivered"]),
        ("lateness p50 ms", lambda r: r["lateness"]["p50_ms"]),
        ("p99 ms", lambda r: r["lateness"]["p99_ms"]),
        ("max ms", lambda r: r["lateness"]["max_ms"]),
        *places,
        ("peak RSS MB", lambda r: (r.get("proxy") or {}).get("peak_rss_mb")),
        ("proxy CPU s", lambda r: (r.get("proxy") or {}).get("cpu_s")),
    ]
    return _table(runs, "concurrent", intro, columns)


def _place(place: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: r["lateness_by_position"][place]["max_ms"]


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
