"""Metrics of the agent's own spans: received, evicted, joined to the wire, and forwarded to a collector.

Labels are bounded: the source is "receiver" or "proxy" (an export intercepted on its way), the eviction
reason one of the span store's, the join how a wire call found its agent span (or "none"), the signal
one of OTLP's three and the outcome "ok", "failed" or "dropped".
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["AgentSpanMetrics"]

_LABELS = {
    "received": frozenset({"receiver", "proxy"}),
    "evicted": frozenset({"ttl", "max_traces", "max_spans"}),
    "joins": frozenset({"trace_context", "time", "none"}),
}
_SIGNALS = frozenset({"traces", "metrics", "logs"})
_OUTCOMES = frozenset({"ok", "failed", "dropped"})


class AgentSpanMetrics:
    """brownout_agent_spans_*_total, brownout_agent_joins_total and brownout_otlp_forwarded_total."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.received = Counter(
            "brownout_agent_spans_received",
            "The agent's own spans received, by source (receiver: brownout's OTLP receiver; proxy: an OTLP "
            "export intercepted on its way to a collector).",
            ["source"],
            registry=registry,
        )
        self.evicted = Counter(
            "brownout_agent_spans_evicted",
            "Agent spans and wire calls dropped from the join's bounded memory, by reason (ttl, max_traces, "
            "max_spans).",
            ["reason"],
            registry=registry,
        )
        self.joins = Counter(
            "brownout_agent_joins",
            "LLM and tool calls on the wire by how their agent span was found (trace_context, time; none: not "
            "found within agent_spans.join_wait_s).",
            ["how"],
            registry=registry,
        )
        self.forwarded = Counter(
            "brownout_otlp_forwarded",
            "OTLP export requests the receiver forwarded to exporters.otlp's endpoint, by signal and outcome "
            "(failed: the collector refused or was unreachable; dropped: too many in flight).",
            ["signal", "outcome"],
            registry=registry,
        )
        self._counters = {"received": self.received, "evicted": self.evicted, "joins": self.joins}
        for what, labels in _LABELS.items():
            for label in labels:
                self._counters[what].labels(label)
        for signal in _SIGNALS:
            for outcome in _OUTCOMES:
                self.forwarded.labels(signal, outcome)

    def count(self, what: str, label: str, n: int = 1) -> None:
        """Add `n` to counter `what` ("received", "evicted" or "joins") under a label it knows."""
        if n and label in _LABELS[what]:
            self._counters[what].labels(label).inc(n)

    def forward(self, signal: str, outcome: str) -> None:
        if signal in _SIGNALS and outcome in _OUTCOMES:
            self.forwarded.labels(signal, outcome).inc()
