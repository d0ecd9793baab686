"""Soak-run bookkeeping: samples of a brownout process (RSS, fds, asyncio tasks) and the verdict.

The verdict is the reliability promise: zero unexpected client errors, RSS growth under a bound
after warm-up, and no growth in open file descriptors or asyncio tasks.

A leak is told from a descriptor that closes a moment later in two ways. Idle counts (before the
traffic and after it) are taken once the process's fds have settled, stopped changing for a while:
a connection the client just closed is gone by then, a leaked one never goes, so the idle before
and after may differ by `idle_slack` at most. Under load the count also holds the connections in
flight at the sampling instant: each of the client's keep-alive connections (and the upstream one
it leads to) may be opened during the run, so growth there is allowed up to two per connection
plus `fd_growth`, which a leak per request soon passes.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.procstat import cpu_seconds, open_fds, rss_mb

__all__ = [
    "Limits",
    "Sample",
    "Tally",
    "Verdict",
    "judge",
    "sample_process",
    "samples_table",
    "settle_fds",
    "to_json",
]

log = logging.getLogger(__name__)


@dataclass
class Tally:
    """Client-side outcome counts; `unexpected` are errors no configured fault explains."""

    sent: int = 0
    ok: int = 0
    faulted: int = 0  # the response carried x-brownout-fault: whatever happened was ordered
    unexpected: int = 0
    examples: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.unexpected += 1
        if len(self.examples) < 10:
            self.examples.append(why)


@dataclass
class Sample:
    """One look at the brownout process."""

    t_s: float
    rss_mb: float
    fds: int
    tasks: int | None
    in_flight: int | None
    sent: int
    unexpected: int
    cpu_s: float = 0.0  # the process's user + system CPU so far: busy share = delta / wall time
    idle: bool = False  # taken with no traffic (before the run, and after it has settled)


@dataclass
class Limits:
    """What counts as growth; defaults are the README's promise for a 10-minute run."""

    rss_growth_mb: float = 30.0
    # Under load, on top of two fds per client connection (its own and its upstream's): slack for
    # connections being opened or closed at the sampling instant.
    fd_growth: int = 10
    task_growth: int = 50  # same: tasks per connection in flight at the sampling instant
    warmup_s: float = 30.0
    idle_slack: int = 2  # idle before vs idle after (both settled): every connection and task should be gone
    settle_quiet_s: float = 1.0  # idle fds count once unchanged this long...
    settle_timeout_s: float = 15.0  # ...or after this long, whatever they are then


@dataclass
class Verdict:
    """The soak run's figures and failures (empty: the promise holds)."""

    figures: dict[str, Any]
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures


