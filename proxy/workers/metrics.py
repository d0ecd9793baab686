"""One /metrics for a fleet of workers: the supervisor scrapes each worker's own /metrics and adds them up.

Why not prometheus_client's multiprocess mode: it drops custom collectors from the aggregate
(brownout's scrape-time gauges: sessions, rules, client connections, and the Info metric), keeps
no exemplars (the trace id on a violation, which lets Grafana jump to its trace), must be set up
before prometheus_client is imported (PROMETHEUS_MULTIPROC_DIR), and leaves a directory of mmap
files to clean. An aggregating endpoint reuses each worker's /metrics exactly as one process
serves it, so nothing about brownout's metrics changes with the number of workers.

How series combine (by family type):
- counters and histograms: the sum over workers, per label set (buckets, `_sum`, `_count`), so
  `rate()` and `histogram_quantile()` read the fleet. A counter's exemplar comes from one worker.
- gauges that add up across processes (client connections open and waiting): the sum.
- every other gauge (sessions active, rule active, anything added later) and every other type: one
  series per worker with a `worker` label (a session can be open in two workers at once; a rule is
  active or not in each), since a sum would be wrong and a label is never wrong.
- the Info metric (`brownout_build_info`): once, every worker runs the same build.

Counters never go down. A worker that did not answer a scrape counts with its last answer. A
worker that exits (a crash, then a restart) leaves its last scraped counters and histograms in a
retired total that every later sum includes: its replacement starts from zero, the sum does not
drop, and Prometheus sees no counter reset. What a crashed worker counted after its last scrape
is lost (it died with the process).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from brownout.proxy.workers.supervisor import WorkerState

__all__ = ["ADDITIVE_GAUGES", "FleetMetrics", "combine"]

log = logging.getLogger(__name__)

ADDITIVE_GAUGES = frozenset({"brownout_client_connections", "brownout_client_connections_waiting"})
_SUMMED_TYPES = frozenset({"counter", "histogram"})
_ACCEPT = "application/openmetrics-text; version=1.0.0; charset=utf-8"

Families = list[Metric]


def _rule(family: Metric) -> str:
    if family.type in _SUMMED_TYPES or (family.type == "gauge" and family.name in ADDITIVE_GAUGES):
        return "sum"
    return "once" if family.type == "info" else "per_worker"


def combine(parts: Sequence[tuple[str, Families]]) -> Families:
    """The families of every (worker label, families) part, combined by the rules above, in first-seen order."""
    out: dict[str, Metric] = {}
    sums: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], list[Any]]] = {}
    for worker, families in parts:
        for family in families:
            rule = _rule(family)
            target = out.get(family.name)
            if target is None:
                target = out[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
                sums[family.name] = {}
            elif rule == "once":
                continue
            acc = sums[family.name]
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue  # a start time: neither summed nor per worker (brownout's workers send none)
                if rule == "per_worker":
                    target.add_sample(s.name, {**s.labels, "worker": worker}, s.value, s.timestamp, s.exemplar)
                    continue
                key = (s.name, tuple(sorted(s.labels.items())))
                slot = acc.get(key)
                if slot is None:
                    acc[key] = [s.name, s.labels, s.value, s.exemplar]
                else:
                    slot[2] += s.value
                    slot[3] = slot[3] or s.exemplar
    for name, acc in sums.items():
        for sample_name, labels, value, exemplar in acc.values():
            out[name].add_sample(sample_name, labels, value, None, exemplar)
    return list(out.values())


def _summed_only(families: Families) -> Families:
    return [f for f in families if _rule(f) == "sum"]


def _pid(worker: WorkerState) -> int:
    return worker.pid if worker.pid is not None else -1


class FleetMetrics(Collector):
    """The prometheus_client collector behind the supervisor's /metrics (see the module docstring)."""

    def __init__(
        self, workers: Callable[[], Sequence[WorkerState]], *, timeout_s: float = 2.0, max_workers: int = 8
    ) -> None:
        self.workers = workers
        self._http = httpx.Client(timeout=timeout_s, trust_env=False, headers={"Accept": _ACCEPT})
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="brownout-scrape")
        self._lock = threading.Lock()  # one scrape at a time: an older answer never replaces a newer one
        self._last: dict[int, Families] = {}  # pid -> its last answer
        self._retired: Families = []  # counters and histograms of workers that have exited
        self.scrape_errors = 0

    def describe(self) -> Iterable[Metric]:
        return []  # names vary with the workers' own; registering must not scrape them

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            live = [w for w in self.workers() if w.alive and w.metrics_url]
            for worker, families in zip(live, self._pool.map(self._scrape, live), strict=True):
                self._keep(worker, families)
            parts = [(str(w.index), self._last.get(_pid(w), [])) for w in live]
            parts.append(("retired", self._retired))
            combined = combine(parts)
            states = self.workers()
        yield from combined
        yield GaugeMetricFamily("brownout_workers", "Worker processes serving.", value=sum(s.alive for s in states))
        yield CounterMetricFamily(
            "brownout_worker_restarts", "Workers restarted after dying.", value=sum(s.restarts for s in states)
        )
        yield CounterMetricFamily(
            "brownout_worker_scrape_errors",
            "Scrapes of a worker's /metrics that failed (its last answer was used).",
            value=self.scrape_errors,
        )

    def _scrape(self, worker: WorkerState) -> Families | None:
        assert worker.metrics_url is not None
        try:
            response = self._http.get(worker.metrics_url)
            response.raise_for_status()
            return list(text_string_to_metric_families(response.text))
        except (httpx.HTTPError, ValueError) as e:
            log.warning("worker %d's /metrics did not answer (%s): its last answer is used", worker.index, e)
            return None

    def _keep(self, worker: WorkerState, families: Families | None) -> None:
        """Under the lock: a worker's answer becomes its last one; no answer is counted."""
        if families is None:
            self.scrape_errors += 1
        else:
            self._last[_pid(worker)] = families

    def exchanges_now(self, worker: WorkerState) -> int | None:
        """The exchanges `worker` has served, scraped now; None when it does not answer (or has no /metrics)."""
        if not worker.metrics_url:
            return None
        with self._lock:
            families = self._scrape(worker)
            self._keep(worker, families)
        if families is None:
            return None
        return int(sum(s.value for f in families if f.name == "brownout_requests" for s in f.samples))

    def retire(self, pid: int) -> None:
        """Worker `pid` has exited: keep its counters and histograms in every later sum."""
        with self._lock:
            gone = self._last.pop(pid, None)
            if gone:
                self._retired = _summed_only(combine([("", self._retired), ("", gone)]))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
