"""Write docs/benchmark.md's results from the committed run in bench/results/published/.

    .venv/bin/python bench/run.py --streams-case --output bench/results/published/run.json
    .venv/bin/python bench/fleet.py --output bench/results/published/fleet.json    # the fleet's block
    .venv/bin/python bench/run.py --llm-only --llm-reference --output bench/results/published/llm-reference-1.json
    .venv/bin/python bench/realtime.py --output bench/results/published/realtime-1.json   # and -2, -3: one after the other
    .venv/bin/python bench/publish.py            # rewrites the results blocks of docs/benchmark.md
    .venv/bin/python bench/publish.py --check    # exit 1 when the page and the committed run disagree

Figures in the docs are never typed by hand: this renders them from the JSON, which carries the
command, the machine and the commit it ran at, and tests/docs/test_benchmark_published.py fails
when the page and the JSON drift apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fleetreport import render_fleet
from bench.llm import PATHS, render_llm_rows
from bench.load import ROUNDS_LATENCY
from bench.realtimereport import render_realtime

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "bench" / "results" / "published" / "run.json"
PUBLISHED_FLEET = ROOT / "bench" / "results" / "published" / "fleet.json"  # bench/fleet.py's, when committed
PAGE = ROOT / "docs" / "benchmark.md"
BEGIN, END = "<!-- RESULTS:BEGIN (bench/publish.py) -->", "<!-- RESULTS:END -->"
STREAMS_BEGIN, STREAMS_END = "<!-- STREAMS:BEGIN (bench/publish.py) -->", "<!-- STREAMS:END -->"
LLM_BEGIN, LLM_END = "<!-- LLM:BEGIN (bench/publish.py) -->", "<!-- LLM:END -->"
FLEET_BEGIN, FLEET_END = "<!-- FLEET:BEGIN (bench/publish.py) -->", "<!-- FLEET:END -->"
LLMREF_BEGIN, LLMREF_END = "<!-- LLMREF:BEGIN (bench/publish.py) -->", "<!-- LLMREF:END -->"
REALTIME_BEGIN, REALTIME_END = "<!-- REALTIME:BEGIN (bench/publish.py) -->", "<!-- REALTIME:END -->"
LLM_REFERENCE_RUNS = "llm-reference-*.json"  # in bench/results/published/, numbered in run order
REALTIME_RUNS = "realtime-*.json"  # bench/realtime.py's, numbered in run order
NO_LLM_RUN = "No committed run has the LLM-shaped cases yet."


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _machine(data: dict[str, Any]) -> str:
    meta = data["meta"]
    m = meta["machine"]
    dirty = " (uncommitted changes)" if m.get("brownout_dirty") else ""
    return (
        f"Run `{meta['command']}` on {m['date']}, brownout commit `{m['brownout_commit'][:12]}`{dirty}: "
        f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}, Python {m['python']}, "
        f"mitmproxy {m['mitmproxy']}, load from {m['load_tool']}; {meta['rounds']} interleaved rounds of "
        f"{meta['duration_s']:g} s per path, the median round{_summary(meta)}."
    )


def _summary(meta: dict[str, Any]) -> str:
    # Runs before bench/load.py's median_round took the median-throughput round's percentiles as they were.
    return "; p50 and p99 are each the median over the rounds" if meta.get("summary") == ROUNDS_LATENCY else ""


def render_results(data: dict[str, Any]) -> str:
    results = data["results"]
    lines = [
        _machine(data),
        "",
        "| path | req/s, 1 conn | p50 ms | p99 ms | req/s, 8 conns | p99 ms | SSE first chunk ms (kept-alive) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in PATHS:
        r = results.get(name)
        if not r:
            continue
        lines.append(
            f"| {name} | {_num(r['c1']['rps'], 0)} | {_num(r['c1']['p50_ms'], 2)} | {_num(r['c1']['p99_ms'], 2)} | "
            f"{_num(r['c8']['rps'], 0)} | {_num(r['c8']['p99_ms'], 2)} | {_num(r['sse']['ttft_keepalive_ms'], 2)} |"
        )
    lines += ["", *_verdicts(data, group=None)]
    return "\n".join(lines)


def _verdicts(data: dict[str, Any], group: str | None) -> list[str]:
    """The table of the targets of `group` (None: the /ping and SSE ones)."""
    lines = ["| target | measured | target | verdict |", "|---|---:|---|---|"]
    for name, t in data["targets"].items():
        if t.get("kind") != "target" or t.get("group") != group:
            continue
        verdict = "met" if t["met"] else ("missed" if t["met"] is False else "not measured")
        value = "-" if t["value"] is None else f"{t['value']:g}{t.get('unit', '')}"
        lines.append(f"| {name} | {value} | {t['target']} | {verdict} |")
    return lines


def render_llm(data: dict[str, Any]) -> str:
    llm = data.get("llm")
    if not llm:
        return NO_LLM_RUN
    return "\n".join(
        [
            "The LLM-shaped cases of the same run, each through every path in the same interleaved rounds.",
            "",
            *render_llm_rows(llm),
            "",
            *_verdicts(data, group="llm"),
        ]
    )


def numbered_runs(pattern: str, folder: Path = PUBLISHED.parent) -> list[dict[str, Any]]:
    """The committed runs whose files match `pattern` (NAME-N.json), in the order of their numbers."""
    files = sorted(folder.glob(pattern), key=lambda f: int(f.stem.rsplit("-", 1)[1]))
    return [json.loads(f.read_text()) for f in files]


def reference_runs(folder: Path = PUBLISHED.parent) -> list[dict[str, Any]]:
    """The committed runs of `bench/run.py --llm-only --llm-reference`, in the order of their numbers."""
    return numbered_runs(LLM_REFERENCE_RUNS, folder)


def realtime_runs(folder: Path = PUBLISHED.parent) -> list[dict[str, Any]]:
    """The committed runs of `bench/realtime.py`, in the order of their numbers."""
    return numbered_runs(REALTIME_RUNS, folder)


def render_llm_reference(runs: list[dict[str, Any]]) -> str:
    """One table of every reference run: each cell holds the runs' values, run 1 / run 2 / ..."""
    if not runs:
        return "No committed run of the LLM cases with `--llm-reference`."
    lines = [f"{i}. {_machine(run)}" for i, run in enumerate(runs, 1)]
    lines += [
        "",
        "| case | path | proxy CPU ms/request, 8 conns | req/s, 1 conn | req/s, 8 conns |",
        "|---|---|---:|---:|---:|",
    ]
    for case, paths in runs[0]["llm"]["cases"].items():
        for name in (n for n in PATHS if n in paths and n != "direct"):
            at = [run["llm"]["cases"][case][name] for run in runs]
            cpu = " / ".join(_num(r["c8"].get("cpu_ms_per_request"), 2) for r in at)
            c1 = " / ".join(_num(r["c1"]["rps"], 0) for r in at)
            c8 = " / ".join(_num(r["c8"]["rps"], 0) for r in at)
            lines.append(f"| {case} | {name} | {cpu} | {c1} | {c8} |")
    lines += ["", *_all_on_verdicts(runs)]
    return "\n".join(lines)


