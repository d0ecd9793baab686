"""The official OTLP/HTTP span exporter, with brownout's direct protobuf encoder.

Everything but the encoding is the official exporter's: endpoint and environment variables,
TLS, headers, compression, retries with backoff, the request size limit. Only the bytes are
written by exporters/otlp_wire.py, at a fraction of the CPU (see its docstring). Should a
future exporter release rename the internals used here, the official export runs instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from brownout.exporters.otlp_wire import EncodedSpan, encode_request, join_request

__all__ = ["DirectHttpSpanExporter"]

log = logging.getLogger(__name__)


class DirectHttpSpanExporter(OTLPSpanExporter):
    """OTLPSpanExporter whose export() encodes with `encode_request`."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self._direct():
            return super().export(spans)
        return self._send(encode_request(spans), len(spans))

    def export_encoded(self, spans: Sequence[EncodedSpan]) -> SpanExportResult:
        """Spans encoded by `encode_span` as they ended: joined into one request and sent."""
        if not self._direct():
            raise TypeError("this exporter's release has no client to send encoded spans through")
        return self._send(join_request(spans), len(spans))

    def sends_encoded(self) -> bool:
        """This release's internals are the ones export_encoded sends through."""
        return self._direct()

    def _direct(self) -> bool:
        # The official exporter's private attributes this reads (opentelemetry-exporter-otlp-proto-http
        # 1.45): its HTTP client, its request size limit and its shutdown flag. All three or none.
        client = getattr(self, "_client", None)
        return (
            client is not None
            and hasattr(client, "export")
            and isinstance(getattr(self, "_max_request_size", None), int)
            and isinstance(getattr(self, "_shutdown", None), bool)
        )

    def _send(self, data: bytes, count: int) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        limit = self._max_request_size
        client = self._client
        if 0 < limit < len(data):
            log.warning("OTLP batch of %d spans is %d bytes, over the %d-byte request limit", count, len(data), limit)
            return SpanExportResult.FAILURE
        result = client.export(data)
        return SpanExportResult.SUCCESS if getattr(result, "success", False) else SpanExportResult.FAILURE
