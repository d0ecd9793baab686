"""Metrics of WebSocket sessions: realtime sessions, their generations, time to first delta, close codes.

Generations are exchanges, so they also count in brownout_requests_total and the GenAI histograms
(operation realtime_inference); these add what only a session has. Labels are bounded: the provider
is one of the config's wire formats ("http" for WebSockets no format recognised), the close code one
of the RFC 6455 codes a provider uses (else "other"), the generation status one of the provider
statuses.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from brownout.core.exchange import Exchange
from brownout.exporters.metric_labels import DURATION_BUCKETS, TTFC_BUCKETS

__all__ = ["CLOSE_CODES", "GENERATION_STATUSES", "RealtimeMetrics"]

CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1011, 1012, 1013, 1014})
# A generation's end as the client saw it: the provider's status, or `cut` when none arrived.
GENERATION_STATUSES = frozenset({"completed", "cancelled", "incomplete", "failed", "cut"})
SESSION_DURATION_BUCKETS = (*DURATION_BUCKETS, 900, 1800, 3600, 7200)


class RealtimeMetrics:
    """brownout_websocket_sessions*, brownout_realtime_generations_total and the time to first delta."""

    def __init__(self, registry: CollectorRegistry, providers: frozenset[str]) -> None:
        self._providers = providers
        self.sessions = Counter(
            "brownout_websocket_sessions",
            "WebSocket sessions opened through brownout, by wire format (http: one no format recognised).",
            ["provider"],
            registry=registry,
        )
        self.active = Gauge(
            "brownout_websocket_sessions_active", "WebSocket sessions open now.", ["provider"], registry=registry
        )
        self.closes = Counter(
            "brownout_websocket_closes",
            "WebSocket sessions ended, by close code as the client saw it (1006: the connection dropped).",
            ["provider", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "brownout_websocket_session_duration_seconds",
            "How long WebSocket sessions lasted.",
            ["provider"],
            buckets=SESSION_DURATION_BUCKETS,
            registry=registry,
        )
        self.generations = Counter(
            "brownout_realtime_generations",
            "Server-side generations of realtime sessions, by how they ended (cut: no terminal event arrived).",
            ["provider", "status"],
            registry=registry,
        )
        self.first_delta = Histogram(
            "brownout_realtime_time_to_first_delta_seconds",
            "From the client's request for a generation (or its start) to its first output delta.",
            ["provider"],
            buckets=TTFC_BUCKETS,
            registry=registry,
        )
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _provider(self, provider: str) -> str:
        return provider if provider in self._providers else "other"

    def started(self, provider: str) -> None:
        p = self._provider(provider)
        self._child(self.sessions, p).inc()
        self._child(self.active, p).inc()

    def ended(self, provider: str, code: int | None, duration_s: float | None) -> None:
        p = self._provider(provider)
        self._child(self.active, p).dec()
        label = str(code) if code in CLOSE_CODES else ("none" if code is None else "other")
        self._child(self.closes, p, label).inc()
        if duration_s is not None:
            self._child(self.duration, p).observe(max(0.0, duration_s))

    def generation(self, exchange: Exchange) -> None:
        info = exchange.realtime
        if info is None or info.kind != "generation":
            return
        p = self._provider(exchange.provider)
        status = info.status if info.status in GENERATION_STATUSES else ("cut" if info.status is None else "other")
        self._child(self.generations, p, status).inc()
        ttfc = exchange.timings.ttfc_s
        if ttfc is not None:
            self._child(self.first_delta, p).observe(ttfc)
