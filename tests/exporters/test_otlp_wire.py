"""brownout's direct OTLP encoder against the official one, both decoded with the real proto schema."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.trace.span import TraceState

from brownout.core.exchange import FaultRecord
from brownout.core.spans import SpanBuilder
from brownout.exporters.otlp_wire import encode_request
from tests.exporters.expsamples import exchange, violation


def _provider(resource: Resource) -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _assert_same(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    ours = ExportTraceServiceRequest.FromString(encode_request(spans))
    official = ExportTraceServiceRequest.FromString(encode_spans(spans).SerializeToString())
    assert ours == official, f"ours:\n{ours}\nofficial:\n{official}"
    return ours


ATTRIBUTES: dict[str, Any] = {
    "s": "text",
    "empty": "",
    "unicode": "naïve ✓ 東京",
    "yes": True,
    "no": False,
    "zero": 0,
    "n": 42,
    "negative": -7,
    "big": 2**62,
    "most_negative": -(2**63),
    "f": 1.5,
    "f_zero": 0.0,
    "strs": ["a", "", "c"],
    "ints": [1, -2, 3],
    "bools": [True, False],
    "floats": [0.25, -1.0],
    "nothing": [],
}


def test_every_attribute_type_event_link_status_and_kind() -> None:
    provider, memory = _provider(Resource({"service.name": "brownout", "host.cores": 2}, schema_url="https://s/1"))
    tracer = provider.get_tracer("brownout", "1.2.3", schema_url="https://s/scope")
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")]))
    local = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(1))
    for kind in SpanKind:
        span = tracer.start_span(
            f"span {kind.name}",
            context=set_span_in_context(NonRecordingSpan(remote)),
            kind=kind,
            attributes=ATTRIBUTES,
            links=[Link(local, {"why": "retry of"}), Link(remote)],
        )
        span.add_event("fault", {"fault.type": "latency", "ms": 250})
        span.add_event("bare")
        span.set_status(Status(StatusCode.ERROR, "budget exceeded"))
        span.end()
    root = tracer.start_span("root, unset status, no parent")
    root.end()
    ok = tracer.start_span("ok", context=set_span_in_context(NonRecordingSpan(local)))
    ok.set_status(Status(StatusCode.OK))
    ok.end()
    finished = list(memory.get_finished_spans())
    got = _assert_same(finished)
    assert sum(len(ss.spans) for rs in got.resource_spans for ss in rs.scope_spans) == len(finished) == 7


def test_spans_group_by_resource_and_scope() -> None:
    one, memory_one = _provider(Resource({"service.name": "a"}))
    two, memory_two = _provider(Resource({"service.name": "b"}))
    for provider, scope in ((one, "x"), (two, "x"), (one, "y"), (two, "x")):
        provider.get_tracer(scope).start_span(f"{scope}").end()
    mixed = [*memory_one.get_finished_spans(), *memory_two.get_finished_spans()]
    got = _assert_same(mixed)
    assert [len(rs.scope_spans) for rs in got.resource_spans] == [2, 1]


def test_equal_resources_of_distinct_objects_share_a_group_in_the_official_order() -> None:
    one, memory_one = _provider(Resource({"service.name": "a"}))
    two, memory_two = _provider(Resource({"service.name": "a"}))  # equal, not the same object
    for provider, name in ((one, "1"), (two, "2"), (one, "3")):
        provider.get_tracer("x").start_span(name).end()
    by_name = {s.name: s for s in [*memory_one.get_finished_spans(), *memory_two.get_finished_spans()]}
    got = _assert_same([by_name["1"], by_name["2"], by_name["3"]])
    assert [s.name for rs in got.resource_spans for ss in rs.scope_spans for s in ss.spans] == ["1", "2", "3"]


def test_a_batch_hashes_each_resource_object_once_not_each_span() -> None:
    # Resource.__hash__ serialises its attributes to JSON; once per span it was milliseconds of the
    # exporter thread's GIL time per batch, time the proxy's event loop waited.
    hashes = []

    class Counted(Resource):
        def __hash__(self) -> int:
            hashes.append(1)
            return super().__hash__()

    provider, memory = _provider(Counted({"service.name": "brownout"}))
    for n in range(200):
        provider.get_tracer("brownout").start_span(f"s{n}").end()
    spans = list(memory.get_finished_spans())
    hashes.clear()
    assert (
        len(ExportTraceServiceRequest.FromString(encode_request(spans)).resource_spans[0].scope_spans[0].spans) == 200
    )
    assert len(hashes) <= 2


def test_brownout_exchange_spans_encode_identically() -> None:
    provider, memory = _provider(Resource({"service.name": "brownout"}))
    builder = SpanBuilder(provider, capture_content=True)
    ex = exchange(faults=[FaultRecord(rule="slow", fault="latency", params={"ms": 500}, at=1.0)])
    builder.build(ex, check=lambda span, exchange: [violation()])
    builder.build(exchange(), check=lambda span, exchange: [])
    _assert_same(list(memory.get_finished_spans()))


def test_an_integer_beyond_int64_is_left_out_like_the_official_encoder() -> None:
    provider, memory = _provider(Resource({}))
    span = provider.get_tracer("t").start_span("s", attributes={"ok": 1})
    span.end()
    finished = memory.get_finished_spans()[0]
    finished._attributes = {"ok": 1, "huge": 2**70}  # the SDK lets it through; encoders must not fail
    got = _assert_same([finished])
    assert [a.key for a in got.resource_spans[0].scope_spans[0].spans[0].attributes] == ["ok"]


@pytest.mark.parametrize("bad", [object(), {1, 2}])
def test_an_unencodable_value_is_left_out(bad: Any) -> None:
    provider, memory = _provider(Resource({}))
    provider.get_tracer("t").start_span("s").end()
    finished = memory.get_finished_spans()[0]
    finished._attributes = {"bad": bad, "good": "g"}
    assert [a.key for a in ExportTraceServiceRequest.FromString(encode_request([finished])).resource_spans[0]
            .scope_spans[0].spans[0].attributes] == ["good"]  # fmt: skip


def test_spans_encoded_as_they_end_reach_the_exporter_as_one_request_and_failures_count() -> None:
    from brownout.exporters.batch import BoundedBatchProcessor
    from brownout.exporters.otlp_wire import encode_span, join_request

    sent: list[bytes] = []
    dropped: list[int] = []

    class Sink:
        def export_encoded(self, spans: Any) -> None:
            sent.append(join_request(spans))

        def shutdown(self) -> None:
            return None

    def encode(span: ReadableSpan) -> Any:
        if span.name == "unencodable":
            raise TypeError("planted")
        return encode_span(span)

    processor = BoundedBatchProcessor(Sink(), dropped.append, schedule_delay_millis=60_000, encode=encode)  # type: ignore[arg-type]
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "b"}))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for name in ("one", "unencodable", "two"):
        tracer.start_span(name, attributes={"k": name}).end()
    assert processor.force_flush(5000)
    got = ExportTraceServiceRequest.FromString(b"".join(sent))
    assert [s.name for rs in got.resource_spans for ss in rs.scope_spans for s in ss.spans] == ["one", "two"]
    kept = [s for s in memory.get_finished_spans() if s.name != "unencodable"]
    assert got == ExportTraceServiceRequest.FromString(encode_spans(kept).SerializeToString())
    assert dropped == [1]
    processor.shutdown(2)


def test_cached_attributes_encode_as_the_official_encoder_whatever_came_before() -> None:
    # Values that compare equal across types (True == 1, 0.0 == -0.0) must not share an encoding, and a
    # key past the cached values per key (an id) is encoded afresh each time.
    provider, memory = _provider(Resource({"service.name": "brownout"}))
    tracer = provider.get_tracer("brownout")
    values: list[Any] = [1, True, 1.0, "1", 0.0, -0.0, False, 0, ""]
    values += [f"id-{n}" for n in range(100)] + [True, 1, -0.0, 0.0]
    for value in values:
        tracer.start_span("s", attributes={"same.key": value, "id": f"{value!r}-{id(value)}"}).end()
    spans = list(memory.get_finished_spans())
    _assert_same(spans)
    _assert_same(spans)  # now every encoding that could be remembered was
