"""header_mismatch: a 2026-07-28 server refuses the request because a routing header disagrees with its body
(code -32020, HTTP 400, the SDK servers' message for that header). What an intermediary that rewrites or
drops headers causes, and what a client whose tool listing is stale meets: the SDK client re-lists its tools
and sends the call once more."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from brownout.core.wire.mcp_eras import HANDSHAKE, MODERN
from brownout.core.wire.mcp_faults import header_mismatch
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, NotApplicable, Reset, Respond

__all__ = ["HeaderMismatchFault", "HeaderMismatchParams"]


class HeaderMismatchParams(FaultParams):
    """Parameters of the header_mismatch fault."""

    type: Literal["header_mismatch"]
    header: Literal["mcp-method", "mcp-name", "mcp-protocol-version"] = Field(
        "mcp-method", description="The header the server finds at odds with the body."
    )


class HeaderMismatchFault(Fault):
    """Answers a 2026-07-28 request with the server's HEADER_MISMATCH error."""

    type = "header_mismatch"
    Params = HeaderMismatchParams
    stdio_refused: ClassVar[str | None] = "stdio carries no headers"
    params: HeaderMismatchParams
    mcp_eras_refused: ClassVar[Mapping[str, str]] = {
        HANDSHAKE: "handshake-era requests carry no Mcp-Method or Mcp-Name to disagree with their body"
    }

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        ex = ctx.exchange
        if ex.provider != "mcp" or ex.mcp_era != MODERN:
            raise NotApplicable("only a 2026-07-28 MCP request has routing headers")
        if ex.transport != "http":
            raise NotApplicable("stdio carries no headers")
        if "jsonrpc_id" not in ex.notes:
            raise NotApplicable("a notification gets no answer")
        answer = header_mismatch(ex, self.params.header)
        if answer is None:
            raise NotApplicable(f"{ex.mcp_method} names nothing in Mcp-Name")
        return Respond(*answer)
