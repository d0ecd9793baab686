"""session_expired: an MCP server forgets the client's session, as servers do when they restart or time a
session out. It answers the request with the 404 servers send for a session they do not know, and every
later request of that session gets the same, whatever the rule's match and schedule say: an expired
session stays expired, and the session's open GET stream ends. What the client does next (a new `initialize` without the old id, or the dead id
again, how soon and how often) is what a test of it looks at (`mcp_reconnect_discipline`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from brownout.core.exchange import Exchange
from brownout.core.wire.mcp_eras import MODERN
from brownout.core.wire.mcp_faults import SESSION_NOT_FOUND, session_not_found
from brownout.faults.base import Fault, FaultContext, FaultParams, Hang, NotApplicable, Reset, Respond

__all__ = ["SessionExpiredFault", "SessionExpiredParams"]

_EXPIRED = "expired"  # rule memory: the MCP session ids this rule expired, oldest first
_KEPT = 4096
_NO_SESSIONS = "the 2026-07-28 revision has no sessions to expire"


class SessionExpiredParams(FaultParams):
    """Parameters of the session_expired fault."""

    type: Literal["session_expired"]
    code: int = Field(
        -32001, description="The JSON-RPC error code: -32001 as the TypeScript SDK's servers send, -32600 as Python's."
    )
    message: str = Field(SESSION_NOT_FOUND, min_length=1, description="The error message.")


class SessionExpiredFault(Fault):
    """Answers 404 for the request's MCP session, and for every later request of that session."""

    type = "session_expired"
    Params = SessionExpiredParams
    stdio_refused: ClassVar[str | None] = (
        "a stdio server has no session to expire: its process is the session (see server_gone)"
    )
    params: SessionExpiredParams
    mcp_eras_refused: ClassVar[Mapping[str, str]] = {MODERN: _NO_SESSIONS}

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        session = _session(ctx.exchange)
        expired: OrderedDict[str, float] = ctx.rule_memory.setdefault(_EXPIRED, OrderedDict())
        expired.setdefault(session, ctx.now)
        while len(expired) > _KEPT:
            expired.popitem(last=False)
        status, headers, body = session_not_found(self.params.code, self.params.message)
        return Respond(status, headers, body)

    def cuts_streams(self, ctx: FaultContext) -> str | None:
        return "session"  # a server that forgot the session ends its GET stream too

    @classmethod
    def follows_up(cls, memory: dict[str, Any], exchange: Exchange, now: float) -> str | None:
        session = exchange.notes.get("mcp_session_id") if exchange.provider == "mcp" else None
        if session and session in memory.get(_EXPIRED, ()):
            return "its MCP session expired earlier: the server answers 404 for it from then on"
        return None


def _session(exchange: Exchange) -> str:
    """The MCP session the request belongs to; NotApplicable for a request that has none."""
    if exchange.provider != "mcp":
        raise NotApplicable("not an MCP request")
    if exchange.transport == "stdio":
        raise NotApplicable("a stdio server has no session to expire: its process is the session (see server_gone)")
    if exchange.mcp_era == MODERN:
        raise NotApplicable(_NO_SESSIONS)
    session = exchange.notes.get("mcp_session_id")
    if not isinstance(session, str) or not session:
        raise NotApplicable("the request carries no Mcp-Session-Id (an initialize starts one)")
    return session
