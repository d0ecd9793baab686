"""brownout's metrics exposed without `_created` series, on brownout's own registry only.

prometheus_client writes a `_created` series beside every counter, histogram and summary (twice
the series, and nobody graphs them). Its switch, `disable_created_metrics()`, is process-wide: an
application or test suite that embeds brownout would lose its own `_created` series too. So
brownout's metrics live on a private registry, and the registry it exposes holds this one
collector, which hands them on with those series left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

__all__ = ["WithoutCreated"]

_WITH_CREATED = frozenset({"counter", "histogram", "summary"})


class WithoutCreated:
    """A collector yielding what `registry` collects, minus the `_created` series."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def describe(self) -> Iterable[Metric]:
        # The names the exposing registry checks for clashes: what the private one holds.
        return list(self._registry.collect())

    def collect(self) -> Iterable[Metric]:
        for metric in self._registry.collect():
            if metric.type in _WITH_CREATED:
                created = metric.name + "_created"
                metric.samples = [s for s in metric.samples if s.name != created]
            yield metric
