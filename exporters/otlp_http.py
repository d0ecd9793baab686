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

from brownout.exporters.otlp_wire import encode_request

__all__ = ["DirectHttpSpanExporter"]

log = logging.getLogger(__name__)


class DirectHttpSpanExporter(OTLPSpanExporter):
    """OTLPSpanExporter whose export() encodes with `encode_request`."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        client = getattr(self, "_client", None)
        limit = getattr(self, "_max_request_size", None)
        if client is None or not isinstance(limit, int) or not hasattr(client, "export"):
            return super().export(spans)
        if getattr(self, "_shutdown", False):
            return SpanExportResult.FAILURE
        data = encode_request(spans)
        if 0 < limit < len(data):
            log.warning(
                "OTLP batch of %d spans is %d bytes, over the %d-byte request limit", len(spans), len(data), limit
            )
            return SpanExportResult.FAILURE
        result = client.export(data)
        return SpanExportResult.SUCCESS if getattr(result, "success", False) else SpanExportResult.FAILURE
