"""Concurrent SSE streams at scale: every event delivered, how late, and what the proxy spent on it.

    .venv/bin/python bench/streams.py                                  # 1,000 streams x 60 events 100 ms apart
    .venv/bin/python bench/streams.py --streams 100 --events 20        # a smoke check
    .venv/bin/python bench/streams.py --check                          # exit 1 when a target is missed
    .venv/bin/python bench/run.py --streams-case                       # the same case after the load bench

Each stream is `GET /sse?stamp=1` on the mock upstream, which writes each event's send time into it;
an event's lateness is when the client read it minus that time (same machine, same clock). About 6 s
per stream by default; the streams open over a 1 s ramp, so all of them are open together for most of
the case. The client is asyncio protocols with h11 spread over `--clients` processes (2 by default):
the `direct` path's lateness is the floor the client and the machine themselves add.

Paths, each server in its own process, measured one after another (each one fills the machine):
- `direct`: the upstream itself;
- `mitmdump`: plain `mitmdump -q`, which buffers each response: an event arrives when its stream ends,
  so its lateness is the rest of the stream;
- `mitmdump-stream`: `mitmdump` with `stream_large_bodies=1`, the fair streaming comparison;
- `brownout-all-on`: brownout with every invariant and exporter on (bench/all-on.yaml);
- `brownout`: brownout with no rules (not run unless named in `--paths`).
Per path: streams complete, events delivered, lateness p50/p99/max and how many events came later than
250 ms, the proxy's peak RSS (VmHWM, reset at the start, and sampled VmRSS) and CPU seconds (/proc), and
the CPU seconds of the client processes and of the upstream (a path whose client or upstream used a
whole core was limited by them, not by the proxy).
Targets (each brownout path): every event delivered, every stream complete, no event later than 250 ms,
peak RSS under 500 MB. Results go to bench/results/streams.json (`--output`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.machine import run_meta
from bench.procs import ROOT, Proc, start_brownout, start_mitmdump, start_upstream
from bench.procstat import ProcWatch
from bench.report import LATE_MS, print_streams, print_verdicts, save_results, streams_targets
from bench.sseclient import collect, raise_nofile, summarise

__all__ = ["PATHS", "StreamsConfig", "main", "run_case", "start_paths", "stop_paths"]

PATHS = ("direct", "mitmdump", "mitmdump-stream", "brownout-all-on")
ALL_PATHS = (*PATHS, "brownout")
ALL_ON = str(ROOT / "bench" / "all-on.yaml")


@dataclass
class StreamsConfig:
    """The case's size and the client's shape."""

    streams: int = 1000
    events: int = 60
    interval_ms: int = 100
    client_processes: int = 2
    ramp_s: float = 1.0

    def fds(self) -> int:
        """Open files a proxy needs for the case: a client and an upstream socket per stream, and slack."""
        return self.streams * 2 + 1024


def run_case(paths: dict[str, Proc], upstream: Proc, cfg: StreamsConfig) -> dict[str, Any]:
    """Run the streams through each path in turn; `paths["direct"]` is the upstream itself."""
    results: dict[str, Any] = {}
    for name, proc in paths.items():
        print(f"  streams: {cfg.streams} through {name}", flush=True)
        pid = None if proc is upstream else proc.popen.pid
        with ProcWatch(pid) as proxy, ProcWatch(upstream.popen.pid) as up:
            t0 = time.monotonic()
            outcomes, client_cpu = collect(
                proc.port, cfg.streams, cfg.events, cfg.interval_ms, processes=cfg.client_processes, ramp_s=cfg.ramp_s
            )
            wall = time.monotonic() - t0
        results[name] = {
            **summarise(outcomes, cfg.events, LATE_MS),
            "wall_s": round(wall, 2),
            "proxy": None if pid is None else proxy.usage.to_dict(),
            "client_cpu_s": client_cpu,
            "upstream_cpu_s": up.usage.cpu_s,
        }
        time.sleep(1.0)  # the closed connections settle before the next path starts
    return {"config": asdict(cfg), "results": results}


def start_paths(
    workdir: Path, names: list[str], brownout_config: str | None
) -> tuple[Proc, dict[str, Proc], list[str]]:
    """The upstream and each named path's server; notes for paths that could not start (their servers)."""
    upstream = start_upstream(workdir)
    paths: dict[str, Proc] = {}
    notes: list[str] = []
    try:
        for name in names:
            if name == "direct":
                paths[name] = upstream
            elif name.startswith("mitmdump"):
                paths[name] = start_mitmdump(upstream.port, workdir, stream_all=name == "mitmdump-stream")
            else:
                config = brownout_config if name == "brownout" else ALL_ON
                proc = start_brownout(upstream.port, workdir / name, config)
                if isinstance(proc, str):
                    notes.append(f"{name} skipped: {proc}")
                else:
                    paths[name] = proc
    except BaseException:
        stop_paths(upstream, paths)
        raise
    return upstream, paths, notes


def stop_paths(upstream: Proc, paths: dict[str, Proc]) -> None:
    for proc in paths.values():
        if proc is not upstream:
            proc.stop()
    upstream.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/streams.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=1000, help="concurrent SSE streams per path")
    parser.add_argument("--events", type=int, default=60, help="events per stream")
    parser.add_argument("--interval", type=int, default=100, help="ms between a stream's events")
    parser.add_argument("--clients", type=int, default=2, help="client processes the streams are spread over")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which the streams open")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(ALL_PATHS)}")
    parser.add_argument("--brownout-config", default=None, help="config of the `brownout` path (default: none)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "streams.json")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ALL_PATHS))
    if unknown:
        parser.error(f"unknown paths {unknown}; choose from {', '.join(ALL_PATHS)}")
    cfg = StreamsConfig(args.streams, args.events, args.interval, args.clients, args.ramp)
    raise_nofile(cfg.fds())  # before the servers start: they inherit it
    workdir = Path(tempfile.mkdtemp(prefix="brownout-streams-"))
    upstream, paths, notes = start_paths(workdir, names, args.brownout_config)
    try:
        case = run_case(paths, upstream, cfg)
    finally:
        stop_paths(upstream, paths)
        shutil.rmtree(workdir, ignore_errors=True)
    targets = streams_targets(case)
    print_streams(case)
    print_verdicts(targets)
    for note in notes:
        print(f"note: {note}")
    tool = f"bench/sseclient.py (asyncio + h11, {cfg.client_processes} processes)"
    data = {
        "meta": run_meta("bench/streams.py", argv, tool),
        "streams": case,
        "targets": targets,
        "notes": notes,
    }
    return save_results(data, args.output, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
