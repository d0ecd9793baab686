"""Dropping a client connection mid-flight, as a real network failure would.

`flow.kill()` cannot stop a response that is already streaming (mitmproxy #4711), so this
reaches into the proxyserver addon's connection handler. That is mitmproxy-internal API:
the version is pinned and tests/test_faults_proxy.py exercises it.
"""

from __future__ import annotations

import logging
import socket
import struct

from mitmproxy import ctx, http

__all__ = ["drop_client"]

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
            try:
                # Linger 0 turns close() into an RST: the client sees ECONNRESET, not a clean EOF.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
    transport = getattr(writer, "transport", None)
    if transport is not None:
        transport.abort() if rst else transport.close()
    handler.close_connection(handler.client)
    return True
