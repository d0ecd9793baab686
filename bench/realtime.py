"""Realtime WebSocket sessions through brownout, plain mitmdump and direct, side by side in one run, on loopback.

    .venv/bin/python bench/realtime.py                 # both cases, every path (about a minute and a half)
    .venv/bin/python bench/realtime.py --quick         # a smoke check: fewer events, 20 sessions
    .venv/bin/python bench/realtime.py --check         # exit 1 when a target is missed

The upstream is bench/wsupstream.py (OpenAI Realtime's event shapes, each output delta stamped with its
send time); each server runs in its own process; the proxies run in reverse mode, so the client speaks
to them as to the API. Paths: `direct` (the upstream itself), `mitmdump` (plain `mitmdump -q`),
`brownout` (no rules) and `brownout-all-on` (no faults; every invariant that judges realtime sessions,
Prometheus, OTLP and the JSONL logs on: bench/realtime-all-on.yaml).

1. Added delay per server event: one session at a time, generations of `--delay-events` deltas
   `--delay-interval-ms` apart, through each path in turn, `--rounds` interleaved rounds; the lateness
   of every delta (client read time minus upstream stamp), p50 and p99 per path, and brownout's over
   direct and over mitmdump. Target: brownout-all-on's p99 at most mitmdump's + 2 ms.
2. `--sessions` (200) concurrent sessions, opened over `--ramp` (2 s), then, `--settle` (2 s) later, each a
   generation of `--events` (60) deltas `--interval-ms` (100) apart, their phases spread over one interval
   (independent sessions do not send in lockstep), through each path in turn: sessions complete, deltas
   delivered, lateness (also split by a delta's place in its generation: the first 3, the middle, the last
   2), connect times under the ramp, the proxy's peak RSS and CPU. Targets for each brownout path: every delta delivered, every
   session complete, none later than 100 ms, peak RSS under 500 MB.
Results go to bench/results/realtime.json (`--output`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.machine import run_meta
from bench.procs import ROOT, Proc, start_brownout, start_mitmdump, start_module
from bench.procstat import ProcWatch
from bench.report import P99_ADDED_MS, RSS_MB, print_verdicts, save_results, target
from bench.sseclient import lateness_summary, raise_nofile
from bench.wsclient import EDGE_FIRST, EDGE_LAST, by_position, collect, summarise

__all__ = ["main"]

PATHS = ("direct", "mitmdump", "brownout", "brownout-all-on")
ALL_ON = str(ROOT / "bench" / "realtime-all-on.yaml")
LATE_MS = 100.0  # no delta of the concurrent case may arrive later than this past its upstream send


def _url(proc: Proc, events: int, interval_ms: float) -> str:
    return f"ws://127.0.0.1:{proc.port}/v1/realtime?model=gpt-realtime&events={events}&interval_ms={interval_ms:g}"


def start_paths(workdir: Path, names: list[str]) -> tuple[Proc, dict[str, Proc]]:
    upstream = start_module("wsupstream", "bench.wsupstream", [], workdir)
    paths: dict[str, Proc] = {}
    try:
        for name in names:
            if name == "direct":
                paths[name] = upstream
            elif name == "mitmdump":
                paths[name] = start_mitmdump(upstream.port, workdir)
            else:
                proc = start_brownout(upstream.port, workdir / name, ALL_ON if name == "brownout-all-on" else None)
                if isinstance(proc, str):
                    raise RuntimeError(proc)
                paths[name] = proc
    except BaseException:
        stop_paths(upstream, paths)
        raise
    return upstream, paths


def stop_paths(upstream: Proc, paths: dict[str, Proc]) -> None:
    for proc in paths.values():
        if proc is not upstream:
            proc.stop()
    upstream.stop()


def added_delay(paths: dict[str, Proc], args: argparse.Namespace) -> dict[str, Any]:
    """Case 1: per-delta lateness, one session at a time, rounds interleaved over the paths."""
    lateness: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(args.rounds):
        for name, proc in paths.items():
            print(f"  added delay: round {r + 1}/{args.rounds} through {name}", flush=True)
            url = _url(proc, args.delay_events, args.delay_interval_ms)
            outcomes, _ = collect(url, 1, args.delay_events, args.delay_generations, ramp_s=0)
            (one,) = outcomes
            if one.error or not one.complete:
                raise RuntimeError(f"{name}: the session failed ({one.error})")
            lateness[name] += one.lateness_s
    results = {name: lateness_summary(values, LATE_MS) for name, values in lateness.items()}
    for name, r in results.items():
        r["events"] = len(lateness[name])
        for base in ("direct", "mitmdump"):
            if base in results and name != base:
                for q in ("p50_ms", "p99_ms"):
                    r[f"added_{q}_vs_{base}"] = round(r[q] - results[base][q], 3)
    config = {k: getattr(args, k) for k in ("rounds", "delay_events", "delay_interval_ms", "delay_generations")}
    return {"config": config, "results": results}


def concurrent(paths: dict[str, Proc], upstream: Proc, args: argparse.Namespace) -> dict[str, Any]:
    """Case 2: many sessions at once through each path in turn."""
    results: dict[str, Any] = {}
    for name, proc in paths.items():
        print(f"  concurrent: {args.sessions} sessions through {name}", flush=True)
        pid = None if proc is upstream else proc.popen.pid
        with ProcWatch(pid) as proxy, ProcWatch(upstream.popen.pid) as up:
            t0 = time.monotonic()
            url = _url(proc, args.events, args.interval_ms)
            # Generations start once every session is open (connecting is timed apart, as `connect`).
            start = (time.time() + args.ramp + args.settle, args.interval_ms / 1000)
            outcomes, client_cpu = collect(
                url, args.sessions, args.events, processes=args.clients, ramp_s=args.ramp, start=start
            )
            wall = time.monotonic() - t0
        results[name] = {
            **summarise(outcomes, LATE_MS),
            "lateness_by_position": by_position(outcomes, args.events),
            "wall_s": round(wall, 2),
            "proxy": None if pid is None else proxy.usage.to_dict(),
            "client_cpu_s": client_cpu,
            "upstream_cpu_s": up.usage.cpu_s,
        }
        time.sleep(1.0)  # closed connections settle before the next path
    config = {k: getattr(args, k) for k in ("sessions", "events", "interval_ms", "clients", "ramp", "settle")}
    return {"config": config, "results": results}


def targets(delay: dict[str, Any], many: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    d = delay["results"]
    for name in ("brownout-all-on", "brownout"):
        if name in d and "mitmdump" in d:
            r = d[name]
            detail = f"p99 {r['p99_ms']} ms vs mitmdump {d['mitmdump']['p99_ms']} ms; p50 added {r.get('added_p50_ms_vs_mitmdump')} ms"
            out[f"{name}: event_p99_added_vs_mitmdump_ms"] = target(
                r["added_p99_ms_vs_mitmdump"], "<=", P99_ADDED_MS, " ms", detail
            )
    for name in ("brownout-all-on", "brownout"):
        r = many["results"].get(name)
        if r is None:
            continue
        late = r["lateness"]
        out[f"{name}: sessions_events_delivered"] = target(
            r["events_delivered"], ">=", r["events_expected"], "", f"of {r['events_expected']:,} deltas"
        )
        out[f"{name}: sessions_complete"] = target(
            r["sessions_complete"], ">=", r["sessions"], "", f"of {r['sessions']}"
        )
        detail = f"p50 {late['p50_ms']} ms, p99 {late['p99_ms']} ms; {late['late_events']} over"
        out[f"{name}: sessions_max_lateness_ms"] = target(late["max_ms"], "<=", LATE_MS, " ms", detail)
        proxy = r.get("proxy") or {}
        start = proxy.get("rss_start_mb")
        detail = "" if start is None else f"from {start} MB at the start"
        out[f"{name}: sessions_peak_rss_mb"] = target(proxy.get("peak_rss_mb"), "<", RSS_MB, " MB", detail)
    return out


def _print(delay: dict[str, Any], many: dict[str, Any]) -> None:
    print("\nadded delay per server event (one session at a time)")
    print(
        f"  {'path':<17}{'events':>8}{'p50 ms':>9}{'p99 ms':>9}{'+p50 vs direct':>16}{'+p99 vs direct':>16}{'+p99 vs mitmdump':>18}"
    )
    for name, r in delay["results"].items():
        print(
            f"  {name:<17}{r['events']:>8}{r['p50_ms']:>9}{r['p99_ms']:>9}"
            f"{r.get('added_p50_ms_vs_direct', '-')!s:>16}{r.get('added_p99_ms_vs_direct', '-')!s:>16}"
            f"{r.get('added_p99_ms_vs_mitmdump', '-')!s:>18}"
        )
    print(f"\n{many['config']['sessions']} concurrent sessions")
    print(
        f"  {'path':<17}{'complete':>10}{'delivered':>11}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'peak RSS MB':>13}{'CPU s':>8}"
    )
    for name, r in many["results"].items():
        proxy = r.get("proxy") or {}
        late = r["lateness"]
        print(
            f"  {name:<17}{r['sessions_complete']:>10}{r['events_delivered']:>11}{late['p50_ms']!s:>9}"
            f"{late['p99_ms']!s:>9}{late['max_ms']!s:>9}{proxy.get('peak_rss_mb', '-')!s:>13}{proxy.get('cpu_s', '-')!s:>8}"
        )
    print(f"  max lateness by place in the generation: first {EDGE_FIRST} deltas / middle / last {EDGE_LAST} (ms)")
    for name, r in many["results"].items():
        edges = r["lateness_by_position"]
        print(f"  {name:<17}" + " / ".join(f"{edges[e]['max_ms']}" for e in ("first", "middle", "last")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/realtime.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the added-delay case")
    parser.add_argument("--delay-events", type=int, default=200, help="deltas per generation in the added-delay case")
    parser.add_argument("--delay-interval-ms", type=float, default=5.0)
    parser.add_argument("--delay-generations", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=200, help="concurrent sessions")
    parser.add_argument("--events", type=int, default=60, help="deltas per session in the concurrent case")
    parser.add_argument("--interval-ms", type=float, default=100.0)
    parser.add_argument("--clients", type=int, default=2, help="client processes the sessions are spread over")
    parser.add_argument("--ramp", type=float, default=2.0, help="seconds over which the sessions open")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after the ramp before generations start")
    parser.add_argument("--quick", action="store_true", help="a smoke check: 1 round, 20 sessions of 20 deltas")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "realtime.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.delay_events, args.sessions, args.events = 1, 50, 20, 20
    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    if unknown := sorted(set(names) - set(PATHS)):
        parser.error(f"unknown paths {unknown}; choose from {', '.join(PATHS)}")
    raise_nofile(args.sessions * 4 + 1024)  # before the servers start: they inherit it
    workdir = Path(tempfile.mkdtemp(prefix="brownout-realtime-bench-"))
    upstream, paths = start_paths(workdir, names)
    try:
        delay = added_delay(paths, args)
        many = concurrent(paths, upstream, args)
    finally:
        stop_paths(upstream, paths)
        shutil.rmtree(workdir, ignore_errors=True)
    verdicts = targets(delay, many)
    _print(delay, many)
    print_verdicts(verdicts)
    tool = f"bench/wsclient.py (websockets asyncio client, {args.clients} processes)"
    data = {
        "meta": run_meta("bench/realtime.py", argv, tool),
        "added_delay": delay,
        "concurrent": many,
        "targets": verdicts,
    }
    return save_results(data, args.output, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
