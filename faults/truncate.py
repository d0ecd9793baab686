"""truncate: cut the response body at a byte count or fraction, or a stream after N events."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from brownout.core.wire.base import StreamEvent
from brownout.core.wire.framing import framer_for
from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import (
    CLOSE,
    RESET,
    Fault,
    FaultContext,
    FaultParams,
    NotApplicable,
    StreamEditor,
    StreamTiming,
)
from brownout.faults.events import EventAction, GenerationCut
from brownout.faults.streams import AfterEventsEditor, ByteCutEditor, edit_events_in_body

__all__ = ["TruncateFault", "TruncateParams"]


class TruncateParams(FaultParams):
    """Parameters of the truncate fault: exactly one of at_bytes, at_fraction, after_events."""

    type: Literal["truncate"]
    at_bytes: int | None = Field(None, ge=0, description="Body bytes delivered before the cut.")
    at_fraction: float | None = Field(None, ge=0, lt=1, description="Fraction of the body delivered (0..1).")
    after_events: int | None = Field(None, ge=0, description="Streams: data events delivered before the cut.")
    close: Literal["clean", "reset"] = Field("clean", description="End the body cleanly (FIN) or reset (RST).")
    status: Literal["incomplete", "failed"] | None = Field(
        None,
        description="WebSocket events: how the generation ends early (response.done status; default incomplete).",
    )

    @model_validator(mode="after")
    def _exactly_one_cut(self) -> TruncateParams:
        given = [n for n in ("at_bytes", "at_fraction", "after_events") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of at_bytes, at_fraction, after_events (got {given or 'none'})")
        if self.status is not None and self.after_events is None:
            raise ValueError("status applies to WebSocket events, which are cut with after_events")
        return self


class _EventCut(AfterEventsEditor):
    """Ends the stream after N data events, or at the terminal event, whichever comes first."""

    def __init__(self, ctx: FaultContext, after_events: int, how: str) -> None:
        super().__init__(ctx.wire, after_events)
        self.how = how

    def fire(self, event: StreamEvent) -> list[bytes] | str:
        return self.how

    def after_fire(self, event: StreamEvent) -> list[bytes] | str:
        return self.how


def _content_length(ctx: FaultContext) -> int | None:
    value = ctx.exchange.response_headers.get("content-length")
    return int(value) if value and value.isdigit() else None


class TruncateFault(Fault):
    """Cuts the body short; streams lose their terminal event ([DONE], message_stop, done:true)."""

    type = "truncate"
    Params = TruncateParams
    params: TruncateParams

    def _how(self) -> str:
        return RESET if self.params.close == "reset" else CLOSE

    def acts_before_upstream(self) -> bool:
        return self.params.close == "reset"  # a reset goes through the tap's byte count, chosen as the request goes

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        p = self.params
        if p.close != "reset":
            return None
        if p.at_bytes is not None:
            return StreamTiming(reset_after_bytes=p.at_bytes)  # the tap cuts exactly, then RSTs
        if p.at_fraction is not None:
            return StreamTiming()  # no pacing: forces the body through the tap so the editor can reset
        return None

    def wants_body(self, ctx: FaultContext) -> bool:
        return self.params.close == "clean" or self.params.after_events is not None

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        p = self.params
        if p.after_events is not None:
            if framer_for(ctx.exchange.content_type) is None:
                raise NotApplicable("after_events needs an event stream")
            return _EventCut(ctx, p.after_events, self._how())
        if p.at_bytes is not None:
            return None if p.close == "reset" else ByteCutEditor(p.at_bytes, CLOSE)
        total = _content_length(ctx)
        if total is None:
            # A chunked stream has no known length: a fraction of it is undefined.
            raise NotApplicable("at_fraction of a streamed body needs its content-length")
        # The reset follows the next chunk; a body that ends with the cut chunk ends cleanly.
        return ByteCutEditor(int(total * (p.at_fraction or 0.0)), self._how())

    def event_problem(self) -> str | None:
        p = self.params
        if p.after_events is None:
            return "on WebSocket events truncate cuts a generation with after_events (not at_bytes or at_fraction)"
        return (
            "on WebSocket events truncate ends the generation itself: leave close out" if p.close != "clean" else None
        )

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        # The generation ends early: `after_events` more of its events (the matched one first) get
        # through, then the provider's early end (response.done incomplete or failed) replaces the rest.
        gen = event.generation
        if gen is None or gen.done:
            raise NotApplicable(f"{event.type or 'the event'} belongs to no generation in progress")
        end = event.codec.cut_event(gen, self.params.status or "incomplete")
        return EventAction(cut=GenerationCut(gen, end, self.params.after_events or 0))

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        p = self.params
        if p.at_bytes is not None:
            return body[: p.at_bytes]
        if p.at_fraction is not None:
            return body[: int(len(body) * p.at_fraction)]
        ct = headers.get("content-type", ctx.exchange.content_type)
        cut = edit_events_in_body(_EventCut(ctx, p.after_events or 0, CLOSE), body, ct)
        if cut is None:
            raise NotApplicable("after_events needs an event stream")
        return cut
