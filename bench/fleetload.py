"""One load run of bench/fleet.py: throughput and latency, and the CPU seconds each process spent on it.

The load is `GET /ping` on keep-alive connections, as in bench/run.py; with `sessions`, each request
names one of that many sessions (`x-brownout-session`, in turn), so per-session state is spread as a
fleet of agents spreads it (wrk only: the Python generator repeats one request, so one session).
CPU: each named process's user + system time over the run (/proc), and the load generator's own
(wrk is a child this process waits for; the Python generator runs in this process).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any

from bench.load import LoadResult, Request, parse_wrk, run_load, wrk_command
from bench.procstat import children, cpu_seconds

__all__ = ["LOAD", "Run", "children", "measure", "median_runs", "session_script"]

LOAD = "load generator"
SESSION_HEADER = "x-brownout-session"


def session_script(sessions: int) -> str:
    """A wrk Lua script: GET, each request in the next of `sessions` sessions (per wrk thread)."""
    return (
        "local n = 0\n"
        "request = function()\n"
        "  n = n + 1\n"
        f'  return wrk.format(nil, nil, {{["{SESSION_HEADER}"] = "bench-" .. (n % {sessions})}})\n'
        "end\n"
    )


@dataclass
class Run:
    """One load run: its result and the CPU seconds per 1,000 requests of each process."""

    load: LoadResult
    cpu_s: dict[str, float | None] = field(default_factory=dict)

    def cpu_per_1k(self) -> dict[str, float | None]:
        n = self.load.requests
        return {k: None if v is None or not n else round(v * 1000 / n, 4) for k, v in self.cpu_s.items()}


def _generator_cpu(use_wrk: bool) -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if use_wrk else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wrk(port: int, connections: int, duration_s: float, sessions: int) -> LoadResult:
    fd, script = tempfile.mkstemp(prefix="brownout-fleet-", suffix=".lua")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(session_script(sessions))
    cmd = wrk_command(f"http://127.0.0.1:{port}/ping", connections, duration_s, script)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 31, check=True)
    finally:
        os.unlink(script)
    return parse_wrk(out.stdout, connections, duration_s)


def measure(
    port: int, connections: int, duration_s: float, use_wrk: bool, pids: dict[str, int], sessions: int = 0
) -> Run:
    """Load `port` and account each process in `pids` (and the load generator) for the run's CPU time."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    gen0 = _generator_cpu(use_wrk)
    if use_wrk and sessions:
        result = _wrk(port, connections, duration_s, sessions)
    else:
        request = Request(headers=((SESSION_HEADER, "bench-0"),)) if sessions else None
        result = run_load(port, "/ping", connections, duration_s, use_wrk=use_wrk, request=request)
    gen = _generator_cpu(use_wrk) - gen0
    cpu: dict[str, float | None] = {}
    for name, pid in pids.items():
        end, start = cpu_seconds(pid), before[name]
        cpu[name] = None if end is None or start is None else round(end - start, 3)
    cpu[LOAD] = round(gen, 3)
    return Run(result, cpu)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return None if not known else round(statistics.median(known), 4)


def median_runs(runs: list[Run]) -> dict[str, Any]:
    """Each figure's median over the rounds (and every round's value of the main ones: the spread)."""
    loads = [r.load for r in runs]
    per_1k = [r.cpu_per_1k() for r in runs]
    names = list(per_1k[0]) if per_1k else []
    return {
        "rps": _median([x.rps for x in loads]),
        "p50_ms": _median([x.p50_ms for x in loads]),
        "p99_ms": _median([x.p99_ms for x in loads]),
        "requests": sum(x.requests for x in loads),
        "errors": sum(x.errors for x in loads),
        "cpu_s_per_1k": {n: _median([c[n] for c in per_1k]) for n in names},
        "rounds": {
            "rps": [round(x.rps, 1) for x in loads],
            "p50_ms": [round(x.p50_ms, 3) for x in loads],
            "p99_ms": [round(x.p99_ms, 3) for x in loads],
        },
    }
