"""Gauges read at scrape time from a callback: sessions, rules, client connections."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["GaugeSource"]

log = logging.getLogger(__name__)


class GaugeSource(Collector):
    """Gauges read at scrape time from a callback (see Metrics.watch); 0 / no series without one."""

    def __init__(
        self, name: str, doc: str, label: str | None, *, on_error: Callable[[str, Exception], None] | None = None
    ) -> None:
        self.name, self.doc, self.label = name, doc, label
        self.source: Callable[[], Any] | None = None
        self.on_error = on_error  # called with the gauge's name and the exception, from the except block

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.name, self.doc, labels=[self.label] if self.label else None)]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        values: Mapping[str, float] = {}
        if self.source is not None:
            try:
                got = self.source()
                values = {k: float(v) for k, v in got.items()} if self.label else {"": float(got)}
            except Exception as e:  # a scrape must not fail because a source failed: the gauge reads 0 / no series
                if self.on_error is not None:
                    self.on_error(self.name, e)
                else:
                    log.debug("gauge source %s failed", self.name, exc_info=True)
        if self.label is None:
            yield GaugeMetricFamily(self.name, self.doc, value=values.get("", 0.0))
            return
        family = GaugeMetricFamily(self.name, self.doc, labels=[self.label])
        for key, value in sorted(values.items()):
            family.add_metric([key], value)
        yield family
