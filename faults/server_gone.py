"""server_gone: the server stops answering mid-session, as a crashed or redeployed MCP server does. Over HTTP
the request's connection is reset, the streams clients have open to the server (an MCP GET stream, a listen
stream) are cut, and every later request to it is reset too, whatever the rule's match and schedule say,
for `down_s` (or the rest of the run); on stdio the server's process group is ended. What the client does
next (reconnect at once or back off, give up, or keep calling) is what `mcp_reconnect_discipline` judges."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from brownout.core.exchange import Exchange
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, Reset, Respond

__all__ = ["ServerGoneFault", "ServerGoneParams"]

_GONE = "gone"  # rule memory: upstream -> until when it stays gone
_KEPT = 1024


class ServerGoneParams(FaultParams):
    """Parameters of the server_gone fault."""

    type: Literal["server_gone"]
    down_s: float | None = Field(
        None, gt=0, description="How long the server stays gone after the rule fires; absent: for the rest of the run."
    )


class ServerGoneFault(Fault):
    """Resets the request and every later one to the same server; cuts its open streams."""

    type = "server_gone"
    Params = ServerGoneParams
    params: ServerGoneParams

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        gone: dict[str, float] = ctx.rule_memory.setdefault(_GONE, {})
        if ctx.exchange.upstream not in gone:
            down = self.params.down_s
            gone[ctx.exchange.upstream] = math.inf if down is None else ctx.now + down
            while len(gone) > _KEPT:
                del gone[next(iter(gone))]
        return Reset()

    def cuts_streams(self, ctx: FaultContext) -> str | None:
        return "server"

    @classmethod
    def follows_up(cls, memory: dict[str, Any], exchange: Exchange, now: float) -> str | None:
        gone: dict[str, float] | None = memory.get(_GONE)
        until = gone.get(exchange.upstream) if gone is not None else None
        if gone is None or until is None:
            return None
        if now >= until:
            del gone[exchange.upstream]  # back up: the schedule decides again
            return None
        return "its server went away earlier and is not back yet"
