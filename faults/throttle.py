"""throttle: deliver the response body at a fixed rate (slow drip)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.faults.base import Fault, FaultContext, FaultParams, StreamTiming

__all__ = ["ThrottleFault", "ThrottleParams"]


class ThrottleParams(FaultParams):
    """Parameters of the throttle fault."""

    type: Literal["throttle"]
    bytes_per_s: float = Field(gt=0, le=1e10, description="Delivery rate of the response body in bytes per second.")


class ThrottleFault(Fault):
    """Paces the response body (streamed or buffered) through the proxy's relay."""

    type = "throttle"
    Params = ThrottleParams
    params: ThrottleParams

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        # Buffered bodies too: the proxy hands them to the relay, which paces the bytes.
        return StreamTiming(bytes_per_s=self.params.bytes_per_s)
