"""The supervisor's /metrics (proxy/workers/metrics.py): real brownout Metrics served over HTTP, scraped and added up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from brownout.exporters.metrics import Metrics
from brownout.proxy.workers.metrics import FleetMetrics
from brownout.proxy.workers.supervisor import WorkerState

REQUEST = ("openai", "chat", "none", "2xx")


class _Worker:
    """One worker's real Metrics on a real /metrics server."""

    def __init__(self, index: int, pid: int) -> None:
        self.metrics = Metrics()
        self.server = self.metrics.serve("127.0.0.1:0")
        self.state = WorkerState(index, pid, True, 0, f"http://127.0.0.1:{self.server.server_port}/metrics")

    def serve_traffic(self, requests: int, connections: int, sessions: int) -> None:
        self.metrics.requests.labels(*REQUEST).inc(requests)
        for _ in range(requests):
            self.metrics.duration.labels("openai", "chat", "none").observe(0.3)
        self.metrics.watch(client_connections=lambda: connections, sessions=lambda: sessions)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fleet() -> Iterator[tuple[list[_Worker], FleetMetrics, CollectorRegistry]]:
    workers = [_Worker(0, 1000), _Worker(1, 1001)]
    collector = FleetMetrics(lambda: [w.state for w in workers], timeout_s=1.0)
    registry = CollectorRegistry()
    registry.register(collector)
    yield workers, collector, registry
    for w in workers:
        w.stop()
    collector.close()


def _value(registry: CollectorRegistry, name: str, **labels: str) -> Any:
    return registry.get_sample_value(name, labels)


def test_counters_and_histograms_are_the_sum_gauges_by_their_kind(fleet: Any) -> None:
    (w0, w1), _, registry = fleet
    w0.serve_traffic(requests=7, connections=2, sessions=3)
    w1.serve_traffic(requests=5, connections=1, sessions=3)
    labels = dict(zip(("provider", "operation", "tool", "status_class"), REQUEST, strict=True))
    assert _value(registry, "brownout_requests_total", **labels) == 12
    hist = {"provider": "openai", "operation": "chat", "tool": "none"}
    assert _value(registry, "brownout_request_duration_seconds_count", **hist) == 12
    assert _value(registry, "brownout_request_duration_seconds_bucket", **hist, le="0.5") == 12
    assert _value(registry, "brownout_request_duration_seconds_sum", **hist) == pytest.approx(3.6)
    assert _value(registry, "brownout_client_connections") == 3  # connections add up
    # A session can be open in both workers: per worker, never a sum that counts it twice.
    assert _value(registry, "brownout_sessions_active") is None
    assert _value(registry, "brownout_sessions_active", worker="0") == 3
    assert _value(registry, "brownout_sessions_active", worker="1") == 3
    builds = [s for s in registry.collect() if s.name == "brownout_build" for s in s.samples]
    assert len(builds) == 1  # one build, said once
    assert _value(registry, "brownout_workers") == 2


def test_an_exemplar_survives_the_sum(fleet: Any) -> None:
    (w0, w1), _, registry = fleet

    class Violation:
        invariant, severity, trace_id = "call_budget", "error", "4bf92f3577b34da6a3ce929d0e0e4736"

    w1.metrics.observe_violation(Violation())
    w0.metrics.observe_violation(Violation())
    families = {f.name: f for f in text_string_to_metric_families(openmetrics(registry).decode())}
    [sample] = [s for s in families["brownout_violations"].samples if s.name == "brownout_violations_total"]
    assert sample.value == 2 and sample.exemplar is not None
    assert sample.exemplar.labels == {"trace_id": Violation.trace_id}


def test_counts_never_go_down_when_a_worker_fails_a_scrape_or_dies(fleet: Any) -> None:
    workers, collector, registry = fleet
    w0, w1 = workers
    w0.serve_traffic(requests=7, connections=0, sessions=0)
    w1.serve_traffic(requests=5, connections=0, sessions=0)
    labels = dict(zip(("provider", "operation", "tool", "status_class"), REQUEST, strict=True))
    assert _value(registry, "brownout_requests_total", **labels) == 12
    w1.stop()  # alive as far as the supervisor knows, but not answering: its last answer counts
    scrape = {(s.name, frozenset(s.labels.items())): s.value for m in registry.collect() for s in m.samples}
    assert scrape[("brownout_requests_total", frozenset(labels.items()))] == 12
    assert scrape[("brownout_worker_scrape_errors_total", frozenset())] == 1
    # It died, and a fresh process took its place: its last counts stay in the sum, the new one adds on.
    w1.state = WorkerState(1, 1001, False)
    collector.retire(1001)
    replacement = _Worker(1, 2002)
    workers[1] = replacement
    replacement.serve_traffic(requests=2, connections=0, sessions=0)
    assert _value(registry, "brownout_requests_total", **labels) == 14
    hist = {"provider": "openai", "operation": "chat", "tool": "none"}
    assert _value(registry, "brownout_request_duration_seconds_count", **hist) == 14
    assert collector.exchanges_now(replacement.state) == 2
