"""A test-only brownout plugin whose every component raises on purpose (see proxy.plugins).

Each plugin object below adds one failing component, so a test loads exactly the one it
exercises (`plugins: ["tests.reliability.failing_plugin:faults_plugin"]`):

- `faults_plugin`: fault type `explode`; `phase` picks where it raises.
- `invariants_plugin`: invariant type `explode`; raises in check_span or check_session.
- `exporter_plugin`: exporter `exploding`, raising in every hook.
- `span_plugin`: a span processor raising when a span starts or ends (makes the span builder raise).
- `wire_plugin`: wire format `garbage`, claiming requests with an `x-garbage-wire: <mode>` header
  and raising in the parser step the mode names (or reporting garbage usage: mode `usage`).
- `buggy_wire_plugin`: wire format `buggy`, a `ProviderFormat` claiming requests with an
  `x-buggy-wire: <hook>` header, whose decoding hook (`request`, `response`, `stream`,
  `stream_end`) has a bug: it raises inside the boundary that turns malformed bytes into a parse
  error, which must not take a bug for them.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from brownout.core.exchange import Exchange
from brownout.core.spans import ExchangeSpan
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat
from brownout.core.wire.generic import GenericFormat
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond, StreamEditor, StreamTiming
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = [
    "BUGGY_WIRE_HEADER",
    "FAULT_PHASES",
    "BuggyFormat",
    "ExplodeFault",
    "ExplodeInvariant",
    "ExplodingExporter",
    "ExplodingSpanProcessor",
    "GarbageFormat",
    "Planted",
    "buggy_wire_plugin",
    "exporter_plugin",
    "faults_plugin",
    "invariants_plugin",
    "span_plugin",
    "wire_plugin",
]

log = logging.getLogger(__name__)

Phase = Literal[
    "describe",
    "before_upstream",
    "response_headers",
    "wants_body",
    "body",
    "stream_editor",
    "stream_event",
    "stream_end",
    "stream_timing",
]
FAULT_PHASES: tuple[str, ...] = Phase.__args__  # type: ignore[attr-defined]


class Planted(RuntimeError):
    """The deliberate failure: tests tell it apart from real bugs by type."""


# --- fault ----------------------------------------------------------------------------


class ExplodeParams(FaultParams):
    type: Literal["explode"]
    phase: Phase = "before_upstream"


class _ExplodingEditor(StreamEditor):
    def __init__(self, phase: str) -> None:
        self.phase = phase

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        if self.phase == "stream_event":
            raise Planted("fault stream editor: on_event")
        return [event.raw]

    def on_end(self) -> list[bytes]:
        raise Planted("fault stream editor: on_end")


class ExplodeFault(Fault):
    """Raises in the phase its `phase` parameter names; does nothing anywhere else."""

    type = "explode"
    Params = ExplodeParams

    @property
    def phase(self) -> str:
        return self.params.phase  # type: ignore[attr-defined,no-any-return]

    def _maybe(self, phase: str) -> None:
        if self.phase == phase:
            raise Planted(f"fault phase {phase}")

    def describe(self) -> dict[str, Any]:
        self._maybe("describe")
        return super().describe()

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        self._maybe("before_upstream")
        return None

    async def on_response_headers(self, ctx: FaultContext, headers: dict[str, str]) -> None:
        self._maybe("response_headers")

    def wants_body(self, ctx: FaultContext) -> bool:
        self._maybe("wants_body")
        return self.phase == "body"

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        self._maybe("body")
        return body

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        self._maybe("stream_editor")
        return _ExplodingEditor(self.phase) if self.phase in ("stream_event", "stream_end") else None

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        self._maybe("stream_timing")
        return None


# --- invariant ------------------------------------------------------------------------


class ExplodeConfig(InvariantConfigBase):
    type: Literal["explode"]
    where: Literal["span", "session"] = "span"


class ExplodeInvariant(Invariant[ExplodeConfig]):
    """Raises in check_span or check_session (config `where`)."""

    type = "explode"
    Config = ExplodeConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        if self.config.where == "span":
            raise Planted("invariant check_span")
        return []

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        if self.config.where == "session":
            raise Planted("invariant check_session")
        return []


# --- exporters ------------------------------------------------------------------------


class ExplodingExporter:
    """An exporter raising in every hook the hub calls."""

    name = "exploding"

    def on_exchange(self, exchange: Exchange, violations: list[Any]) -> None:
        raise Planted("exporter on_exchange")

    def on_violation(self, violation: Any) -> None:
        raise Planted("exporter on_violation")

    def on_decision(self, decision: Any) -> None:
        raise Planted("exporter on_decision")

    def shutdown(self) -> None:
        raise Planted("exporter shutdown")


class ExplodingSpanProcessor(SpanProcessor):
    """Raises as the span builder starts a span (and, should that be survived, as it ends one)."""

    name = "exploding_spans"

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise Planted("span processor on_start")

    def on_end(self, span: ReadableSpan) -> None:
        raise Planted("span processor on_end")


# --- wire format ----------------------------------------------------------------------

WIRE_HEADER = "x-garbage-wire"


class _GarbageStreamParser(StreamParser):
    def __init__(self, exchange: Exchange, mode: str) -> None:
        super().__init__(exchange)
        self.mode = mode

    def feed(self, event: StreamEvent) -> None:
        if self.mode == "stream":
            raise Planted(f"wire stream feed of {event.raw[:20]!r}")

    def finish(self) -> None:
        if self.mode == "stream_end":
            raise Planted("wire stream finish")


class GarbageFormat(GenericFormat):
    """Claims requests carrying `x-garbage-wire: <mode>` and mishandles them as the mode says."""

    provider = "garbage"  # type: ignore[assignment]

    @staticmethod
    def _mode(exchange: Exchange) -> str:
        return exchange.request_headers.get(WIRE_HEADER, "")

    def recognise(self, req: RequestInfo) -> str:  # type: ignore[override]
        mode = req.headers.get(WIRE_HEADER)
        if mode == "recognise":
            raise Planted("wire recognise")
        return "execute_tool" if mode else None  # type: ignore[return-value]

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        if self._mode(exchange) == "request":
            raise Planted("wire parse_request")
        super().parse_request(exchange, body)

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        mode = self._mode(exchange)
        if mode == "response":
            raise Planted("wire parse_response")
        super().parse_response(exchange, body)
        if mode == "usage":  # believes whatever the garbage says: a negative token count
            exchange.usage.input_tokens = -7

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return _GarbageStreamParser(exchange, self._mode(exchange))


BUGGY_WIRE_HEADER = "x-buggy-wire"


def _buggy_hook(exchange: Exchange, hook: str) -> None:
    if exchange.request_headers.get(BUGGY_WIRE_HEADER) == hook:
        raise Planted(f"wire {hook} hook")


class _BuggyStreamParser(BaseStreamParser):
    def _feed(self, event: StreamEvent) -> None:
        _buggy_hook(self.exchange, "stream")

    def _finish(self) -> None:
        _buggy_hook(self.exchange, "stream_end")


class BuggyFormat(ProviderFormat):
    """Parses JSON bodies like any provider format, with a bug in the hook `x-buggy-wire` names."""

    provider = "buggy"

    def recognise(self, req: RequestInfo) -> str | None:
        return "chat" if req.headers.get(BUGGY_WIRE_HEADER) else None

    def _request(self, exchange: Exchange, data: Any) -> None:
        _buggy_hook(exchange, "request")

    def _response(self, exchange: Exchange, data: Any) -> None:
        _buggy_hook(exchange, "response")

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return _BuggyStreamParser(exchange)


class _Plugin:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


faults_plugin = _Plugin(faults=[ExplodeFault])
invariants_plugin = _Plugin(invariants=[ExplodeInvariant])
exporter_plugin = _Plugin(exporters=[ExplodingExporter])
span_plugin = _Plugin(exporters=[ExplodingSpanProcessor])
wire_plugin = _Plugin(wire_formats=[GarbageFormat()])
buggy_wire_plugin = _Plugin(wire_formats=[BuggyFormat()])
