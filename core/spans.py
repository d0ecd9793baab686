"""Exchange -> OpenTelemetry span: the only place brownout builds spans.

The addon's order is start -> check invariants -> finish, because invariants read the span
and their violations become events on that same span before it ends:

    exchange_span = builder.start(exchange)          # attributes + fault events, not ended
    violations = runner.check(exchange_span, exchange)
    builder.finish(exchange_span, violations)        # violation events, status, end

or in one call: `builder.build(exchange, check=runner.check)`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from brownout.core.exchange import Exchange
from brownout.core.secrets import redact_keys
from brownout.core.semconv import PINNED, Semconv
from brownout.core.span_attributes import (
    exchange_attributes,
    fault_event_attributes,
    realtime_session_events,
    span_name,
)
from brownout.core.span_emit import OpenedSpan, SpanEmitter
from brownout.core.span_join import agent_fields, agent_parent

__all__ = ["ERROR_SEVERITIES", "ExchangeSpan", "SpanBuilder", "SpanEvent", "ViolationLike", "session_trace_context"]

logger = logging.getLogger(__name__)

ERROR_SEVERITIES = frozenset({"error", "critical"})
_PROPAGATOR = TraceContextTextMapPropagator()
_MAX_STATUS_CHARS = 1024  # a server's error message, kept short on the span


class ViolationLike(Protocol):
    """What a span needs from a violation (invariants.records.Violation satisfies it)."""

    @property
    def invariant(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def span_id(self) -> str | None: ...
    @property
    def exchange_id(self) -> str | None: ...
    @property
    def session_id(self) -> str: ...


@dataclass(slots=True, frozen=True)
class SpanEvent:
    """A span event as invariants read it."""

    name: str
    attributes: dict[str, Any]
    timestamp_ns: int


@dataclass(slots=True)
class ExchangeSpan:
    """A started, not yet ended exchange span plus a readable copy of what is on it.

    Invariants read the copy, not the SDK span: a span sampled out by the agent's
    `traceparent` flags is non-recording and keeps no attributes, yet must still be checked.
    The span itself is either `opened` (brownout ends it in one step: core/span_emit.py) or
    `span`, the SDK's live one (a provider whose processors act on start).
    """

    span: trace.Span | None
    name: str
    attributes: dict[str, Any]
    events: list[SpanEvent]
    trace_id: int
    span_id: int
    parent_span_id: int | None
    start_ns: int
    end_ns: int
    failed: bool  # the exchange itself failed: 5xx, connection error, provider error
    ended: bool = field(default=False)
    status_message: str | None = field(default=None)  # the ERROR status's description, when not error.type
    opened: OpenedSpan | None = field(default=None)
    _trace_hex: str | None = field(default=None, repr=False, compare=False)
    _span_hex: str | None = field(default=None, repr=False, compare=False)

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        """An event at the exchange's end, e.g. an invariant saying what it could not check."""
        event = SpanEvent(name, attributes, self.end_ns)
        if not self.ended and self.span is not None:
            self.span.add_event(event.name, event.attributes, event.timestamp_ns)
        self.events.append(event)

    @property
    def recording(self) -> bool:
        """The span will be handed to the processors (False: sampled out; only this readable copy exists)."""
        if self.opened is not None:
            return self.opened.recording
        return self.span is not None and self.span.is_recording()

    @property
    def trace_id_hex(self) -> str:
        if self._trace_hex is None:  # every invariant and log line asks: formatted once
            self._trace_hex = f"{self.trace_id:032x}"
        return self._trace_hex

    @property
    def span_id_hex(self) -> str:
        if self._span_hex is None:
            self._span_hex = f"{self.span_id:016x}"
        return self._span_hex


@functools.lru_cache(maxsize=4096)  # a pure function of the session id: every exchange of a session asks
def session_trace_context(session: str) -> Context:
    """A parent context whose trace id is derived from the session id (no agent traceparent).

    Why a synthetic non-recording parent: it groups every exchange of a session into one
    trace without brownout keeping a per-session span open (which would only export when
    the session idles and would hold memory per session). Derived with blake2b, so the same
    session maps to the same trace across restarts and replicas. The parent span id is never
    exported; trace viewers show the session's spans under a missing root.
    """
    digest = hashlib.blake2b(session.encode("utf-8", "surrogatepass"), digest_size=24).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:], "big") or 1
    ctx = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(ctx))


