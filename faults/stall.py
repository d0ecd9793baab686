"""stall: pause a streamed response after N events, as a model that stops mid-answer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.faults.base import Fault, FaultContext, FaultParams, StreamTiming

__all__ = ["StallFault", "StallParams"]


class StallParams(FaultParams):
    """Parameters of the stall fault."""

    type: Literal["stall"]
    after_events: int = Field(
        1,
        ge=0,
        description="SSE/NDJSON events that carry data delivered before the pause (keep-alive comments do not "
        "count); 0 pauses before the first event, right after the response headers.",
    )
    pause_ms: float = Field(gt=0, le=3_600_000, description="Length of the pause in milliseconds.")


class StallFault(Fault):
    """Pauses an event stream after `after_events` events for `pause_ms`.

    Non-streamed (buffered) bodies have no events, so the relay applies no pause to them.
    """

    type = "stall"
    Params = StallParams
    params: StallParams

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        return StreamTiming(pause_after_events=self.params.after_events, pause_s=self.params.pause_ms / 1000.0)