def _all_on_verdicts(runs: list[dict[str, Any]]) -> list[str]:
    """The all-on paths' LLM targets in each reference run: its measure and verdict, run 1 / run 2 / ..."""
    runs_named = " / ".join(f"run {i}" for i in range(1, len(runs) + 1))
    lines = [f"| all-on target | measured, {runs_named} | target | verdicts |", "|---|---:|---|---|"]
    for name, t in runs[0]["targets"].items():
        if t.get("kind") != "target" or t.get("group") != "llm" or not name.startswith("brownout-all-on"):
            continue
        at = [run["targets"].get(name) or {"value": None, "met": None} for run in runs]
        values = " / ".join("-" if r["value"] is None else f"{r['value']:g}{t.get('unit', '')}" for r in at)
        verdicts = " / ".join("met" if r["met"] else ("missed" if r["met"] is False else "not measured") for r in at)
        lines.append(f"| {name} | {values} | {t['target']} | {verdicts} |")
    return lines


def render_streams(data: dict[str, Any]) -> str:
    streams = data.get("streams")
    if not streams:
        return "No committed run of the concurrent-streams case."
    cfg = streams["config"]
    lines = [
        f"{cfg['streams']:,} concurrent streams of {cfg['events']} events {cfg['interval_ms']} ms apart, from "
        f"{cfg['client_processes']} client processes, in the same run as the table above.",
        "",
        "| path | streams complete | events delivered | lateness p50 ms | p99 ms | max ms | later than 250 ms "
        "| first event p50 / max ms | peak RSS MB | proxy CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in streams["results"].items():
        late, proxy, first = r["lateness"], r.get("proxy") or {}, r.get("first_event") or {}
        lines.append(
            f"| {name} | {r['streams_complete']:,}/{r['streams']:,} | "
            f"{r['events_delivered']:,}/{r['events_expected']:,} | {_num(late['p50_ms'])} | {_num(late['p99_ms'])} | "
            f"{_num(late['max_ms'])} | {late['late_events']:,} | "
            f"{_num(first.get('p50_ms'), 0)} / {_num(first.get('max_ms'), 0)} | {_num(proxy.get('peak_rss_mb'))} | "
            f"{_num(proxy.get('cpu_s'), 2)} |"
        )
    return "\n".join(lines)


def _replace(page: str, begin: str, end: str, body: str) -> str:
    head, sep, rest = page.partition(begin)
    if not sep or end not in rest:
        raise SystemExit(f"{PAGE}: markers {begin!r} ... {end!r} not found")
    return head + begin + "\n" + body + "\n" + end + rest.partition(end)[2]


def fleet_run(path: Path = PUBLISHED_FLEET) -> dict[str, Any] | None:
    """The committed run of bench/fleet.py, None when there is none."""
    return json.loads(path.read_text()) if path.exists() else None


def rendered(page: str, data: dict[str, Any], fleet: dict[str, Any] | None = None) -> str:
    page = _replace(page, BEGIN, END, render_results(data))
    page = _replace(page, LLM_BEGIN, LLM_END, render_llm(data))
    page = _replace(page, FLEET_BEGIN, FLEET_END, render_fleet(fleet if fleet is not None else fleet_run()))
    page = _replace(page, LLMREF_BEGIN, LLMREF_END, render_llm_reference(reference_runs()))
    page = _replace(page, REALTIME_BEGIN, REALTIME_END, render_realtime(realtime_runs()))
    return _replace(page, STREAMS_BEGIN, STREAMS_END, render_streams(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page is stale")
    parser.add_argument("--results", type=Path, default=PUBLISHED)
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text())
    page = PAGE.read_text()
    new = rendered(page, data)
    if args.check:
        if new != page:
            print(f"{PAGE} does not match {args.results}: run bench/publish.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    print(f"wrote {PAGE} from {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
