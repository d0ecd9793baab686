"""What the agent's own spans cost: brownout all-on vs all-on receiving and joining the agent's spans,
side by side in one run, and memory with traces that never end.

    .venv/bin/python bench/agentspans.py            # 3 interleaved rounds of 4 s per path, then 30 s of memory
    .venv/bin/python bench/agentspans.py --quick    # 1 round of 2 s, 10 s of memory: a smoke check
    .venv/bin/python bench/agentspans.py --check    # exit 1 when a target is missed

The traffic is an instrumented agent's (bench/agentload.py): the `openai-tools` LLM call with
`traceparent`, and the agent's spans for it (chat, its HTTP client span, an invoke_agent per run of 8
calls) exported over OTLP/HTTP every 200 ms. Paths, each its own process on loopback:

- `all-on`: bench/all-on.yaml (every invariant and exporter); the agent's exports go to the mock upstream;
- `all-on+agent-spans`: the same plus `agent_spans` (its OTLP receiver takes the exports) and the three
  invariants that need both sides, every call joined to its agent span, every trace judged;
- `all-on+agent-spans-by-time`: the same process, the agent sending no `traceparent`: each call waits
  for its agent span (the next export) and is joined by time.

Target: both paths with the spans at least 0.90x all-on's throughput at 1 and 8 connections (median round), and
at least 0.90x its capacity: brownout's CPU seconds per request, inverted (what a saturated brownout could
serve; unlike throughput, it holds still on a machine other work shares, and the Python load generator,
building and sending the agent's spans on the same cores, caps the throughput of both paths).
Memory: agents whose traces never end (one trace per connection, 8 connections) against limits
`max_spans: 4000` (a trace holds at most 1000): the RSS of the second half of the run may grow at most 20 MB, and what was dropped
to stay in bounds is counted. Results go to bench/results/agentspans.json (not the published ones).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.agentload import run_agents
from bench.machine import describe
from bench.procs import ROOT, Proc, free_port, start_brownout, start_upstream
from bench.procstat import cpu_seconds, rss_mb

__all__ = ["main"]

RESULTS = ROOT / "bench" / "results" / "agentspans.json"
FLOOR = 0.90
RSS_GROWTH_MB = 20.0
_AGENT_SPANS = """
agent_spans:
  receiver: {{listen: "127.0.0.1:{port}"}}
  settle_s: {settle_s}
  {limits}
"""
_BOTH_SIDES = """
  - {type: claimed_success}
  - {type: missing_span}
  - {type: span_mismatch}
"""


def _config(workdir: Path, name: str, receiver_port: int | None, limits: str = "", settle_s: float = 1.0) -> str:
    text = (ROOT / "bench" / "all-on.yaml").read_text()
    if receiver_port is not None:
        text = text.replace("\ninvariants:\n", "\ninvariants:\n" + _BOTH_SIDES.lstrip("\n"), 1)
        text += _AGENT_SPANS.format(port=receiver_port, settle_s=settle_s, limits=limits)
    path = workdir / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def _metric(port: int, name: str) -> dict[str, float]:
    """Samples of one metric from brownout's /metrics, by their label text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            out[key[len(name) :] or "total"] = float(value)
    return out


def _start(workdir: Path, upstream: Proc, name: str, config: str) -> tuple[Proc, int]:
    metrics = free_port()
    proc = start_brownout(
        upstream.port, workdir, config, extra_args=["--set", f"brownout_metrics_listen=127.0.0.1:{metrics}"]
    )
    if isinstance(proc, str):
        raise RuntimeError(f"{name}: {proc}")
    return proc, metrics


