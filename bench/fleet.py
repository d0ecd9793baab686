"""brownout in a fleet: what the Redis state backend and `--workers 2` cost, side by side in one run.

    .venv/bin/python bench/fleet.py             # 5 interleaved rounds of 3 s load runs per path
    .venv/bin/python bench/fleet.py --quick     # 1 round of 2 s runs: a smoke check, not a measurement
    .venv/bin/python bench/fleet.py --check     # exit 1 when a target is missed

The bench starts its own mock upstream and redis-server (Debian's package, which `make system-deps`
installs; `--redis-server PATH` for another), every server in its own process, on loopback.

1. State backend: brownout with `state: {backend: memory}` and the same config with
   `state: {backend: redis}`: rules bound by shared counters (every, max_injections), a probability-only rule, and the
   session invariants; `GET /ping` at 1 and 8 connections, each request in one of 16 sessions. Two
   rule sets, each on both backends: faults that act only on the answer (`memory`, `redis`: a fleet
   decides them while the request travels upstream) and faults that may act before the request goes,
   with a request quota (`memory-first`, `redis-first`: decided before the upstream call). Reported:
   req/s, p50 and p99 of each, what Redis adds to an exchange (target: p50 at most +0.5 ms at 1
   connection, on the first pair; the second pair's is reported beside it), and CPU seconds per
   1,000 requests of each process. At 8 connections the proxy is saturated, so its p50 is mostly
   queueing (about 8 times the CPU time of an exchange): what Redis adds there is reported, as a
   throughput cost, with no target.
2. Workers: `brownout run --workers 2` against one process (`--workers 1`), the same config with no
   rules and no invariants (state on the same Redis): req/s at 1 and 8 connections, the ratio, and CPU
   seconds per 1,000 requests of every process (supervisor, each worker, upstream, Redis, load).

Rounds interleave the paths (in each round, the paths one right after the other at each connection
count), and each figure is the median over the rounds; what Redis adds is the median of each round's
difference, so that a machine busy in one round and idle in the next does not decide it. Every
round's value is kept, to show the spread. On a machine with fewer cores than processes (2 cores: the load generator,
the upstream and the proxies share them) two workers cannot double throughput; the CPU seconds per
1,000 requests say where the time goes. Results go to bench/results/fleet.json with the command, the
machine and the commit.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fleetload import Run, children, measure, median_runs
from bench.fleetreport import print_fleet, targets
from bench.machine import run_meta, wrk_version
from bench.procs import ROOT, Proc, start_brownout, start_redis, start_upstream
from bench.report import save_results
from bench.run import ensure_wrk

__all__ = ["CONNECTIONS", "RULE_SETS", "STATE_PATHS", "main", "run_fleet_bench", "state_config"]

RESULTS = ROOT / "bench" / "results" / "fleet.json"
CONNECTIONS = (1, 8)
SESSIONS = 16

# Every rule matches every request: the counted ones exercise the Redis script fully (every, cap, quota)
# and fire rarely, with a fault that costs nothing (a 0 ms delay), so the backends differ only in how
# they decide. The invariants are the session ones: their state is what Redis shares.
# Two rule sets, each beside the memory backend: faults that act only on the answer (a delay of the first
# byte), which a fleet decides while the request travels upstream; and faults that may act before the
# request goes (a delay before forwarding, a quota that answers in upstream's place), decided first.
_ANSWER = "fault: {type: latency, delay_ms: 0, phase: first_byte}"
_FIRST = "fault: {type: latency, delay_ms: 0}"
_RULES = """\
rules:
  - {{name: every-1000, match: {{path: /ping}}, {fault}, schedule: {{every: 1000}}}}
  - {{name: capped, match: {{path: /ping}}, {fault}, schedule: {{max_injections: 10}}}}
{quota}  - {{name: p-only, match: {{path: /ping}}, {fault}, schedule: {{probability: 0.01}}}}
"""
_QUOTA = "  - {name: quota, match: {path: /ping}, schedule: {quota: {requests_per_min: 1000000000}}}\n"
_INVARIANTS = """\
invariants:
  - {type: call_budget, max_calls: 1000000000}
  - {type: token_budget, max_tokens: 1000000000}
  - {type: no_loop}
  - {type: retry_discipline}
