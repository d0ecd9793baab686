"""Metrics of the shared state store (a fleet on Redis): failed calls, reachability, the roll call.

With the memory backend none of the gauges has a series: a single process has no store to be down,
so `BrownoutStateStoreDown` can never fire for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["MAX_STATE_OPS", "StateMetrics"]

log = logging.getLogger(__name__)

# Operations are named in code (schedule, release, switches, ...): a cap keeps the label bounded all the same.
MAX_STATE_OPS = 32


class _OptionalGauge(Collector):
    """A gauge read at scrape time; no series while it has no source or the source answers None."""

    def __init__(self, name: str, doc: str, on_error: Callable[[str, Exception], None]) -> None:
        self.name, self.doc = name, doc
        self.source: Callable[[], float | bool | None] | None = None
        self.on_error = on_error

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.doc)]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        if self.source is None:
            return
        try:
            value = self.source()
        except Exception as e:  # noqa: BLE001 - a scrape must not fail because a source failed
            self.on_error(self.name, e)
            return
        if value is not None:
            yield GaugeMetricFamily(self.name, self.doc, value=float(value))


class StateMetrics:
    """brownout_state_errors_total{op}, brownout_state_store_up, brownout_state_config_mismatch,
    brownout_state_replicas; one per Metrics registry."""

    def __init__(self, registry: CollectorRegistry, *, on_error: Callable[[str, Exception], None]) -> None:
        self.errors = Counter(
            "brownout_state_errors",
            "Calls to the shared state store that failed or outlasted their budget (traffic went on with the "
            "documented fallback), by operation.",
            ["op"],
            registry=registry,
        )
        self.up = _OptionalGauge(
            "brownout_state_store_up", "1 when the shared state store answers, 0 while it is away.", on_error
        )
        self.config_mismatch = _OptionalGauge(
            "brownout_state_config_mismatch",
            "Other config hashes among the live replicas sharing this store's prefix (0: one config).",
            on_error,
        )
        self.replicas = _OptionalGauge(
            "brownout_state_replicas", "Live replicas in the fleet's roll call, this one included.", on_error
        )
        for gauge in (self.up, self.config_mismatch, self.replicas):
            registry.register(gauge)
        self._ops: set[str] = set()
        self._lock = threading.Lock()

    def error(self, op: str) -> None:
        if op not in self._ops:
            with self._lock:
                if len(self._ops) < MAX_STATE_OPS and len(op) <= 32:
                    self._ops.add(op)
                else:
                    op = "other"
        self.errors.labels(op).inc()

    def watch(
        self,
        *,
        up: Callable[[], bool | None] | None = None,
        config_mismatch: Callable[[], int] | None = None,
        replicas: Callable[[], int] | None = None,
    ) -> None:
        if up is not None:
            self.up.source = up
        if config_mismatch is not None:
            self.config_mismatch.source = config_mismatch
        if replicas is not None:
            self.replicas.source = replicas
