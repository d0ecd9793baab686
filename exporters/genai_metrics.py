"""The GenAI semantic-convention metrics on /metrics, named and labelled as the instance's version says.

The names, units and attributes come from `brownout.core.semconv`; this module only makes the
Prometheus instruments and routes an exchange to them. With the pinned version (the default) the
series are the ones dashboards and alert rules have always read.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from brownout.core.exchange import Usage
from brownout.core.semconv import INFERENCE_OPERATIONS, Metric, Semconv
from brownout.exporters.metric_labels import GENAI_DURATION_BUCKETS, GENAI_TOKEN_BUCKETS

__all__ = ["SemconvMetrics"]

# Where each attribute's value sits in the tuple observe() builds: (operation, provider, model, tool, token kind,
# error type).
_POSITION = {
    "gen_ai.operation.name": 0,
    "gen_ai.provider.name": 1,
    "gen_ai.request.model": 2,
    "gen_ai.tool.name": 3,
    "gen_ai.token.type": 4,
    "gen_ai.token.modality": 4,
    "error.type": 5,
}
Values = tuple[str, str, str, str, str, str]
Child = Callable[..., Any]  # Metrics._child: (instrument, *label values) -> the cached labelled child


class _Instrument:
    """A Prometheus instrument and the label values it takes from a Values tuple."""

    def __init__(self, metric: Metric, registry: CollectorRegistry) -> None:
        self.counter = metric.instrument == "counter"
        doc = f"{metric.name} ({metric.unit}), OpenTelemetry GenAI semantic conventions."
        if self.counter:
            self.metric: Any = Counter(metric.prometheus, doc, metric.labels, registry=registry)
        else:
            buckets = GENAI_DURATION_BUCKETS if metric.unit == "s" else GENAI_TOKEN_BUCKETS
            self.metric = Histogram(metric.prometheus, doc, metric.labels, buckets=buckets, registry=registry)
        picked = itemgetter(*(_POSITION[a] for a in metric.attributes))
        self.labels: Callable[[Values], tuple[str, ...]] = (
            picked if len(metric.attributes) > 1 else lambda v: (picked(v),)
        )


class SemconvMetrics:
    """One instrument per metric of the version; `observe` sends an exchange's duration and tokens to theirs."""

    def __init__(self, semconv: Semconv, registry: CollectorRegistry, child: Child) -> None:
        self.semconv = semconv
        self._child = child
        self._by_name = {m.name: _Instrument(m, registry) for m in semconv.metrics.all()}
        names = semconv.metrics
        self._other_duration = self._get(names.operation_duration)
        self._durations = {op: self._get(names.inference_duration) for op in INFERENCE_OPERATIONS}
        self._durations["embeddings"] = self._get(names.embeddings_duration)
        self._durations["execute_tool"] = self._get(names.tool_duration)

    def _get(self, metric: Metric | None) -> _Instrument | None:
        return None if metric is None else self._by_name[metric.name]

    def _record(self, instrument: _Instrument | None, values: Values, amount: float) -> None:
        if instrument is None:
            return
        child = self._child(instrument.metric, *instrument.labels(values))
        if instrument.counter:
            child.inc(amount)
        else:
            child.observe(amount)

    def observe(
        self, op: str, provider: str, model: str, tool: str, duration: float | None, usage: Usage, error: str = ""
    ) -> None:
        """One GenAI exchange: `op` is its gen_ai.operation.name, the others bounded label values; `error` its
        error.type (bounded; '' when it succeeded, which Prometheus reads as no label)."""
        if duration is not None:
            timed: Values = (op, provider, model, tool, "", error)
            self._record(self._durations.get(op, self._other_duration), timed, duration)
        names = self.semconv.metrics
        if names.token_usage is not None:
            for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                if count is not None:
                    self._record(self._get(names.token_usage), (op, provider, model, tool, kind, ""), count)
            return
        values: Values = (op, provider, model, tool, self.semconv.token_modality or "", "")
        if op == "embeddings":
            if usage.input_tokens is not None:
                self._record(self._get(names.embeddings_input_tokens), values, usage.input_tokens)
            return
        if usage.input_tokens is not None:
            self._record(self._get(names.input_tokens), values, usage.input_tokens)
            self._record(self._get(names.operation_input_tokens), values, usage.input_tokens)
        if usage.output_tokens is not None:
            self._record(self._get(names.output_tokens), values, usage.output_tokens)
            self._record(self._get(names.operation_output_tokens), values, usage.output_tokens)
        if usage.cache_read_tokens:
            self._record(self._get(names.cache_read_input_tokens), values, usage.cache_read_tokens)
        if usage.cache_write_tokens:
            self._record(self._get(names.cache_write_input_tokens), values, usage.cache_write_tokens)
