"""reset: the client sees a connection reset, before any response or partway through the body."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond, StreamTiming
from brownout.faults.events import EventAction

__all__ = ["ResetFault", "ResetParams"]


class ResetParams(FaultParams):
    """Parameters of the reset fault."""

    type: Literal["reset"]
    phase: Literal["request", "mid_body"] = "request"
    after_bytes: int | None = Field(None, ge=0, description="mid_body: body bytes delivered before the reset.")

    @model_validator(mode="after")
    def _after_bytes_with_mid_body(self) -> ResetParams:
        if self.phase == "mid_body" and self.after_bytes is None:
            raise ValueError("after_bytes is required when phase is mid_body")
        if self.phase == "request" and self.after_bytes is not None:
            raise ValueError("after_bytes only applies to phase mid_body")
        return self


class ResetFault(Fault):
    """Resets the connection (TCP RST) before the request is forwarded or after N body bytes."""

    type = "reset"
    Params = ResetParams
    params: ResetParams

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        return Reset() if self.params.phase == "request" else None

    def acts_on_handshake(self) -> bool:
        return self.params.phase == "request"  # a 101 has no body to reset in

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        # Streamed and buffered bodies alike: the relay counts delivered bytes and resets.
        if self.params.phase == "mid_body":
            return StreamTiming(reset_after_bytes=self.params.after_bytes)
        return None

    def event_problem(self) -> str | None:
        return "on WebSocket events reset takes no phase: mid_body" if self.params.phase != "request" else None

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        # The connection drops where the event would have crossed it: the client sees 1006.
        return EventAction(drop=True, reset=True)
