"""latency: delay the request before forwarding, the response headers (time to first byte), or everything the
response stream carries (`events`: each chunk as it comes, order kept, as over a slow link; what a long-lived
stream such as an MCP `subscriptions/listen` or GET stream feels)."""

from __future__ import annotations

import logging
import math
import random
from typing import Literal

from pydantic import Field, model_validator

from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond, StreamTiming
from brownout.faults.events import EventAction

__all__ = ["LatencyFault", "LatencyParams", "sample_delay_s"]

log = logging.getLogger(__name__)

MAX_DELAY_MS = 3_600_000.0  # an hour: anything longer is a hang, not a latency


class LatencyParams(FaultParams):
    """Parameters of the latency fault."""

    type: Literal["latency"]
    delay_ms: float = Field(ge=0, le=MAX_DELAY_MS, description="Base delay in milliseconds.")
    jitter_ms: float = Field(
        0.0, ge=0, le=MAX_DELAY_MS, description="Spread in ms (uniform: +/-, normal/lognormal: std dev)."
    )
    # None: uniform when jitter_ms is set, else fixed.
    distribution: Literal["fixed", "uniform", "normal", "lognormal"] | None = None
    phase: Literal["request", "first_byte", "events"] = "request"

    @model_validator(mode="after")
    def _jitter_needs_a_distribution(self) -> LatencyParams:
        if self.distribution == "fixed" and self.jitter_ms > 0:
            raise ValueError("jitter_ms has no effect with distribution 'fixed'; use uniform, normal or lognormal")
        return self


def sample_delay_s(params: LatencyParams, rng: random.Random) -> float:
    """One delay in seconds drawn from the configured distribution; never negative."""
    d, j = params.delay_ms, params.jitter_ms
    dist = params.distribution or ("uniform" if j > 0 else "fixed")
    if dist == "fixed" or j == 0:
        ms = d
    elif dist == "uniform":
        ms = rng.uniform(d - j, d + j)
    elif dist == "normal":
        ms = rng.gauss(d, j)
    else:
        # Lognormal with mean delay_ms and std dev jitter_ms: long right tail, like real TTFT.
        if d == 0:
            return 0.0
        sigma2 = math.log1p((j / d) ** 2)
        ms = rng.lognormvariate(math.log(d) - sigma2 / 2, math.sqrt(sigma2))
    return max(0.0, min(ms, MAX_DELAY_MS)) / 1000.0


class LatencyFault(Fault):
    """Adds a sampled delay before the upstream call or before the response headers."""

    type = "latency"
    Params = LatencyParams
    params: LatencyParams

    async def _delay(self, ctx: FaultContext) -> None:
        delay_s = sample_delay_s(self.params, ctx.rng)
        ctx.extra["delay_s"] = delay_s  # the sampled value goes on the fault record
        await ctx.sleep(delay_s)

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        if self.params.phase == "request":
            await self._delay(ctx)
        return None

    async def on_response_headers(self, ctx: FaultContext, headers: dict[str, str]) -> None:
        if self.params.phase == "first_byte":
            await self._delay(ctx)

    def holds_response(self, ctx: FaultContext) -> bool:
        return self.params.phase == "first_byte"

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        # The event arrives later; those behind it in its direction keep their order (phase does not apply).
        delay_s = sample_delay_s(self.params, ctx.rng)
        ctx.extra["delay_s"] = delay_s
        return EventAction(delay_s=delay_s)

    def acts_on_handshake(self) -> bool:
        return self.params.phase != "events"  # a 101 has no body to delay

    def acts_before_upstream(self) -> bool:
        return self.params.phase != "first_byte"  # events: the relay paces the answer, chosen as the request goes

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        if self.params.phase != "events":
            return None
        delay_s = sample_delay_s(self.params, ctx.rng)  # once per exchange: every chunk gets the same
        ctx.extra["delay_s"] = delay_s
        return StreamTiming(event_delay_s=delay_s)
