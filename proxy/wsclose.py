"""Sending WebSocket messages of brownout's own, and ending a session with a chosen close code.

mitmproxy's public API can inject a message (`inject.websocket`) but not close a WebSocket with a
code of the addon's choosing (mitmproxy issue 4773), and `flow.kill()` is not honoured for
WebSockets (issue 4711). The route used here is mitmproxy's own close path: its WebSocket layer
closes both sides, with the code and reason, when the server-side wsproto connection yields a
`CloseConnection` event. brownout injects an empty message towards the client (the anchor), and
when the anchor's `websocket_message` hook runs (the layer paused in the middle of its loop over
that connection's events) it drops the anchor and appends the close to the same event queue
mitmproxy's injection extends (`server_ws._events`). When the hook returns the layer takes the
close for the server's: the client gets the code and reason, the upstream the same close frame,
`websocket_end` fires with them. Internal API of mitmproxy 12.2 (pinned in pyproject.toml);
tests/proxy/test_realtime_close.py holds it to its word with a real client.

mitmproxy closes the client's connection the moment that close frame is written. A client that was sending
at that instant (a tool result, `response.create`) then meets an RST, and its kernel drops the close frame
unread: the SDK reports 1006, not the provider's code. A server ends the closing handshake as RFC 6455
section 7.1.1 has it instead, and so does brownout: it half-closes, reads what the client still sends, and
closes once the client has (or after `CLOSE_GRACE_S`).

A reset drops the client's TCP connection with an RST (proxy/connkill.py): the client sees 1006.
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.proxy.layers.websocket import WebsocketLayer
from mitmproxy.websocket import WebSocketMessage
from wsproto.events import CloseConnection

from brownout.core.wire.realtime import CloseSpec, WsOut
from brownout.proxy.connkill import connection_handler, drop_client, walk_layers

__all__ = ["ANCHOR", "CLOSE_GRACE_S", "close_at_anchor", "end_client", "inject", "inject_anchor", "reset"]

log = logging.getLogger(__name__)

ANCHOR = b""  # the content of the injected message a close rides on (never delivered)
CLOSE_GRACE_S = 2.0  # how long a client has to answer brownout's close frame before its connection is closed


def inject(flow: http.HTTPFlow, out: WsOut, *, to_client: bool) -> None:
    """Send `out` to one side; its websocket_message hook fires with `injected` set."""
    ctx.master.commands.call("inject.websocket", flow, to_client, out.content, out.is_text)


def inject_anchor(flow: http.HTTPFlow) -> None:
    """The message a close rides on: `close_at_anchor` runs when its hook does."""
    ctx.master.commands.call("inject.websocket", flow, True, ANCHOR, True)


def _websocket_layer(flow: http.HTTPFlow) -> Any:
    handler = connection_handler(flow)
    if handler is None:
        return None
    for layer in walk_layers(handler.layer):
        if isinstance(layer, WebsocketLayer) and layer.flow is flow:
            return layer
    return None


def close_at_anchor(flow: http.HTTPFlow, message: WebSocketMessage, spec: CloseSpec) -> bool:
    """From the anchor's websocket_message hook: drop it and have mitmproxy close the session with
    `spec`. False when the layer cannot be found (the caller then drops the connection instead)."""
    handler = connection_handler(flow)
    layer = _websocket_layer(flow)
    server_ws = getattr(layer, "server_ws", None)
    events = getattr(server_ws, "_events", None)
    if events is None or handler is None:
        return False
    message.drop()
    _linger_on_close(handler)
    events.append(CloseConnection(spec.code, spec.reason))
    return True


def _linger_on_close(handler: Any) -> None:
    """The next full close of the handler's client connection becomes a half-close (the close frame, TLS's
    close_notify and a FIN go out; what the client still sends is read and ignored), and the full close
    follows when the client closes its side, or when the realtime addon's `end_client` runs CLOSE_GRACE_S
    after the session's end."""
    original = handler.close_connection
    client = handler.client

    def close_connection(connection: Any, half_close: bool = False) -> None:
        if connection is not client or half_close:
            original(connection, half_close)
            return
        handler.close_connection = original  # once
        original(connection, True)

    handler.close_connection = close_connection


def end_client(flow: http.HTTPFlow) -> bool:
    """Close the client's connection with a FIN; False when it is gone already."""
    return drop_client(flow, rst=False)


def reset(flow: http.HTTPFlow) -> bool:
    """Drop the client's connection with an RST; False when it was gone already."""
    return drop_client(flow, rst=True)
