"""Dropping a client connection mid-flight, as a real network failure would.

`flow.kill()` cannot stop a response that is already streaming (mitmproxy #4711), so this
reaches into the proxyserver addon's connection handler. That is mitmproxy-internal API:
the version is pinned and tests/test_faults_proxy.py exercises it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
from collections.abc import Iterator
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.proxy.layers.http import RequestProtocolError

__all__ = [
    "close_client",
    "close_clients",
    "close_upstream",
    "connection_handler",
    "drop_client",
    "end_http1_body",
    "is_multiplexed",
    "stream_cancelled",
    "walk_layers",
]

log = logging.getLogger(__name__)


def drop_client(flow: http.HTTPFlow, *, rst: bool = True) -> bool:
    """Close the flow's client connection, with a TCP RST when `rst`; False when it was already gone."""
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
    if handler is None:
        return False
    io = handler.transports.get(handler.client)
    writer = io.writer if io else None
    if writer is None:
        return False
    if rst:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Linger 0 turns close() into an RST: the client sees ECONNRESET, not a clean EOF.
            with contextlib.suppress(OSError):  # a socket already gone: the close below still ends it
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = getattr(writer, "transport", None)
    if transport is not None:
        transport.abort() if rst else transport.close()
    handler.close_connection(handler.client)
    return True


def close_client(client_id: str, reason: str, *, proxyserver: Any = None) -> bool:
    """Close a client connection the way mitmproxy's own inactivity timeout does (a FIN once the
    connection's layers have wound down); False when it is already gone."""
    proxyserver = proxyserver or ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(client_id) if proxyserver else None
    io = handler.transports.get(handler.client) if handler is not None else None
    if io is None or io.handler is None or io.handler.done():
        return False
    io.handler.cancel(reason)
    return True


def close_clients(proxyserver: Any, reason: str) -> int:
    """Close every client connection still open (shutdown); returns how many."""
    return sum(close_client(cid, reason, proxyserver=proxyserver) for cid in list(proxyserver.connections))


def _client_writer(flow: http.HTTPFlow) -> Any:
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
    io = handler.transports.get(handler.client) if handler is not None else None
    return io.writer if io else None


def end_http1_body(flow: http.HTTPFlow) -> bool:
    """End an HTTP/1 response body the client is reading, then close the connection (FIN).

    For chunked framing the last-chunk marker goes out first, so the client reads a complete,
    shorter body; a close-delimited body ends with the FIN itself. mitmproxy still believes the
    body is streaming, so the connection must not carry another response: it is closed."""
    writer = _client_writer(flow)
    if writer is None:
        return False
    resp = flow.response
    if resp is not None and "chunked" in resp.headers.get("transfer-encoding", "").lower():
        with contextlib.suppress(OSError, RuntimeError):  # already closing: the FIN below still ends it
            writer.write(b"0\r\n\r\n")
    return drop_client(flow, rst=False)


def close_upstream(flow: http.HTTPFlow) -> bool:
    """Close the flow's upstream connection: mitmproxy then ends the client's stream (HTTP/2: only
    that stream). Used only where the upstream connection serves this flow alone (HTTP/1)."""
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
    if handler is None or flow.server_conn not in handler.transports:
        return False
    handler.close_connection(flow.server_conn)
    return True


def is_multiplexed(flow: http.HTTPFlow) -> bool:
    """Whether the client connection carries other requests too (HTTP/2, HTTP/3): a fault must
    reset the flow's stream, never the whole connection and every other stream on it."""
    return flow.request.http_version.startswith(("HTTP/2", "HTTP/3"))


def walk_layers(root: Any) -> Iterator[Any]:
    """Every mitmproxy layer under `root` (a connection handler's `.layer`), each once."""
    todo, seen = [root], set()
    while todo:
        layer = todo.pop()
        if layer is None or id(layer) in seen:
            continue
        seen.add(id(layer))
        yield layer
        handle = getattr(layer, "_handle_event", None)  # modes.HttpProxy delegates to its NextLayer this way
        todo += [getattr(layer, "child_layer", None), getattr(layer, "layer", None), getattr(handle, "__self__", None)]
        streams = getattr(layer, "streams", None)
        if isinstance(streams, dict):
            todo += streams.values()


def connection_handler(flow: http.HTTPFlow) -> Any:
    """The proxyserver's handler of the flow's client connection, or None once it is gone."""
    proxyserver = ctx.master.addons.get("proxyserver")
    return proxyserver.connections.get(flow.client_conn.id) if proxyserver else None


def _http_stream(root: Any, flow: http.HTTPFlow) -> Any:
    """The mitmproxy HttpStream layer carrying `flow`, found by walking the connection's layers."""
    for layer in walk_layers(root):
        if getattr(layer, "flow", None) is flow and hasattr(layer, "_paused_event_queue"):
            return layer
    return None


def stream_cancelled(flow: http.HTTPFlow) -> bool:
    """Whether the client gave up on this request while a hook holds it.

    On HTTP/1.1 that closes the connection (`client_conn.connected` turns False); an HTTP/2 client
    cancels just the stream (RST_STREAM) and keeps the connection. mitmproxy queues that event on the
    paused stream until the hook returns (its own `check_killed` peeks at the same queue)."""
    if not flow.client_conn.connected:
        return True
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
    stream = _http_stream(handler.layer, flow) if handler is not None else None
    if stream is None:
        return False
    return any(isinstance(e, RequestProtocolError) for e in stream._paused_event_queue)
