"""Per-minute request and token quotas: the provider 429 a quota rule answers with.

The counting (`QuotaWindow`: fixed 60 s buckets aligned to the schedule's origin, only requests the
quota let through count, tokens added when the exchange finishes) is a schedule store's: see
brownout.core.state.schedule_memory, and schedule_redis for a fleet's shared windows.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

from brownout.core.state.schedule_memory import WINDOW_S, QuotaWindow
from brownout.faults.base import Fault, FaultContext, FaultParams, Respond

__all__ = ["WINDOW_S", "QuotaExceeded", "QuotaParams", "QuotaWindow"]

log = logging.getLogger(__name__)


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
