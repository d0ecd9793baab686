"""A test-only brownout plugin whose exporter opens a socket per exchange (see proxy.plugins).

- `leaking_plugin`: keeps every socket open: a real descriptor leak, one per request.
- `lingering_plugin`: closes each socket LINGER_S later, longer than the soak run waits after its
  traffic before looking (bench/soak.py SETTLE_S): descriptors still closing, no leak.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, ClassVar

__all__ = ["LINGER_S", "LeakingExporter", "LingeringExporter", "leaking_plugin", "lingering_plugin"]

LINGER_S = 3.0


class LeakingExporter:
    """Opens a socket per exchange and never closes it."""

    name = "leaking"

    def __init__(self) -> None:
        self.held: list[socket.socket] = []

    def on_exchange(self, exchange: Any, violations: list[Any]) -> None:
        self.held.append(socket.socket())


class LingeringExporter:
    """Opens a socket per exchange and closes it LINGER_S later."""

    name = "lingering"

    def on_exchange(self, exchange: Any, violations: list[Any]) -> None:
        sock = socket.socket()
        timer = threading.Timer(LINGER_S, sock.close)
        timer.daemon = True
        timer.start()


class _Leaking:
    exporters: ClassVar[list[type]] = [LeakingExporter]


class _Lingering:
    exporters: ClassVar[list[type]] = [LingeringExporter]


leaking_plugin = _Leaking()
lingering_plugin = _Lingering()
