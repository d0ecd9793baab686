"""Several brownout processes on one listening port: SO_REUSEPORT on mitmproxy's listening sockets.

mitmproxy 12.2 listens in one place, `AsyncioServerInstance.listen` (mitmproxy/proxy/mode_servers.py),
with `asyncio.start_server(handle, host, port)` and no `reuse_port`: a second process on the same
port fails with EADDRINUSE. The proxyserver addon's `Servers.update` makes each new server instance,
announces the new, not yet started instances on its `changed` signal, and only then starts them.
`share_port` listens on that signal and gives each new TCP instance a `listen` of its own (an
instance attribute: nothing process-wide changes, another proxy in the process listens as before)
that passes `reuse_port=True`. On Linux the kernel then spreads incoming connections over every
process listening on the port. This leans on mitmproxy internals, so the version is pinned
(pyproject: mitmproxy <12.3) and tests/proxy/test_reuseport.py fails if a release changes them.

`hold_port` is the supervisor's side: it checks that no other program has the port, picks one
for port 0, and keeps the port bound (not listening) for the workers' lifetime.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from typing import Any

from mitmproxy.proxy.mode_servers import AsyncioServerInstance

__all__ = ["SharedPort", "hold_port", "share_port", "supported"]

log = logging.getLogger(__name__)


def supported() -> bool:
    """Whether this platform has SO_REUSEPORT (Linux, macOS and the BSDs; not Windows)."""
    return hasattr(socket, "SO_REUSEPORT")


class SharedPort:
    """Gives the TCP server instances of one mitmproxy master a listen() with SO_REUSEPORT."""

    def __init__(self, master: Any) -> None:
        self.servers = master.addons.get("proxyserver").servers
        # mitmproxy holds signal receivers weakly: the servers hold this object for as long as they live.
        self.servers.brownout_shared_port = self
        self.servers.changed.connect(self._on_changed)

    def _on_changed(self) -> None:
        for instance in self.servers:
            if isinstance(instance, AsyncioServerInstance) and "listen" not in vars(instance):
                instance.listen = functools.partial(_listen_shared, instance)  # type: ignore[method-assign]


def share_port(master: Any) -> SharedPort:
    """Make `master`'s proxy servers listen with SO_REUSEPORT; call before the master runs."""
    if not supported():
        raise OSError("SO_REUSEPORT is not available on this platform: one process per listening port")
    return SharedPort(master)


async def _listen_shared(instance: AsyncioServerInstance[Any], host: str, port: int) -> list[Any]:
    if instance.mode.transport_protocol != "tcp":
        # UDP modes (DNS, WireGuard) are not brownout's; sharing one would need more than this.
        raise OSError(f"{instance.mode.description} cannot share its port (TCP modes only)")
    server = await asyncio.start_server(instance.handle_stream, host, port, reuse_port=True)
    return [server]


def hold_port(host: str, port: int) -> socket.socket:
    """A socket bound to host:port with SO_REUSEPORT, not listening: the port stays this fleet's while
    its workers come and go (one that restarts binds again), and no connection is ever queued on it.

    Port 0 picks a free port (read it from the socket). Raises OSError (EADDRINUSE) when another program
    already has the port, even one that uses SO_REUSEPORT itself: the check binds without it first.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio: a TIME_WAIT is no conflict
        probe.bind((host, port))
        port = probe.getsockname()[1]
    held = socket.socket(family, socket.SOCK_STREAM)
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        held.bind((host, port))
    except OSError:
        held.close()
        raise
    return held
