"""The mock upstream's WebSocket endpoints: the upgrade answered by hand (brownout.proxy.wssession frames)."""

from __future__ import annotations

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.wssession import WsClosed, WsSession, switching_protocols

__all__ = ["WsClosed", "WsSession", "accept"]


def accept(req: Request, resp: Responder) -> WsSession | None:
    """Answer a WebSocket upgrade (101) and return the session; None (after a 400) when it is not one."""
    key = req.headers.get("sec-websocket-key")
    if req.headers.get("upgrade", "").lower() != "websocket" or not key:
        resp.send(400, b'{"error":{"message":"expected a WebSocket upgrade","type":"invalid_request_error"}}')
        return None
    reader, writer = resp.hijack()
    writer.write(switching_protocols(key))
    return WsSession(reader, writer)
