"""empty: an empty-but-valid completion in the provider's format, answered before upstream."""

from __future__ import annotations

from typing import Literal

from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond

__all__ = ["EmptyFault", "EmptyParams"]


class EmptyParams(FaultParams):
    """Parameters of the empty fault (none besides the type)."""

    type: Literal["empty"]


class EmptyFault(Fault):
    """Answers 200 with no content and no tool calls (the wire format builds the body)."""

    type = "empty"
    Params = EmptyParams
    params: EmptyParams

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        # The wire format knows the exchange's stream flag and answers SSE/NDJSON accordingly.
        headers, body = ctx.wire.empty_response(ctx.exchange)  # type: ignore[attr-defined]
        return Respond(200, dict(headers), body)
