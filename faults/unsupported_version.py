"""unsupported_version: a 2026-07-28 server does not serve the request's protocol version (code -32022, HTTP
400 over HTTP, `data` naming the versions it does serve): a server rolled back, or one that dropped the
revision the client pinned. A client in the SDK's `auto` mode that meets it on `server/discover` falls back
to the handshake era when `supported` names a handshake version; a pinned client raises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from brownout.core.wire.mcp_eras import HANDSHAKE, MODERN
from brownout.core.wire.mcp_faults import unsupported_version
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, NotApplicable, Reset, Respond

__all__ = ["UnsupportedVersionFault", "UnsupportedVersionParams"]


class UnsupportedVersionParams(FaultParams):
    """Parameters of the unsupported_version fault."""

    type: Literal["unsupported_version"]
    supported: list[str] = Field(
        default_factory=lambda: ["2025-11-25"],
        min_length=1,
        description="The versions the server says it serves (absent: only the last handshake-era one).",
    )


class UnsupportedVersionFault(Fault):
    """Answers a 2026-07-28 request with the server's UNSUPPORTED_PROTOCOL_VERSION error."""

    type = "unsupported_version"
    Params = UnsupportedVersionParams
    params: UnsupportedVersionParams
    mcp_eras_refused: ClassVar[Mapping[str, str]] = {
        HANDSHAKE: "the handshake era agrees on a version in initialize: a server answers with one it supports, "
        "never with this error"
    }

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        ex = ctx.exchange
        if ex.provider != "mcp" or ex.mcp_era != MODERN:
            raise NotApplicable("only a 2026-07-28 MCP request names its version in an envelope")
        if "jsonrpc_id" not in ex.notes:
            raise NotApplicable("a notification gets no answer")
        if ex.notes.get("mcp_protocol_version") in self.params.supported:
            raise NotApplicable("the request's version is one `supported` names")
        status, headers, body = unsupported_version(ex, self.params.supported)
        return Respond(status if ex.transport == "http" else 200, headers, body)
