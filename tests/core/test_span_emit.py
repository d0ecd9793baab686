"""brownout.core.span_emit: a span ended in one step is exactly the span the SDK's live path exports.

Each case builds the same exchange twice: once for a provider whose processors are quiet on start
(brownout ends the span itself) and once for a provider with a processor that acts on start (the
SDK's live `Span`). Both providers draw the same ids, so their exported spans must be identical,
field for field, as `ReadableSpan.to_json()` shows them.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, TraceIdRatioBased

from brownout.core.exchange import FaultRecord
from brownout.core.span_emit import SpanEmitter, processors_of
from brownout.core.spans import SpanBuilder
from brownout.exporters.batch import BoundedBatchProcessor
from tests.test_spans import T0, chat, violation


class CountingIds(IdGenerator):
    """The same ids in the same order for each provider."""

    def __init__(self) -> None:
        self._next = itertools.count(0x1000)

    def generate_span_id(self) -> int:
        return next(self._next)

    def generate_trace_id(self) -> int:
        return next(self._next) << 64


class ActsOnStart(SpanProcessor):
    """Tags every span as it starts: only a live span can take that."""

    def __init__(self) -> None:
        self.started = 0

    def on_start(self, span, parent_context=None) -> None:
        self.started += 1


class TagsSamples(Sampler):
    """Samples everything and puts attributes of its own on the span, as a vendor's sampler may."""

    def __init__(self, extra: dict | None = None) -> None:
        self.extra = extra or {"sampler.tag": "kept"}

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        return SamplingResult(Decision.RECORD_AND_SAMPLE, {**(attributes or {}), **self.extra})

    def get_description(self) -> str:
        return "TagsSamples"


def _provider(live: bool, sampler: Sampler | None = None) -> tuple[TracerProvider, InMemorySpanExporter, ActsOnStart]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=CountingIds(), **({"sampler": sampler} if sampler else {}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    acts = ActsOnStart()
    if live:
        provider.add_span_processor(acts)
    return provider, exporter, acts


def _both(build, sampler_factory=None) -> tuple[list[str], list[str]]:
    """The JSON of every span `build(builder)` exports, ended in one step and through the SDK's live span."""
    out = []
    for live in (False, True):
        provider, exporter, acts = _provider(live, sampler_factory() if sampler_factory else None)
        builder = SpanBuilder(provider, clock=lambda: T0 + 9)  # the late violation span is stamped "now"
        started = build(builder)
        assert (started.opened is None) is live  # the path each provider was meant to take
        assert acts.started == (len(exporter.get_finished_spans()) if live else 0)
        out.append([span.to_json() for span in exporter.get_finished_spans()])
    return out[0], out[1]


def _faults() -> list[FaultRecord]:
    return [
        FaultRecord(rule="slow", fault="latency", params={"ms": 250, "jitter": [1, 2.5]}, at=T0 + 0.1),
        FaultRecord(rule="cut", fault="truncate", params={"after": {"events": 3}}, at=T0 + 0.2),
    ]


CASES = {
    "ok": lambda: chat(),
    "faults and an error": lambda: chat(status=429, error_type="rate_limit_exceeded", faults=_faults()),
    "traceparent with tracestate": lambda: chat(
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate="vendor=abc,other=1"
    ),
    "unsampled traceparent": lambda: chat(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
    "no response": lambda: chat(status=None, error_type=None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_span_ended_in_one_step_is_the_sdks_span(case: str) -> None:
    def build(builder: SpanBuilder):
        exchange_span, _ = builder.build(CASES[case](), [violation("warning"), violation("error")])
        builder.late_violation(replace(violation(), trace_id="ab" * 16, span_id="cd" * 8))
        return exchange_span

    direct, live = _both(build)
    assert direct == live
    assert len(direct) == (1 if case == "unsampled traceparent" else 2)


def test_the_samplers_decision_and_attributes_hold_in_one_step() -> None:
    direct, live = _both(lambda b: b.build(chat())[0], TagsSamples)
    assert direct == live and '"sampler.tag": "kept"' in direct[0]
    direct, live = _both(lambda b: b.build(chat())[0], lambda: ParentBased(TraceIdRatioBased(0.0)))
    assert direct == live and len(direct) == 1  # the session's synthetic parent is sampled: the child follows


def test_attribute_values_the_sdk_would_change_are_cleaned_as_it_does() -> None:
    def build(builder: SpanBuilder):
        started = builder.start(chat())
        started.add_event("brownout.note", {"n": [1, 2], "bad": None})
        builder.finish(started)
        return started

    unclean = {"a.list": ["x", "y"], "a.none": None, "a.mixed": (1, "x")}
    direct, live = _both(build, lambda: TagsSamples(unclean))
    assert direct == live
    assert '"a.list": [\n            "x",\n            "y"\n        ]' in direct[0]


def test_span_limits_from_the_environment_apply_in_one_step(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "5")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
    direct, live = _both(lambda b: b.build(chat(faults=_faults()), [violation()])[0])
    assert direct == live
    span = json.loads(direct[0])
    assert len(span["attributes"]) == 5 and len(span["events"]) == 2
    assert all(len(v) <= 4 for v in span["attributes"].values() if isinstance(v, str))


def test_the_sdk_keeps_its_processors_where_the_adapter_reads_them() -> None:
    provider = TracerProvider()
    quiet = [SimpleSpanProcessor(InMemorySpanExporter()), BoundedBatchProcessor(InMemorySpanExporter(), print)]
    for processor in quiet:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("brownout")
    assert processors_of(tracer.span_processor) == tuple(quiet)
    emitter = SpanEmitter.of(tracer, "brownout", None)
    assert emitter is not None and emitter.usable()
    provider.add_span_processor(ActsOnStart())  # added later: the next span takes the live path
    assert not emitter.usable()
    batch = BatchSpanProcessor(InMemorySpanExporter())
    assert processors_of(batch) is None
    for processor in (*quiet, batch):
        processor.shutdown()
