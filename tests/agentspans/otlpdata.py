"""The agent's spans as its real OTel SDK exports them: protobuf bytes from the SDK's own encoder, and
the same in OTLP JSON (hex ids, attribute values by type), as the collector's file exporter writes it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

__all__ = ["AgentTracer", "otlp_json", "proto_bytes"]


class AgentTracer:
    """A real TracerProvider whose finished spans are kept in memory (the agent's side of a test)."""

    def __init__(self, service: str = "agent") -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("agent-test")

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any], *, ok: bool | None = None) -> Iterator[Any]:
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span
            if ok is True:
                span.set_status(Status(StatusCode.OK))
            elif ok is False:
                span.set_status(Status(StatusCode.ERROR, "failed"))

    def finished(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


def proto_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    """An ExportTraceServiceRequest, serialised as the SDK's OTLP/HTTP exporter sends it."""
    return encode_spans(spans).SerializeToString()  # type: ignore[no-any-return]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # 64-bit integers are strings in OTLP JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The same request in OTLP JSON."""
    out = []
    for span in spans:
        ctx = span.get_span_context()
        assert ctx is not None
        item: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": span.name,
            "kind": 3,
            "startTimeUnixNano": str(span.start_time),
            "endTimeUnixNano": str(span.end_time),
            "attributes": [{"key": k, "value": _value(v)} for k, v in (span.attributes or {}).items()],
            "status": {"code": span.status.status_code.value},
        }
        if span.parent is not None:
            item["parentSpanId"] = f"{span.parent.span_id:016x}"
        out.append(item)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "agent"}, "spans": out}]}]}


def json_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    return json.dumps(otlp_json(spans)).encode()


class ExportingAgent(AgentTracer):
    """An agent whose spans go out as a real agent's do: batched, over OTLP/HTTP, to `endpoint`."""

    def __init__(self, endpoint: str, *, delay_ms: int = 300, service: str = "agent") -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        super().__init__(service)
        exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=5)
        self.provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=delay_ms))

    def close(self) -> None:
        self.provider.shutdown()
