"""OTLP export through real protobuf receivers (HTTP and gRPC), and an unreachable collector."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from http.server import BaseHTTPRequestHandler
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

from brownout.core.exchange import FaultRecord
from brownout.core.spans import SpanBuilder
from brownout.exporters.config import ExportersConfig, OtlpConfig
from brownout.exporters.hub import Exporters
from brownout.exporters.otlp_http import DirectHttpSpanExporter
from brownout.proxy.freeport import free_port as _closed_port  # below the ephemeral range: nothing binds it by chance
from tests.exporters.expsamples import exchange, violation
from tests.threadserver import serving_handler

AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{AGENT_TRACE}-00f067aa0ba902b7-01"


class Received:
    """Spans decoded from ExportTraceServiceRequest messages, plus the resource attributes and the
    instrumentation scopes (name, schema_url)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.scopes: set[tuple[str, str]] = set()
        self.resource: dict[str, Any] = {}
        self.headers: dict[str, str] = {}
        self.event = threading.Event()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        for rs in request.resource_spans:
            self.resource = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                self.scopes.add((ss.scope.name, ss.schema_url))
                self.spans.extend(ss.spans)
        self.event.set()


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, Received]]:
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
            got.headers = {k.lower(): v for k, v in self.headers.items()}
            got.add(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    with serving_handler(Handler) as url:
        yield url, got


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    got = Received()

    class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            got.headers = dict(context.invocation_metadata())
            got.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}", got
    server.stop(grace=None)


def _hub(otlp: OtlpConfig, **kw: Any) -> Exporters:
    return Exporters(ExportersConfig(otlp=otlp), registry=CollectorRegistry(), environ={}, **kw)


def _send_spans(hub: Exporters) -> None:
    """Two exchanges through the real span builder: one joins the agent's trace and carries a fault and a violation."""
    builder = SpanBuilder(hub.tracer_provider)
    faulty = exchange(
        traceparent=TRACEPARENT, status=429, faults=[FaultRecord("openai-429", "http_error", {"status": 429})]
    )
    builder.build(
        faulty,
        check=lambda span, _: [
            violation(
                invariant="retry_discipline", severity="error", trace_id=span.trace_id_hex, span_id=span.span_id_hex
            )
        ],
    )
    builder.build(exchange(session="s-2"))


def _check(got: Received) -> None:
    assert got.event.wait(10), "no export arrived"
    deadline = time.time() + 5
    while len(got.spans) < 2 and time.time() < deadline:
        time.sleep(0.05)
    spans = {s.trace_id.hex(): s for s in got.spans}
    assert got.resource["service.name"] == "brownout"
    joined = spans[AGENT_TRACE]
    assert joined.name == "chat gpt-4o-mini"
    assert joined.parent_span_id.hex() == "00f067aa0ba902b7"
    attrs = {a.key: a.value for a in joined.attributes}
    assert attrs["gen_ai.operation.name"].string_value == "chat"
    assert attrs["gen_ai.request.model"].string_value == "gpt-4o-mini"
    assert attrs["server.address"].string_value == "api.openai.com"
    events = {e.name: {a.key: a.value.string_value for a in e.attributes} for e in joined.events}
    assert "brownout.fault" in events
    assert events["brownout.violation"]["brownout.violation.invariant"] == "retry_discipline"
    other = [s for t, s in spans.items() if t != AGENT_TRACE]
    assert len(other) == 1 and other[0].name == "chat gpt-4o-mini"


def test_http_protobuf_receiver_gets_spans_events_and_parent(http_receiver: tuple[str, Received]) -> None:
    url, got = http_receiver
    hub = _hub(OtlpConfig(endpoint=url, headers={"x-tenant": "t1"}, schedule_delay_ms=50))
    assert hub.otlp is not None and isinstance(hub.otlp.exporter.inner, DirectHttpSpanExporter)
    assert hub.otlp.exporter.inner.sends_encoded()  # spans are encoded as they end, the thread only sends
    _send_spans(hub)
    hub.shutdown(timeout_s=3)
    _check(got)
    assert got.headers["x-tenant"] == "t1"
    assert hub.metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "otlp"}) == 0


@pytest.mark.parametrize("private", ["_client", "_max_request_size", "_shutdown"])
def test_the_direct_encoder_needs_every_private_attribute_it_reads(private: str) -> None:
    # The pinned opentelemetry-exporter-otlp-proto-http has the three; a release that renamed one gets
    # the official export instead of a direct one that misbehaves (e.g. sends after shutdown).
    assert DirectHttpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces").sends_encoded()
    exporter = DirectHttpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces")
    delattr(exporter, private)
    assert not exporter.sends_encoded()
    with pytest.raises(TypeError, match="no client"):
        exporter.export_encoded([])


def test_grpc_receiver_gets_the_same(grpc_receiver: tuple[str, Received]) -> None:
    url, got = grpc_receiver
    hub = _hub(OtlpConfig(endpoint=url, protocol="grpc", headers={"x-tenant": "t2"}, schedule_delay_ms=50))
    _send_spans(hub)
    hub.shutdown(timeout_s=3)
    _check(got)
    assert got.headers["x-tenant"] == "t2"


def test_service_name_and_resource_from_environment(
    http_receiver: tuple[str, Received], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, got = http_receiver
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agent-chaos")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
    hub = Exporters(ExportersConfig(), registry=CollectorRegistry(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    _send_spans(hub)
    hub.shutdown(timeout_s=3)
    assert got.event.wait(5)
    assert got.resource["service.name"] == "agent-chaos"
    assert got.resource["deployment.environment"] == "ci"


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_unreachable_collector_counts_drops_and_shutdown_is_bounded(protocol: str) -> None:
    hub = _hub(
        OtlpConfig(
            endpoint=f"http://127.0.0.1:{_closed_port()}",
            protocol=protocol,  # type: ignore[arg-type]
            timeout_s=0.5,
            schedule_delay_ms=50,
        )
    )
    builder = SpanBuilder(hub.tracer_provider)
    started = time.perf_counter()
    for _ in range(5):
        builder.build(exchange())
    assert time.perf_counter() - started < 0.5, "span export must not block the caller"
    deadline = time.time() + 5
    dropped = lambda: hub.metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "otlp"})
    while dropped() < 5 and time.time() < deadline:
        time.sleep(0.05)
    assert dropped() == 5
    for _ in range(3):
        builder.build(exchange())
    started = time.perf_counter()
    hub.shutdown(timeout_s=2)
    assert time.perf_counter() - started < 5
    assert hub.metrics.registry.get_sample_value("brownout_internal_errors_total", {"component": "exporter:otlp"}) == 0


class _BlockingExporter(SpanExporter):
    """Holds the first export until released, so the queue fills deterministically."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(5)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_full_queue_drops_are_counted() -> None:
    blocking = _BlockingExporter()
    hub = _hub(
        OtlpConfig(endpoint="http://unused:4318", max_queue_size=4, schedule_delay_ms=10), span_exporter=blocking
    )
    builder = SpanBuilder(hub.tracer_provider)
    builder.build(exchange())
    assert blocking.entered.wait(5)  # the worker is stuck exporting; the queue is empty
    for _ in range(7):
        builder.build(exchange())
    assert hub.metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "otlp"}) == 3
    blocking.release.set()
    hub.shutdown(timeout_s=2)