def throughput(workdir: Path, rounds: int, duration_s: float) -> dict[str, Any]:
    upstream = start_upstream(workdir)
    receiver = free_port()
    plain, _ = _start(workdir, upstream, "all-on", _config(workdir, "all-on", None))
    joined, metrics = _start(workdir, upstream, "all-on+agent-spans", _config(workdir, "agent-spans", receiver))
    paths = {
        "all-on": (plain, upstream.port, True),
        "all-on+agent-spans": (joined, receiver, True),
        "all-on+agent-spans-by-time": (joined, receiver, False),  # no traceparent: each call waits for its span
    }
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {"c1": [], "c8": []} for p in paths}
    try:
        for proc, sink, _ in paths.values():  # warm-up: imports, price table, first connections
            run_agents(proc.port, sink, 2, 1.0)
        for _ in range(rounds):
            for c in (1, 8):
                for path, (proc, sink, propagate) in paths.items():
                    cpu0 = cpu_seconds(proc.popen.pid)
                    result, load = run_agents(proc.port, sink, c, duration_s, propagate=propagate)
                    cpu1 = cpu_seconds(proc.popen.pid)
                    cpu_ms = None if cpu0 is None or cpu1 is None or not result.requests else (cpu1 - cpu0) * 1000
                    per_request = None if cpu_ms is None else cpu_ms / result.requests
                    runs[path][f"c{c}"].append(
                        {**result.to_dict(), "spans_exported": load.exported, "cpu_ms_per_request": per_request}
                    )
        time.sleep(2.5)  # the last traces settle and are judged
        counters = {name: _metric(metrics, name) for name in _COUNTERS}
    finally:
        for proc in (plain, joined, upstream):
            proc.stop()
    out: dict[str, Any] = {"runs": runs, "agent_spans_metrics": counters, "ratios": {}}
    for c, path in ((c, p) for p in list(paths)[1:] for c in ("c1", "c8")):
        base = statistics.median(r["rps"] for r in runs["all-on"][c])
        with_spans = statistics.median(r["rps"] for r in runs[path][c])
        cpu_base = statistics.median(r["cpu_ms_per_request"] or 0.0 for r in runs["all-on"][c])
        cpu_spans = statistics.median(r["cpu_ms_per_request"] or 0.0 for r in runs[path][c])
        out["ratios"][f"{path} {c}"] = {
            "all-on_rps": base,
            "agent_spans_rps": with_spans,
            "ratio": with_spans / base,
            "all-on_cpu_ms_per_request": cpu_base,
            "agent_spans_cpu_ms_per_request": cpu_spans,
            # What a saturated brownout could serve with the spans, against without: its CPU per request, inverted.
            "capacity_ratio": cpu_base / cpu_spans if cpu_spans else None,
        }
    return out


_COUNTERS = (
    "brownout_agent_spans_received_total",
    "brownout_agent_joins_total",
    "brownout_agent_spans_evicted_total",
    "brownout_violations_total",
)


def memory(workdir: Path, duration_s: float) -> dict[str, Any]:
    upstream = start_upstream(workdir)
    receiver = free_port()
    limits = "max_spans: 4000\n  ttl_s: 3600"
    proc, metrics = _start(workdir, upstream, "memory", _config(workdir, "memory", receiver, limits, settle_s=3600))
    samples: list[tuple[float, float]] = []
    try:
        t0 = time.monotonic()
        import threading

        done = threading.Event()

        def sample() -> None:
            while not done.wait(1.0):
                rss = rss_mb(proc.popen.pid)
                if rss is not None:
                    samples.append((round(time.monotonic() - t0, 1), round(rss, 1)))

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        result, load = run_agents(proc.port, receiver, 8, duration_s, calls_per_trace=None)
        done.set()
        watcher.join()
        evicted = _metric(metrics, "brownout_agent_spans_evicted_total")
        received = _metric(metrics, "brownout_agent_spans_received_total")
    finally:
        proc.stop()
        upstream.stop()
    half = [rss for t, rss in samples if t >= duration_s / 2]
    growth = (max(half) - half[0]) if len(half) >= 2 else None
    return {
        "requests": result.requests,
        "spans_exported": load.exported,
        "rss_samples_mb": samples,
        "rss_growth_second_half_mb": growth,
        "evicted": evicted,
        "received": received,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 2 s, 10 s of memory")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rounds, duration_s, memory_s = (1, 2.0, 10.0) if args.quick else (3, 4.0, 30.0)
    with tempfile.TemporaryDirectory(prefix="brownout-bench-agentspans-") as tmp:
        tput = throughput(Path(tmp), rounds, duration_s)
        mem = memory(Path(tmp), memory_s)
    ok = all(r["ratio"] >= FLOOR and (r["capacity_ratio"] or 0) >= FLOOR for r in tput["ratios"].values())
    ok = ok and mem["rss_growth_second_half_mb"] is not None and mem["rss_growth_second_half_mb"] <= RSS_GROWTH_MB
    data = {"machine": describe("python (bench/agentload.py)"), "throughput": tput, "memory": mem, "targets_met": ok}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for c, r in tput["ratios"].items():
        print(
            f"{c}: all-on {r['all-on_rps']:.0f} req/s, with the spans {r['agent_spans_rps']:.0f} req/s: "
            f"{r['ratio']:.2f}x; brownout CPU per request {r['all-on_cpu_ms_per_request']:.3f} -> "
            f"{r['agent_spans_cpu_ms_per_request']:.3f} ms: capacity {r['capacity_ratio']:.2f}x (target >= {FLOOR:.2f}x)"
        )
    print("agent spans (all-on+agent-spans):", json.dumps(tput["agent_spans_metrics"]))
    print(
        f"memory, 8 traces that never end, {memory_s:.0f} s, {mem['requests']} calls, {mem['spans_exported']} spans: "
        f"RSS {mem['rss_samples_mb'][0][1] if mem['rss_samples_mb'] else '?'} -> "
        f"{mem['rss_samples_mb'][-1][1] if mem['rss_samples_mb'] else '?'} MB, second half +{mem['rss_growth_second_half_mb']} MB "
        f"(target <= {RSS_GROWTH_MB:.0f}); evicted {json.dumps(mem['evicted'])}"
    )
    print(f"results: {args.out}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
