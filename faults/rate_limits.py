"""rate_limits: a realtime session is told it has nothing left (OpenAI's `rate_limits.updated`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams, NotApplicable
from brownout.faults.events import EventAction

__all__ = ["RateLimitsFault", "RateLimitsParams"]


class RateLimitsParams(FaultParams):
    """Parameters of the rate_limits fault."""

    type: Literal["rate_limits"]
    reset_s: float = Field(60.0, gt=0, le=86_400, description="Seconds until the limits reset (reset_seconds).")
    limits: list[Literal["requests", "tokens"]] = Field(
        default_factory=lambda: ["requests", "tokens"],  # type: ignore[arg-type]  # pydantic: a list of the literals
        min_length=1,
        description="Which limits are used up.",
    )


class RateLimitsFault(Fault):
    """Sends a rate-limit update with nothing remaining: in place of the provider's own, else after the event."""

    type = "rate_limits"
    Params = RateLimitsParams
    params: RateLimitsParams

    def event_only(self) -> bool:
        return True

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        p = self.params
        out = event.codec.rate_limits_event(p.reset_s, tuple(dict.fromkeys(p.limits)))
        if out is None:
            raise NotApplicable(f"{event.codec.format.provider} sends no rate-limit updates")
        if event.type == "rate_limits.updated":
            return EventAction(replace=out)
        return EventAction(after=[out])
