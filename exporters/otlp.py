"""OTLP trace export: a TracerProvider whose lost spans are counted and whose shutdown is bounded.

An unreachable collector must cost brownout nothing but a counter: spans are batched on a
worker thread (exporters/batch.py), the queue is bounded (overflow is counted), failed exports
are counted, and shutdown gives up after a few seconds instead of the SDK's 30 s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from brownout.exporters.batch import BoundedBatchProcessor
from brownout.exporters.config import OtlpSettings
from brownout.exporters.otlp_http import DirectHttpSpanExporter
from brownout.exporters.otlp_wire import EncodedSpan, encode_span

__all__ = ["CountingSpanExporter", "OtlpTracing", "make_span_exporter"]

log = logging.getLogger(__name__)

DropCounter = Callable[[int], None]


class CountingSpanExporter(SpanExporter):
    """Wraps an exporter: a failed or raising export counts its spans as dropped."""

    def __init__(self, inner: SpanExporter, on_dropped: DropCounter) -> None:
        self.inner = inner
        self._on_dropped = on_dropped
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._counted(self.inner.export, spans)

    def export_encoded(self, spans: Sequence[EncodedSpan]) -> SpanExportResult:
        """Spans encoded as they ended, for an inner exporter that sends such bytes."""
        return self._counted(self.inner.export_encoded, spans)  # type: ignore[attr-defined]

    def _counted(self, export: Callable[[Sequence[Any]], SpanExportResult], spans: Sequence[Any]) -> SpanExportResult:
        try:
            result = export(spans)
        except Exception:  # the SDK would log and forget; we count
            log.debug("OTLP export raised", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self._on_dropped(len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def make_span_exporter(settings: OtlpSettings) -> SpanExporter:
    """The OTLP span exporter for the settings' protocol (imported lazily: grpc is heavy)."""
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(
            endpoint=settings.endpoint,
            insecure=settings.endpoint.startswith("http://") or None,
            headers=settings.headers or None,
            timeout=settings.timeout_s,
        )
    return DirectHttpSpanExporter(
        endpoint=settings.endpoint, headers=settings.headers or None, timeout=settings.timeout_s
    )


class OtlpTracing:
    """The TracerProvider brownout's span builder uses, wired to an OTLP exporter."""

    def __init__(
        self,
        settings: OtlpSettings,
        *,
        on_dropped: DropCounter,
        exporter: SpanExporter | None = None,
        resource: Resource | None = None,
    ) -> None:
        self.settings = settings
        attrs = {SERVICE_NAME: settings.service_name} if settings.service_name else {}
        # Resource.create merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (which wins over
        # our default); only when neither names the service do we call it "brownout".
        resource = resource or Resource.create(attrs)
        if str(resource.attributes.get(SERVICE_NAME, "unknown_service")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: "brownout"}))
        inner = exporter or make_span_exporter(settings)
        self.exporter = CountingSpanExporter(inner, on_dropped)
        self.processor = BoundedBatchProcessor(
            self.exporter,
            on_dropped,
            max_queue_size=settings.max_queue_size,
            max_export_batch_size=settings.max_export_batch_size,
            schedule_delay_millis=settings.schedule_delay_ms,
            encode=encode_span if isinstance(inner, DirectHttpSpanExporter) and inner.sends_encoded() else None,
        )
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(self.processor)
        self._closed = False

    def shutdown(self, timeout_s: float = 3.0) -> bool:
        """Flush what the collector will take, then stop; returns False when time ran out (idempotent)."""
        if self._closed:
            return True
        self._closed = True
        # Bounded: an export that retries until its own timeout keeps going on its daemon thread
        # (its failure is still counted); spans still queued at the deadline are counted as dropped.
        self.processor.shutdown(timeout_s)
        self.provider.shutdown()  # the processor is already down: returns at once
        return self.processor.queued == 0 and not self.processor.exporting