"""
RULE_SETS = {
    "answer": _RULES.format(fault=_ANSWER, quota="") + _INVARIANTS,
    "first": _RULES.format(fault=_FIRST, quota=_QUOTA) + _INVARIANTS,
}
# The state case's paths: (backend, rule set); the target is on the first pair, the second is reported.
STATE_PATHS = {
    "memory": ("memory", "answer"),
    "redis": ("redis", "answer"),
    "memory-first": ("memory", "first"),
    "redis-first": ("redis", "first"),
}


def state_config(backend: str, redis_url: str, *, rules: str | None = "answer") -> str:
    """A config on `backend` with a rule set of RULE_SETS (None: no rules, no invariants)."""
    state = f'state: {{backend: redis, url: "{redis_url}"}}\n' if backend == "redis" else ""
    return "version: 1\nseed: 1\n" + state + (RULE_SETS[rules] if rules else "")


def _start(name: str, upstream: Proc, workdir: Path, config: str, extra: list[str] | None = None) -> Proc:
    path = workdir / f"{name}.yaml"
    path.write_text(config)
    proc = start_brownout(upstream.port, workdir / name, str(path), extra_args=extra)
    if isinstance(proc, str):
        raise RuntimeError(f"{name}: {proc}")
    proc.name = name
    if extra and "--workers" in extra:
        proc.extra["supervisor"] = "yes"
    return proc


def _pids(proc: Proc, shared: dict[str, int]) -> dict[str, int]:
    """The processes to account for a path: the proxy (a supervisor's workers apart) and the shared ones."""
    workers = children(proc.popen.pid) if proc.extra.get("supervisor") else []
    own = {"supervisor": proc.popen.pid} if workers else {"brownout": proc.popen.pid}
    own.update({f"worker {i}": pid for i, pid in enumerate(workers)})
    return {**own, **shared}


def _measure_case(
    paths: dict[str, Proc], shared: dict[str, int], duration_s: float, rounds: int, use_wrk: bool, sessions: int
) -> dict[str, Any]:
    runs: dict[str, dict[int, list[Run]]] = {name: {c: [] for c in CONNECTIONS} for name in paths}
    for name, proc in paths.items():
        print(f"  {name}: warm-up", flush=True)
        measure(proc.port, 8, max(1.0, duration_s / 4), use_wrk, {}, sessions)
    for r in range(rounds):
        print(f"  round {r + 1}/{rounds}: 1 and 8 connections on {', '.join(paths)}", flush=True)
        for c in CONNECTIONS:  # the paths one right after the other: a round's pair saw the same machine
            for name, proc in paths.items():
                runs[name][c].append(measure(proc.port, c, duration_s, use_wrk, _pids(proc, shared), sessions))
    return {name: {f"c{c}": median_runs(by_c[c]) for c in CONNECTIONS} for name, by_c in runs.items()}


def run_fleet_bench(
    duration_s: float, rounds: int, use_wrk: bool, redis_server: str | None = None, workers: bool = True
) -> dict[str, Any]:
    """Both cases on one upstream and one Redis; each path's servers run only during its case."""
    workdir = Path(tempfile.mkdtemp(prefix="brownout-fleet-bench-"))
    procs: list[Proc] = []
    data: dict[str, Any] = {}
    try:
        upstream = start_upstream(workdir)
        redis = start_redis(workdir, redis_server)
        procs += [upstream, redis]
        shared = {"upstream": upstream.popen.pid, "redis-server": redis.popen.pid}
        url = redis.extra["url"]
        print("state backend: memory vs redis", flush=True)
        paths = {
            name: _start(name, upstream, workdir, state_config(backend, url, rules=rules))
            for name, (backend, rules) in STATE_PATHS.items()
        }
        procs += paths.values()
        data["state"] = _measure_case(paths, shared, duration_s, rounds, use_wrk, SESSIONS)
        for p in paths.values():
            p.stop()
        if workers:
            print("workers: --workers 1 vs --workers 2, no rules", flush=True)
            plain = state_config("redis", url, rules=None)
            paths = {
                "workers-1": _start("workers-1", upstream, workdir, plain),
                "workers-2": _start("workers-2", upstream, workdir, plain, ["--workers", "2"]),
            }
            procs += paths.values()
            data["workers"] = _measure_case(paths, shared, duration_s, rounds, use_wrk, 0)
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return data


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/fleet.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=None, help="seconds per load run (default 3, quick 2)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds; medians count (default 5)")
    parser.add_argument("--quick", action="store_true", help="one round of short runs: a smoke check")
    parser.add_argument("--no-workers", action="store_true", help="only the state-backend case")
    parser.add_argument("--redis-server", default=None, help="the redis-server binary (default: on PATH)")
    parser.add_argument("--python-load", action="store_true", help="the Python load generator even with wrk")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install wrk")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed, naming it")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    duration = args.duration or (2.0 if args.quick else 3.0)
    rounds = args.rounds or (1 if args.quick else 5)
    use_wrk = False if args.python_load else ensure_wrk(not args.no_install)
    data = run_fleet_bench(duration, rounds, use_wrk, args.redis_server, workers=not args.no_workers)
    tool = (wrk_version() or "wrk") if use_wrk else "python asyncio (bench/load.py)"
    data["meta"] = run_meta("bench/fleet.py", argv, tool, duration_s=duration, rounds=rounds)
    data["meta"]["sessions"] = SESSIONS if use_wrk else 1
    data["targets"] = targets(data)
    print_fleet(data)
    return save_results(data, args.output, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
