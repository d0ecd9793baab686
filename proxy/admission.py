"""Admission of new client connections: a burst of them cannot stall the streams already in flight.

Setting up a connection costs mitmproxy one to two milliseconds of CPU (its layers, the hooks, the
upstream connection). asyncio runs every ready callback of a loop iteration in turn, so a thousand
connections arriving within a second put a second or two of set-up work in front of every chunk
already on its way through. Measured with `bench/streams.py`: events of open streams arrived up to
half a second late while 1,000 streams opened over a second.

Here at most `proxy.admit_per_tick` new connections start per event-loop iteration. The others wait,
in arrival order, after the accept and before their request is read, and start in the next
iterations. Bytes of exchanges in flight are served in every iteration. Under a burst the loop's own
pace sets how fast connections are admitted; a quiet loop turns over in microseconds, so the wait
then goes unnoticed. Nothing is refused: a waiting connection is only later, and
`brownout_client_connection_wait_seconds` shows how much.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from mitmproxy import connection

from brownout.core.guard import Guard
from brownout.proxy.config import ProxySettings

__all__ = ["Admission"]


class Admission:
    """A mitmproxy addon: `client_connected` holds a new connection until this loop iteration has room."""

    def __init__(
        self, settings: ProxySettings, guard: Guard, *, on_wait: Callable[[float], None] = lambda seconds: None
    ) -> None:
        self.settings = settings  # replaced on a config reload
        self._guard = guard
        self._on_wait = on_wait
        self._waiting: deque[tuple[asyncio.Future[None], float]] = deque()
        self._admitted = 0  # connections started in this loop iteration
        self._ticking: asyncio.Handle | None = None

    @property
    def waiting(self) -> int:
        """Connections accepted and not yet admitted."""
        return len(self._waiting)

    async def client_connected(self, client: connection.Client) -> None:
        if client.transport_protocol != "tcp":
            return
        per_tick = self.settings.admit_per_tick
        if per_tick <= 0 and not self._waiting:
            return
        if not self._waiting and self._admitted < per_tick:
            self._admitted += 1
            self._tick_soon()
            return
        await self._guard.acall("admission", self._wait)

    async def _wait(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append((waiter, loop.time()))
        self._tick_soon()
        await waiter

    def _tick_soon(self) -> None:
        if self._ticking is None:
            self._ticking = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        """Once per loop iteration while there is work: a new quota, spent on the longest waiting."""
        self._ticking = None
        self._admitted = 0
        per_tick = max(self.settings.admit_per_tick, 0) or len(self._waiting)  # 0 after a reload: all go
        now = asyncio.get_running_loop().time()
        while self._waiting and self._admitted < per_tick:
            waiter, since = self._waiting.popleft()
            if waiter.done():  # its connection went away while waiting: no quota spent
                continue
            waiter.set_result(None)
            self._admitted += 1
            self._guard.call("prometheus", self._on_wait, now - since)
        if self._waiting or self._admitted:
            self._tick_soon()
