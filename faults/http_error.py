"""http_error: the provider's real error response, before upstream or mid-stream."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from brownout.core.wire.base import StreamEvent, WireFormat
from brownout.core.wire.realtime import CloseSpec, RealtimeEvent
from brownout.faults.base import CLOSE, Fault, FaultContext, FaultParams, Hang, Reset, Respond, StreamEditor
from brownout.faults.events import CloseAction, EventAction
from brownout.faults.streams import AfterEventsEditor

__all__ = ["HttpErrorFault", "HttpErrorParams"]

log = logging.getLogger(__name__)


class HttpErrorParams(FaultParams):
    """Parameters of the http_error fault."""

    type: Literal["http_error"]
    status: int = Field(
        500,
        ge=400,
        le=599,
        description="HTTP status; mid-stream the stream stays a 200, and only Bedrock picks its exception by it.",
    )
    error_type: str | None = Field(None, description="Overrides the provider error type, e.g. insufficient_quota.")
    retry_after_s: float | None = Field(None, ge=0, description="Sent as retry-after (and the provider's variants).")
    message: str | None = Field(None, description="Error message; absent: the provider's usual text.")
    mid_stream: bool = Field(False, description="Let a 200 stream start, then emit the provider's error event.")
    after_events: int = Field(0, ge=0, description="mid_stream: data events delivered before the error event.")


class _ErrorEventEditor(AfterEventsEditor):
    """Emits the provider's stream error event after N events, then closes."""

    def __init__(self, wire: WireFormat, after_events: int, error_event: bytes) -> None:
        super().__init__(wire, after_events)
        self.error_event = error_event

    def fire(self, event: StreamEvent) -> list[bytes] | str:
        return [self.error_event]

    def after_fire(self, event: StreamEvent) -> list[bytes] | str:
        return CLOSE  # providers close the stream after an error event

    def fire_at_end(self) -> list[bytes]:
        return [self.error_event]


class HttpErrorFault(Fault):
    """Answers with the provider's error body and headers, or emits its error event mid-stream."""

    type = "http_error"
    Params = HttpErrorParams
    params: HttpErrorParams

    def _mid_stream(self, ctx: FaultContext) -> bool:
        # A non-streamed request has no stream to break: answer the error up front instead.
        return self.params.mid_stream and ctx.exchange.stream

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        if self._mid_stream(ctx):
            return None
        p = self.params
        status, headers, body = ctx.wire.error_response(  # type: ignore[attr-defined]
            p.status, error_type=p.error_type, message=p.message, retry_after_s=p.retry_after_s, exchange=ctx.exchange
        )
        return Respond(status, dict(headers), body)

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        if not self._mid_stream(ctx):
            return None
        p = self.params
        by_status = getattr(ctx.wire, "status_error_event", None)  # ProviderFormat's; a bare WireFormat has none
        if by_status is not None:
            event = by_status(p.status, error_type=p.error_type, message=p.message, exchange=ctx.exchange)
        else:
            event = ctx.wire.stream_error_event(error_type=p.error_type, message=p.message, exchange=ctx.exchange)  # type: ignore[attr-defined]
        return _ErrorEventEditor(ctx.wire, p.after_events, event)

    def event_problem(self) -> str | None:
        if not self.params.mid_stream:
            return (
                "on WebSocket events http_error needs mid_stream: true (the provider's error in the session); "
                "to refuse the upgrade itself, leave match.event and match.direction out"
            )
        return None

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        # The provider's error in place of the event: an error event (OpenAI), or a close (Gemini Live).
        p = self.params
        out = event.codec.error_event(p.status, p.error_type, p.message)
        if isinstance(out, CloseSpec):
            return EventAction(drop=True, close=CloseAction(out))
        return EventAction(replace=out)
