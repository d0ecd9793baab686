"""Ending an exchange span in one step: a `ReadableSpan` handed straight to the provider's processors.

Why not the SDK's live `Span`: brownout knows a span's whole content only once the exchange is
over, so it starts and ends each span within microseconds. A live span pays for what that
never uses: `BoundedAttributes` takes a lock and re-checks every attribute's type on start and
on every event, and `end` copies the span. `.venv/bin/python bench/spans.py` builds one LLM
exchange's span both ways, side by side: one step took half the CPU (1.9x to 2.0x less, with the
~30 attributes' own building included) on the 2-core VM.

The result is what the SDK would have handed its processors: the same sampler decision, ids,
flags, trace state, resource, scope, limits and status. It is used only where nothing can tell
the difference: an SDK `Tracer` whose processors do nothing on start (the SDK's own simple and
batch processors, brownout's, or any that keeps `SpanProcessor.on_start`). A span for a
provider with another kind of processor takes the SDK's live path (`SpanBuilder` decides).

Reads one private name, the processors of the SDK's `SynchronousMultiSpanProcessor`
(`_span_processors`), through `processors_of`; `tests/test_span_emit.py` checks it on the
installed SDK, and where it is missing every span takes the live path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    SpanLimits,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    Tracer,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

__all__ = ["OpenedSpan", "SpanEmitter", "processors_of"]

_SIMPLE_TYPES = (str, bool, int, float)
_UNSET = Status(StatusCode.UNSET)
# Processors whose on_start (and on-ending hook) the SDK itself defines as doing nothing.
_QUIET_CLASSES = (SpanProcessor, SimpleSpanProcessor, BatchSpanProcessor)
_QUIET_HOOKS = {hook: {getattr(cls, hook, None) for cls in _QUIET_CLASSES} for hook in ("on_start", "_on_ending")}


def processors_of(multi: object) -> tuple[Any, ...] | None:
    """The processors behind a provider's `SynchronousMultiSpanProcessor`; None when it is another kind or
    this SDK keeps them elsewhere (then nothing is known about them)."""
    if type(multi) is not SynchronousMultiSpanProcessor:
        return None
    found = getattr(multi, "_span_processors", None)
    return found if isinstance(found, tuple) else None


def _quiet(processor: object) -> bool:
    """Nothing happens when a span starts or is about to end: the span it would see there does not matter."""
    kind = type(processor)
    return all(getattr(kind, hook, None) in quiet for hook, quiet in _QUIET_HOOKS.items())


@dataclass(slots=True, frozen=True)
class OpenedSpan:
    """The sampler's decision for a span brownout will end itself."""

    context: SpanContext
    parent: SpanContext | None
    recording: bool
    attributes: Mapping[str, Any]  # what the sampler put on the span: brownout's, plus any it added


