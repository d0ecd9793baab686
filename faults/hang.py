"""hang: hold the request without answering, then reset (or until the client gives up)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond

__all__ = ["HangFault", "HangParams"]


class HangParams(FaultParams):
    """Parameters of the hang fault."""

    type: Literal["hang"]
    duration_ms: float | None = Field(None, ge=0, description="How long to hold; absent: until the client gives up.")


class HangFault(Fault):
    """Holds the request (upstream is never contacted); the proxy resets it afterwards."""

    type = "hang"
    Params = HangParams
    params: HangParams

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        ms = self.params.duration_ms
        return Hang(None if ms is None else ms / 1000.0)