class SpanBuilder:
    """Builds one CLIENT span per exchange with GenAI semconv attributes and brownout events."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider,
        *,
        capture_content: bool = False,
        clock: Callable[[], float] = time.time,
        semconv: Semconv = PINNED,
    ) -> None:
        # The scope's schema_url says which GenAI conventions the spans follow (see core/semconv.py).
        self._tracer = tracer_provider.get_tracer("brownout", schema_url=semconv.schema_url)
        self._emitter = SpanEmitter.of(self._tracer, "brownout", semconv.schema_url)
        self.semconv = semconv
        self.capture_content = capture_content
        self._clock = clock

    def parent_context(self, exchange: Exchange) -> Context:
        """The agent's trace when it sent a valid traceparent (or the join found its span), else the session's."""
        if (joined := agent_parent(exchange)) is not None:
            return trace.set_span_in_context(NonRecordingSpan(joined))
        if exchange.traceparent:
            carrier = {"traceparent": exchange.traceparent}
            if exchange.tracestate:
                carrier["tracestate"] = exchange.tracestate
            ctx = _PROPAGATOR.extract(carrier)
            if trace.get_current_span(ctx).get_span_context().is_valid:
                return ctx
        return session_trace_context(exchange.session)

    def start(self, exchange: Exchange) -> ExchangeSpan:
        """Start the span with its attributes and fault events; it is not ended yet."""
        start_s = exchange.timings.start or self._clock()
        end_s = exchange.timings.end if exchange.timings.end is not None else self._clock()
        start_ns = int(start_s * 1e9)
        end_ns = max(start_ns, int(end_s * 1e9))
        attributes = exchange_attributes(
            exchange, capture_content=self.capture_content, semconv=self.semconv
        ) | agent_fields(exchange)
        name = span_name(exchange)
        parent = self.parent_context(exchange)
        emitter = self._emitter if self._emitter is not None and self._emitter.usable() else None
        span: trace.Span | None = None
        opened: OpenedSpan | None = None
        if emitter is not None:
            opened = emitter.open(name, parent, SpanKind.CLIENT, attributes)
            ctx, parent_ctx = opened.context, opened.parent
        else:
            span = self._tracer.start_span(
                name, context=parent, kind=SpanKind.CLIENT, attributes=attributes, start_time=start_ns
            )
            ctx, parent_ctx = span.get_span_context(), trace.get_current_span(parent).get_span_context()
        events: list[SpanEvent] = []
        # A fault that fired but could not act is a `brownout.fault.skipped` event, its reason
        # in brownout.fault.param.skipped: visible, never mistaken for an injected one.
        recorded = [("brownout.fault", f) for f in exchange.faults]
        recorded += [("brownout.fault.skipped", f) for f in exchange.faults_skipped]
        for event_name, fault in recorded:
            at_ns = int(fault.at * 1e9) if fault.at else start_ns
            events.append(SpanEvent(event_name, fault_event_attributes(fault), min(max(at_ns, start_ns), end_ns)))
        session_events = realtime_session_events(exchange, self.semconv) if exchange.realtime else ()
        for event_name, at_s, event_attrs in session_events:
            events.append(SpanEvent(event_name, event_attrs, min(max(int(at_s * 1e9), start_ns), end_ns)))
        if span is not None:
            for event in events:
                span.add_event(event.name, event.attributes, event.timestamp_ns)
        return ExchangeSpan(
            span=span,
            name=name,
            attributes=attributes,
            events=events,
            trace_id=ctx.trace_id,
            span_id=ctx.span_id,
            parent_span_id=parent_ctx.span_id if parent_ctx is not None and parent_ctx.is_valid else None,
            start_ns=start_ns,
            end_ns=end_ns,
            failed=_failed(exchange),
            status_message=_status_message(exchange),
            opened=opened,
        )

    def finish(self, exchange_span: ExchangeSpan, violations: Iterable[ViolationLike] = ()) -> None:
        """Add violation events, set the status, end the span (idempotent).

        A violation about another exchange (found late: an invariant judged an earlier call again once a
        later exchange ended) is not this span's: it becomes a child span of the exchange it is about."""
        if exchange_span.ended:
            return
        worst: ViolationLike | None = None
        late: list[ViolationLike] = []
        for violation in violations:
            if violation.span_id is not None and violation.span_id != exchange_span.span_id_hex:
                late.append(violation)
                continue
            attrs = _violation_attributes(violation)
            exchange_span.add_event("brownout.violation", attrs)
            if worst is None and violation.severity in ERROR_SEVERITIES:
                worst = violation
        status: Status | None = None
        if worst is not None:
            status = Status(StatusCode.ERROR, f"invariant {worst.invariant}: {worst.message}")
        elif exchange_span.failed:
            message = exchange_span.status_message or str(exchange_span.attributes.get("error.type", "error"))
            status = Status(StatusCode.ERROR, message)
        self._end(exchange_span, status)
        exchange_span.ended = True
        for violation in late:
            self.late_violation(violation)

    def _end(self, exchange_span: ExchangeSpan, status: Status | None) -> None:
        if exchange_span.opened is not None and self._emitter is not None:
            events = [(e.name, e.attributes, e.timestamp_ns) for e in exchange_span.events]
            self._emitter.end(
                exchange_span.opened,
                name=exchange_span.name,
                kind=SpanKind.CLIENT,
                events=events,
                status=status,
                start_ns=exchange_span.start_ns,
                end_ns=exchange_span.end_ns,
            )
        elif exchange_span.span is not None:
            if status is not None:
                exchange_span.span.set_status(status)
            exchange_span.span.end(end_time=exchange_span.end_ns)

    def late_violation(self, violation: ViolationLike) -> None:
        """A `brownout.violation {invariant}` span, child of the (already ended) span the violation is about:
        it shows under that exchange in a trace, at the time it was found."""
        try:
            parent_ctx = SpanContext(
                int(violation.trace_id or "", 16),
                int(violation.span_id or "", 16),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        except ValueError:
            return  # no valid ids to hang it under: the violation's own record still says what it is about
        now_ns = int(self._clock() * 1e9)
        attrs = _violation_attributes(violation)
        span = self._tracer.start_span(
            f"brownout.violation {violation.invariant}",
            context=trace.set_span_in_context(NonRecordingSpan(parent_ctx)),
            kind=SpanKind.INTERNAL,
            attributes={
                "brownout.session.id": violation.session_id,
                "brownout.exchange.id": violation.exchange_id or "",
                **attrs,
            },
            start_time=now_ns,
        )
        span.add_event("brownout.violation", attrs, now_ns)
        if violation.severity in ERROR_SEVERITIES:
            span.set_status(Status(StatusCode.ERROR, f"invariant {violation.invariant}: {violation.message}"))
        span.end(end_time=now_ns)

    def build(
        self,
        exchange: Exchange,
        violations: Sequence[ViolationLike] = (),
        *,
        check: Callable[[ExchangeSpan, Exchange], Sequence[ViolationLike]] | None = None,
    ) -> tuple[ExchangeSpan, list[ViolationLike]]:
        """start -> check(span, exchange) -> finish in one call; a check that raises still ends the span.

        Containing the check's errors is its own business (InvariantRunner contains through its guard)."""
        exchange_span = self.start(exchange)
        found: list[ViolationLike] = list(violations)
        try:
            if check is not None:
                found.extend(check(exchange_span, exchange))
        finally:
            self.finish(exchange_span, found)
        return exchange_span, found


def _violation_attributes(violation: ViolationLike) -> dict[str, Any]:
    return {
        "brownout.violation.invariant": violation.invariant,
        "brownout.violation.severity": violation.severity,
        "brownout.violation.message": violation.message,
    }


def _status_message(exchange: Exchange) -> str | None:
    """The MCP semantic conventions' status description: the JSON-RPC error's message, when it has one."""
    code = exchange.notes.get("jsonrpc_error_code") if exchange.provider == "mcp" else None
    if code is None or not exchange.error_message:
        return None
    return redact_keys(exchange.error_message[:_MAX_STATUS_CHARS])


def _failed(exchange: Exchange) -> bool:
    """5xx, 4xx, no response, or a provider error (e.g. a mid-stream error event after a 200).

    Follows the GenAI/HTTP-client semconv: status ERROR whenever error.type is set.
    """
    if exchange.error_type:
        return True
    if exchange.status is None:
        return exchange.timings.end is not None
    return exchange.status >= 400
