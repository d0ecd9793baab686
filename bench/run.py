"""brownout benchmark: direct vs plain mitmdump vs brownout (no faults), side by side in one run, on loopback.

    .venv/bin/python bench/run.py             # 3 interleaved rounds of 4 s load runs, 10 SSE runs per path
    .venv/bin/python bench/run.py --quick     # 1 round of 2 s runs, 3 SSE runs: a smoke check
    .venv/bin/python bench/run.py --check     # exit 1 when a target is missed (--strict is the same)
    .venv/bin/python bench/run.py --streams-case   # also 1,000 concurrent SSE streams (bench/streams.py)
    .venv/bin/python bench/run.py --no-llm     # without the LLM-shaped cases (bench/llm.py)
    .venv/bin/python bench/run.py --llm-only   # only the LLM-shaped cases, through their four paths
    .venv/bin/python bench/run.py --llm-only --llm-reference   # and through mitmdump-stream and brownout too

Paths: direct; plain mitmdump (buffers SSE); mitmdump with stream_large_bodies=1 (the same engine
unbuffered); brownout with no rules; brownout with every invariant and exporter on
(bench/all-on.yaml), and the same with its analysis in a second process (bench/all-on-process.yaml).
Rounds interleave the paths, so a disturbance on a shared machine hits every path alike; the round
with the median req/s counts, and each latency percentile is its median over the rounds.

Load comes from `wrk` (install it with `apt-get install -y wrk` on Debian/Ubuntu, `brew install wrk`
on macOS). When wrk is missing the bench runs that apt-get itself if it is root (skip with
--no-install), and otherwise falls back to a Python asyncio keep-alive generator, whose own
ceiling (a few thousand req/s) caps the direct numbers but not the proxies'.

Every server runs in its own process (mock upstream, mitmdump, brownout) so none shares a GIL
with the load generator. Throughput and latency use GET /ping (1 KB JSON); streaming uses GET /sse
(10 events 100 ms apart): plain mitmdump buffers the stream, brownout must not. Then the traffic
brownout exists for (bench/llm.py): OpenAI chat completions with tool calls, whole and streamed, and
Anthropic messages streamed with a tool call, through direct, plain mitmdump and both all-on paths,
with the same targets for all-on (--no-llm skips them; --llm-reference adds unbuffered mitmdump and
brownout with no rules, to split the gap between streaming's own cost and brownout's).
With --streams-case, the same servers then carry 1,000 concurrent SSE streams of 60 events each,
one path after another (about a minute more; see bench/streams.py). Results go to
bench/results/latest.json, with the machine, the software and the brownout commit they ran on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.llm import LLM_PATHS, REFERENCE_PATHS, llm_targets, measure_llm
from bench.load import ROUNDS_LATENCY, have_wrk, median_round, run_load
from bench.machine import describe, wrk_version
from bench.procs import ROOT, Proc, start_brownout, start_mitmdump, start_upstream
from bench.report import load_targets, print_report, save_results, streams_targets
from bench.sseclient import raise_nofile
from bench.streams import PATHS as STREAM_PATHS
from bench.streams import StreamsConfig, run_case
from bench.ttft import measure_ttft

__all__ = ["build_parser", "main", "run_bench"]

RESULTS = ROOT / "bench" / "results" / "latest.json"


def ensure_wrk(allow_install: bool) -> bool:
    """True when wrk is on PATH, installing the Debian package first when we may."""
    if have_wrk():
        return True
    if not allow_install or not shutil.which("apt-get") or os.geteuid() != 0:
        print("wrk not found: using the Python load generator (install: apt-get install -y wrk)")
        return False
    print("wrk not found: running apt-get install -y wrk ...")
    for cmd in (["apt-get", "install", "-y", "wrk"], ["apt-get", "update"], ["apt-get", "install", "-y", "wrk"]):
        subprocess.run(
            cmd, capture_output=True, timeout=600, check=False, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        )
        if have_wrk():
            return True
    print("apt-get could not install wrk: using the Python load generator")
    return False


def _measure_all(
    targets: dict[str, int], duration_s: float, rounds: int, ttft_runs: int, use_wrk: bool
) -> dict[str, Any]:
    """Interleave the paths round by round, so drift on the machine hits every path alike."""
    runs: dict[str, dict[str, list[Any]]] = {name: {"c1": [], "c8": []} for name in targets}
    for name, port in targets.items():
        print(f"  {name}: warm-up", flush=True)
        run_load(port, "/ping", 8, max(1.0, duration_s / 5), use_wrk=use_wrk)  # warm caches, pools, certs
    for r in range(rounds):
        print(f"  round {r + 1}/{rounds}: load at 1 and 8 connections on every path", flush=True)
        for name, port in targets.items():
            runs[name]["c1"].append(run_load(port, "/ping", 1, duration_s, use_wrk=use_wrk))
            runs[name]["c8"].append(run_load(port, "/ping", 8, duration_s, use_wrk=use_wrk))
    out: dict[str, Any] = {}
    for name, port in targets.items():
        print(f"  {name}: {ttft_runs} SSE streams", flush=True)
        out[name] = {
            "port": port,
            "c1": median_round(runs[name]["c1"]),
            "c8": median_round(runs[name]["c8"]),
            "sse": measure_ttft(port, runs=ttft_runs).to_dict(),
        }
    return out


def run_bench(
    duration_s: float,
    ttft_runs: int,
    use_wrk: bool,
    brownout_config: str | None,
    all_on: bool = True,
    rounds: int = 3,
    streams: StreamsConfig | None = None,
    llm: bool = True,
    llm_only: bool = False,
    llm_reference: bool = False,
) -> dict[str, Any]:
    """Measure every path; with `llm`, the LLM-shaped cases; with `streams`, then the concurrent-streams
    case on the same servers. `llm_only` starts only the LLM cases' paths and measures only those cases;
    `llm_reference` runs the LLM cases through unbuffered mitmdump and brownout with no rules too."""
    workdir = Path(tempfile.mkdtemp(prefix="brownout-bench-"))
    procs: list[Proc] = []
    notes: list[str] = []
    by_name: dict[str, Proc] = {}
    data: dict[str, Any] = {}
    if streams is not None:
        raise_nofile(streams.fds())  # before the servers start: they inherit it
    try:
        upstream = start_upstream(workdir)
        procs.append(upstream)
        by_name["direct"] = upstream
        by_name["mitmdump"] = start_mitmdump(upstream.port, workdir)
        procs.append(by_name["mitmdump"])
        variants: dict[str, str | None] = {}
        if not llm_only or llm_reference:
            # The same engine told to stream every body: what unbuffered mitmproxy itself costs.
            by_name["mitmdump-stream"] = start_mitmdump(upstream.port, workdir, stream_all=True)
            procs.append(by_name["mitmdump-stream"])
            variants["brownout"] = brownout_config
        if all_on or llm_only:
            variants["brownout-all-on"] = str(ROOT / "bench" / "all-on.yaml")
            variants["brownout-all-on-process"] = str(ROOT / "bench" / "all-on-process.yaml")
        for name, config in variants.items():
            brownout = start_brownout(upstream.port, workdir / name, config)
            if isinstance(brownout, str):
                notes.append(brownout)
                print(f"{name} skipped: {brownout}")
            else:
                procs.append(brownout)
                by_name[name] = brownout
        ports = {name: proc.port for name, proc in by_name.items()}
        if not llm_only:
            data["results"] = _measure_all(ports, duration_s, rounds, ttft_runs, use_wrk)
        if llm or llm_only:
            llm_paths = LLM_PATHS + (REFERENCE_PATHS if llm_reference else ())
            pids = {n: p.popen.pid for n, p in by_name.items() if n != "direct"}  # the proxies' CPU
            data["llm"] = measure_llm(
                {n: p for n, p in ports.items() if n in llm_paths}, duration_s, rounds, use_wrk, pids=pids
            )
        if streams is not None:
            paths = {name: by_name[name] for name in STREAM_PATHS if name in by_name}
            data["streams"] = run_case(paths, upstream, streams)
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {**data, "notes": notes}


def _meta(duration_s: float, use_wrk: bool, rounds: int, argv: list[str]) -> dict[str, Any]:
    tool = (wrk_version() or "wrk") if use_wrk else "python asyncio (bench/load.py)"
    return {
        "command": " ".join(["bench/run.py", *argv]),
        "duration_s": duration_s,
        "rounds": rounds,
        "summary": ROUNDS_LATENCY,
        "machine": describe(tool),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=None, help="seconds per load run (default 4, quick 2)")
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke check, not a measurement")
    parser.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds per path; the median counts (default 3, quick 1)"
    )
    parser.add_argument("--ttft-runs", type=int, default=None, help="SSE streams per path (default 10, quick 3)")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install wrk")
    parser.add_argument("--python-load", action="store_true", help="use the Python load generator even with wrk")
    parser.add_argument("--brownout-config", default=None, help="chaos config for brownout (default: none)")
    parser.add_argument(
        "--no-all-on",
        action="store_true",
        help="skip the brownouts with every invariant and exporter on (bench/all-on.yaml, all-on-process.yaml)",
    )
    parser.add_argument(
        "--check", "--strict", dest="check", action="store_true", help="exit 1 when a target is missed, naming it"
    )
    parser.add_argument(
        "--no-llm", action="store_true", help="skip the LLM-shaped cases (tool calls, streamed and not; bench/llm.py)"
    )
    parser.add_argument(
        "--llm-only",
        action="store_true",
        help="only the LLM-shaped cases through direct, plain mitmdump and both all-on paths (no GET /ping, no SSE)",
    )
    parser.add_argument(
        "--llm-reference",
        action="store_true",
        help="the LLM-shaped cases also through unbuffered mitmdump and brownout with no rules: where the gap comes from",
    )
    parser.add_argument(
        "--streams-case",
        action="store_true",
        help="then 1,000 concurrent SSE streams through direct, both mitmdumps and brownout-all-on (bench/streams.py)",
    )
    parser.add_argument("--streams", type=int, default=1000, help="streams in the streams case")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON results")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.llm_only and (args.no_llm or args.streams_case):
        parser.error("--llm-only runs the LLM cases alone: not with --no-llm or --streams-case")
    if args.llm_reference and args.no_llm:
        parser.error("--llm-reference adds paths to the LLM cases: not with --no-llm")
    duration = args.duration or (2.0 if args.quick else 4.0)
    ttft_runs = args.ttft_runs or (3 if args.quick else 10)
    use_wrk = False if args.python_load else ensure_wrk(not args.no_install)
    print(
        f"brownout bench: {duration:g} s per load run, {ttft_runs} SSE runs, load via {'wrk' if use_wrk else 'python'}"
    )
    rounds = args.rounds or (1 if args.quick else 3)
    streams = StreamsConfig(streams=args.streams) if args.streams_case else None
    data = run_bench(
        duration,
        ttft_runs,
        use_wrk,
        args.brownout_config,
        all_on=not args.no_all_on,
        rounds=rounds,
        streams=streams,
        llm=not args.no_llm,
        llm_only=args.llm_only,
        llm_reference=args.llm_reference,
    )
    data["meta"] = _meta(duration, use_wrk, rounds, argv if argv is not None else sys.argv[1:])
    data["targets"] = load_targets(data["results"]) if "results" in data else {}
    if "llm" in data:
        data["targets"].update(llm_targets(data["llm"]))
    if "streams" in data:
        data["targets"].update(streams_targets(data["streams"]))
    print_report(data)
    return save_results(data, args.output, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
