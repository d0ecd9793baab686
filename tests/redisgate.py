"""A TCP relay in front of a real redis-server whose commands can be held: the store is slow on demand.

`with RedisGate(server) as gate:` gives `gate.url` for a client. While `gate.held()` lasts, what clients
send waits in the relay (replies already on their way still come back); when it ends, it all goes on in
order. Nothing is lost or reordered, so the store answers every call, only later.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from types import TracebackType

from tests.redisserver import RedisServer

__all__ = ["RedisGate"]


class RedisGate:
    """127.0.0.1:`port` relays to `server`; `held()` holds every client's commands until it ends."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self._open = threading.Event()
        self._open.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self._open.clear()
        try:
            yield
        finally:
            self._open.set()

    def __enter__(self) -> RedisGate:
        threading.Thread(target=self._accept, daemon=True, name="redis-gate").start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._open.set()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.server.port))
            with self._lock:
                self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, gated: bool) -> None:
        try:
            while data := src.recv(65536):
                if gated:
                    self._open.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
