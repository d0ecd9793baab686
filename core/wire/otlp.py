"""OTLP/HTTP exports: an agent's telemetry on its way to a collector, through brownout.

An agent's OTLP exporter that honours `HTTP(S)_PROXY` sends its spans, metrics and logs through
brownout. They are the agent's telemetry, not its work: recognised here (a POST to `/v1/traces`,
`/v1/metrics` or `/v1/logs` with a protobuf or JSON body), forwarded untouched, faulted only by a
rule that names the provider (`match: {provider: otlp}`), never counted as tool calls. A trace
export's spans are decoded (`brownout.core.agent_spans`) into `exchange.notes[SPANS_NOTE]` for the
join with the wire.
"""

from __future__ import annotations

import logging
from typing import Any

from brownout.core.agent_spans import decode_traces
from brownout.core.exchange import Exchange
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat
from brownout.core.wire.jsonutil import decode_capped

__all__ = ["OPERATIONS", "PROVIDER", "SPANS_NOTE", "OtlpFormat", "signal_of"]

log = logging.getLogger(__name__)

PROVIDER = "otlp"
SPANS_NOTE = "otlp_spans"  # exchange.notes key: the decoded spans of a trace export
# The OTLP/HTTP paths (the spec's defaults; collectors may mount them under a prefix) -> operation.
OPERATIONS = {"/v1/traces": "export_traces", "/v1/metrics": "export_metrics", "/v1/logs": "export_logs"}
_CONTENT_TYPES = ("application/x-protobuf", "application/json")


def signal_of(path: str) -> str | None:
    """The operation of an OTLP/HTTP export path (`/v1/traces` -> export_traces), else None."""
    path = path.rstrip("/")
    for suffix, operation in OPERATIONS.items():
        if path.endswith(suffix):
            return operation
    return None


class OtlpFormat(ProviderFormat):
    """OTLP/HTTP (protobuf and JSON) export requests: telemetry, not agent traffic."""

    provider = PROVIDER

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST":
            return None
        content_type = req.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type not in _CONTENT_TYPES:
            return None
        return signal_of(req.path)

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        exchange.provider, exchange.gen_ai_provider = self.provider, None
        content_type = exchange.request_headers.get("content-type", "")
        if "json" in content_type:
            exchange.request_body = decode_capped(body, exchange.capture_max_bytes)
        if exchange.operation != "export_traces" or not body:
            return
        spans = decode_traces(body, content_type)
        if spans is None:
            reason = "invalid_json" if "json" in content_type else "invalid_protobuf"
            exchange.note_parse_error(reason, "request: not an OTLP ExportTraceServiceRequest")
            return
        exchange.notes[SPANS_NOTE] = spans

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        pass  # an ExportTraceServiceResponse: nothing the join needs

    def _request(self, exchange: Exchange, data: Any) -> None:  # pragma: no cover - parse_request overridden
        pass

    def _response(self, exchange: Exchange, data: Any) -> None:  # pragma: no cover - parse_response overridden
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return _NoStream(exchange)


class _NoStream(BaseStreamParser):
    """OTLP/HTTP answers are never streams; one that came as one is counted, not read."""

    def _feed(self, event: StreamEvent) -> None:
        pass