class SpanEmitter:
    """Opens (samples, gives ids) and ends spans of one SDK tracer without a live span."""

    def __init__(self, tracer: Tracer, scope: InstrumentationScope) -> None:
        self._tracer = tracer
        self._scope = scope
        self._limits = SpanLimits()  # what the SDK's provider uses when given none (brownout never gives one)
        self._seen: tuple[Any, ...] | None = None
        self._usable = False
        self._enabled = getattr(tracer, "_is_enabled", None)  # the SDK's per-tracer switch, where it has one

    @classmethod
    def of(cls, tracer: object, name: str, schema_url: str | None) -> SpanEmitter | None:
        """An emitter for an SDK tracer; None for any other (the API's no-op one, a vendor's)."""
        if type(tracer) is not Tracer:
            return None
        return cls(tracer, InstrumentationScope(name, None, schema_url, None))

    def usable(self) -> bool:
        """Every processor is quiet on start, and the tracer is enabled: a span ended here is exactly the SDK's.
        Asked per span, since a processor may be added at any time; answered from a cache while they stay."""
        processors = processors_of(self._tracer.span_processor)
        if processors is None:
            return False
        if processors is not self._seen:
            self._seen = processors
            self._usable = all(_quiet(p) for p in processors)
        return self._usable and (self._enabled is None or bool(self._enabled()))

    def open(self, name: str, parent: Context, kind: SpanKind, attributes: dict[str, Any]) -> OpenedSpan:
        """The decision `Tracer.start_span` would make: sampler, trace and span ids, flags, trace state."""
        tracer = self._tracer
        parent_ctx: SpanContext | None = trace.get_current_span(parent).get_span_context()
        if parent_ctx is None or not parent_ctx.is_valid:
            parent_ctx = None
            trace_id = tracer.id_generator.generate_trace_id()
            random_id = bool(getattr(tracer.id_generator, "is_trace_id_random", lambda: False)())
        else:
            trace_id = parent_ctx.trace_id
            random_id = bool(getattr(parent_ctx.trace_flags, "random_trace_id", False))
        result = tracer.sampler.should_sample(parent, trace_id, name, kind, attributes, None)
        flags = TraceFlags.SAMPLED if result.decision.is_sampled() else TraceFlags.DEFAULT
        random_flag = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)
        if random_id and random_flag:
            flags |= random_flag
        context = SpanContext(
            trace_id,
            tracer.id_generator.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=result.trace_state,
        )
        recording = result.decision.is_recording()
        return OpenedSpan(context, parent_ctx, recording, dict(result.attributes) if recording else {})

    def end(
        self,
        opened: OpenedSpan,
        *,
        name: str,
        kind: SpanKind,
        events: Sequence[tuple[str, Mapping[str, Any], int]],
        status: Status | None,
        start_ns: int,
        end_ns: int,
    ) -> None:
        """Hand the finished span to the processors, as the SDK's `Span.end` does; nothing for an unrecorded one."""
        if not opened.recording:
            return
        limits = self._limits
        span_events: Any = [
            Event(name, self._attributes(attrs, limits.max_event_attributes, limits.max_attribute_length), at)
            for name, attrs, at in events
        ]
        if limits.max_events is not None and len(span_events) > limits.max_events:
            bounded: BoundedList[Event] = BoundedList(limits.max_events)
            bounded.extend(span_events)
            span_events = bounded
        readable = ReadableSpan(
            name=name,
            context=opened.context,
            parent=opened.parent,
            resource=self._tracer.resource,
            attributes=self._attributes(
                opened.attributes, limits.max_span_attributes, limits.max_span_attribute_length
            ),
            events=span_events,
            links=(),
            kind=kind,
            status=status or _UNSET,
            start_time=start_ns,
            end_time=end_ns,
            instrumentation_info=self._tracer.instrumentation_info,
            instrumentation_scope=self._scope,
        )
        self._tracer.span_processor.on_end(readable)

    @staticmethod
    def _attributes(attrs: Mapping[str, Any], limit: int | None, max_len: int | None) -> Any:
        """brownout's attributes as they are when already clean and within limits (nearly always), else the
        SDK's own cleaning (`BoundedAttributes`: drops invalid values, counts what the limit cuts)."""
        within = limit is None or len(attrs) <= limit
        if max_len is None and within and all(type(k) is str and k for k in attrs) and all(map(_clean, attrs.values())):
            return attrs  # ReadableSpan hands out a read-only view of it
        return BoundedAttributes(limit, attrs, immutable=True, max_value_len=max_len)


def _clean(value: object) -> bool:
    """A value the SDK would keep unchanged: str, bool, int, float, or a tuple of one of those types."""
    kind = type(value)
    if kind in _SIMPLE_TYPES:
        return True
    if kind is not tuple or not value:
        return kind is tuple  # () is clean; a list is not (the SDK turns it into a tuple)
    first = type(value[0])  # type: ignore[index]
    return first in _SIMPLE_TYPES and all(type(v) is first for v in value)  # type: ignore[attr-defined]