def _control_status(control_url: str, token: str) -> dict[str, Any]:
    req = urllib.request.Request(f"{control_url}/status", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return dict(json.loads(resp.read()))
    except (OSError, ValueError) as e:
        log.warning("control /status failed: %s", e)
        return {}


def settle_fds(
    pid: int,
    *,
    quiet_s: float = 1.0,
    timeout_s: float = 15.0,
    interval_s: float = 0.1,
    count: Callable[[int], int | None] = open_fds,
) -> int | None:
    """The process's open fds once they stopped changing for `quiet_s` (a connection closing a moment
    late is gone then; a leaked one stays); after `timeout_s`, the count at that moment."""
    deadline = time.monotonic() + timeout_s
    last = count(pid)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        now = count(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def sample_process(pid: int, control_url: str, token: str, t_s: float, tally: Tally, *, idle: bool = False) -> Sample:
    """RSS, fds and CPU time from /proc, task and in-flight counts from the control API.

    The fds are counted before the control API is asked: its answer's connection may still be
    closing on the proxy's side for a moment after the client has read it."""
    fds = open_fds(pid) or 0
    status = _control_status(control_url, token)
    return Sample(
        t_s=round(t_s, 1),
        rss_mb=round(rss_mb(pid) or float("nan"), 1),
        fds=fds,
        tasks=status.get("tasks"),
        in_flight=status.get("in_flight"),
        sent=tally.sent,
        unexpected=tally.unexpected,
        cpu_s=round(cpu_seconds(pid) or 0.0, 2),
        idle=idle,
    )


def _settled(samples: list[Sample], warmup_s: float) -> list[Sample]:
    after = [s for s in samples if s.t_s >= warmup_s]
    return after if len(after) >= 2 else samples[-2:]


def _growth(values: list[float]) -> float:
    """Growth from the start to the end of the window, each end a median of three (one spike is no trend)."""
    k = min(3, max(1, len(values) // 3))
    return statistics.median(values[-k:]) - statistics.median(values[:k])


def judge(samples: list[Sample], tally: Tally, limits: Limits, duration_s: float, *, concurrency: int = 0) -> Verdict:
    """Figures and failures of a soak run: growth under load after warm-up, and idle end vs idle start
    (idle samples taken once the fds settled, see settle_fds); `concurrency`: the client's connections."""
    load = [s for s in samples if not s.idle]
    idle = [s for s in samples if s.idle]
    if len(load) < 2 or len(idle) < 2:
        return Verdict({"samples": len(samples)}, ["too few samples: the proxy died or the run was too short"])
    first, last = idle[0], idle[-1]
    window = _settled(load, limits.warmup_s)
    # RSS: what the run added after warm-up, measured under load and again once idle (Python
    # rarely returns memory, so the idle figure is an honest upper bound on retention).
    base_rss = statistics.median([s.rss_mb for s in window[:3]])
    rss = max(_growth([s.rss_mb for s in window]), last.rss_mb - base_rss)
    fds_load = _growth([float(s.fds) for s in window])
    task_values = [float(s.tasks) for s in window if s.tasks is not None]
    tasks_load = _growth(task_values) if len(task_values) >= 2 else float("nan")
    busy = (load[-1].cpu_s - load[0].cpu_s) / max(load[-1].t_s - load[0].t_s, 1e-9)

    def series(name: str) -> dict[str, Any]:
        values = [getattr(s, name) for s in load if getattr(s, name) is not None]
        return {
            "idle_start": getattr(first, name),
            "after_warmup": getattr(window[0], name),
            "max_under_load": max(values) if values else None,
            "idle_end": getattr(last, name),
        }

    figures: dict[str, Any] = {
        "duration_s": round(duration_s, 1),
        "requests": tally.sent,
        "rate_rps": round(tally.sent / duration_s, 1) if duration_s else 0.0,
        "ok": tally.ok,
        "faulted": tally.faulted,
        "fault_share": round(tally.faulted / tally.sent, 3) if tally.sent else 0.0,
        "unexpected_errors": tally.unexpected,
        "brownout_cpu_share": round(busy, 2),  # 1.0 = one core saturated: brownout is single-threaded
        "rss_mb": {**series("rss_mb"), "growth_after_warmup": round(rss, 1)},
        "fds": {**series("fds"), "growth_under_load": fds_load},
        "tasks": {**series("tasks"), "growth_under_load": tasks_load},
        "samples": len(samples),
    }
    failures: list[str] = []
    if tally.unexpected:
        failures.append(f"{tally.unexpected} unexpected client errors, e.g. {tally.examples[:3]}")
    if rss >= limits.rss_growth_mb:
        failures.append(f"RSS grew {rss:.1f} MB after warm-up (limit {limits.rss_growth_mb} MB)")
    fds_allowed = limits.fd_growth + 2 * concurrency
    figures["fds"]["allowed_under_load"] = fds_allowed
    if fds_load > fds_allowed or last.fds - first.fds > limits.idle_slack:
        failures.append(
            f"open fds grew: {fds_load:g} under load (allowed {fds_allowed}), idle {first.fds} -> {last.fds} "
            f"(allowed +{limits.idle_slack})"
        )
    if first.tasks is None or last.tasks is None or not task_values:
        failures.append("no task counts: the control API did not answer /status")
    elif tasks_load > limits.task_growth or last.tasks - first.tasks > limits.idle_slack:
        failures.append(f"asyncio tasks grew: {tasks_load:g} under load, idle {first.tasks} -> {last.tasks}")
    return Verdict(figures, failures)


def samples_table(samples: list[Sample]) -> str:
    lines = [f"{'t_s':>7} {'rss_mb':>7} {'fds':>5} {'tasks':>6} {'inflt':>5} {'cpu_s':>8} {'sent':>8} {'unexp':>5}"]
    for s in samples:
        lines.append(
            f"{s.t_s:7.1f} {s.rss_mb:7.1f} {s.fds:5d} {s.tasks if s.tasks is not None else '-':>6} "
            f"{s.in_flight if s.in_flight is not None else '-':>5} {s.cpu_s:8.1f} {s.sent:8d} "
            f"{s.unexpected:5d}{'  idle' if s.idle else ''}"
        )
    return "\n".join(lines)


def to_json(verdict: Verdict, samples: list[Sample]) -> str:
    return json.dumps(
        {"figures": verdict.figures, "failures": verdict.failures, "samples": [asdict(s) for s in samples]}, indent=2
    )
