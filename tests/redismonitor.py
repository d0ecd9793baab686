"""What clients asked a real redis-server, as the server saw it: `MONITOR`, commands from scripts left out.

Redis counts the commands a Lua script runs in its statistics (`INFO commandstats`), so they cannot
tell one round trip from its script's work. MONITOR marks those `[... lua]`: what is left is one line
per command a client sent.
"""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from types import TracebackType

from tests.redisserver import RedisServer

__all__ = ["Monitor"]

_LINE = re.compile(r'^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"')


class Monitor:
    """`with Monitor(server) as m: ...; m.commands()`: the commands clients sent meanwhile, in order."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self._lines: list[str] = []
        self._markers: list[str] = []  # this monitor's own ECHOs: never reported
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Monitor:
        self._sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self._sock.sendall(b"MONITOR\r\n")
        buf = b""
        while b"\r\n" not in buf:
            buf += self._sock.recv(4096)
        assert buf.startswith(b"+OK"), buf
        self._sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, args=(buf.partition(b"\r\n")[2],), daemon=True)
        self._thread.start()
        return self

    def _read(self, buf: bytes) -> None:
        assert self._sock is not None
        while True:
            *lines, buf = buf.split(b"\r\n")
            self._lines.extend(line.decode(errors="replace") for line in lines)
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk

    def commands(self, timeout_s: float = 5.0) -> list[str]:
        """The commands (lower case) clients sent so far, once the monitor has seen all of them."""
        marker = uuid.uuid4().hex
        self._markers.append(marker)
        self.server.command("ECHO", marker)
        deadline = time.monotonic() + timeout_s
        while not any(marker in line for line in self._lines):
            assert time.monotonic() < deadline, "MONITOR did not see its own marker"
            time.sleep(0.01)
        out: list[str] = []
        for line in list(self._lines):
            m = _LINE.match(line)
            if marker in line:
                break
            if m is None or m.group(1) == "lua" or any(k in line for k in self._markers):
                continue
            out.append(m.group(2).lower())
        return out

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._sock is not None:
            self._sock.close()
        if self._thread is not None:
            self._thread.join(5)
