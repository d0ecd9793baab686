"""Per-minute request and token quotas, and the provider 429 a quota rule answers with.

Windows are fixed 60 s buckets aligned to the schedule's origin (proxy start or
`starts_at`), so replicas started with the same `starts_at` roll over together. Only
requests the quota let through count: a request answered with 429 consumes nothing, as
with real provider rate limits. Tokens (input + output from `exchange.usage`) are added
when the exchange finishes.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Literal

from brownout.faults.base import Fault, FaultContext, FaultParams, Respond
from brownout.faults.config import QuotaConfig

__all__ = ["WINDOW_S", "QuotaExceeded", "QuotaParams", "QuotaWindow"]

log = logging.getLogger(__name__)

WINDOW_S = 60.0


class QuotaWindow:
    """Request and token counts in the current minute of one scope."""

    __slots__ = ("_origin", "config", "requests", "start", "tokens")

    def __init__(self, config: QuotaConfig, origin: float) -> None:
        self.config = config
        self._origin = origin
        self.start = origin
        self.requests = 0
        self.tokens = 0

    def _roll(self, now: float) -> None:
        if now >= self.start + WINDOW_S or now < self.start:
            self.start = self._origin + math.floor((now - self._origin) / WINDOW_S) * WINDOW_S
            self.requests = 0
            self.tokens = 0

    def exceeded(self, now: float) -> int | None:
        """Seconds until the window resets (>= 1) when the quota is used up, else None."""
        self._roll(now)
        c = self.config
        full = (c.requests_per_min is not None and self.requests >= c.requests_per_min) or (
            c.tokens_per_min is not None and self.tokens >= c.tokens_per_min
        )
        if not full:
            return None
        return max(1, math.ceil(self.start + WINDOW_S - now))

    def admit(self, now: float) -> None:
        self._roll(now)
        self.requests += 1

    def add_tokens(self, now: float, tokens: int) -> None:
        # Tokens land in the window in which the response finished.
        if tokens > 0:
            self._roll(now)
            self.tokens += tokens

    def describe(self) -> dict[str, int | float]:
        return {"window_start": self.start, "requests": self.requests, "tokens": self.tokens}


class QuotaParams(FaultParams):
    """Parameters of the built-in quota 429 (not user-selectable; not in the registry)."""

    type: Literal["quota"] = "quota"
    retry_after_s: int = 1


class QuotaExceeded(Fault):
    """The provider's own 429 for an exceeded quota, with retry-after set to the window's end."""

    type = "quota"
    Params = QuotaParams

    async def before_upstream(self, ctx: FaultContext) -> Respond:
        retry = int(getattr(self.params, "retry_after_s", 1))
        wire = ctx.wire
        if wire is not None and hasattr(wire, "error_response"):
            status, headers, body = wire.error_response(429, retry_after_s=retry, exchange=ctx.exchange)
            return Respond(status, dict(headers), body)
        # No provider format: a plain JSON 429 still tells any client when to retry.
        body = json.dumps({"error": {"message": "Rate limit exceeded (brownout quota)", "type": "rate_limit"}})
        return Respond(429, {"content-type": "application/json", "retry-after": str(retry)}, body.encode())
