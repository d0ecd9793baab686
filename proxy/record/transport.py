"""Plays recorded answers back with their recorded timing, as an httpx transport behind brownout's relay.

A replayed request goes the way a live one goes: mitmproxy sends it to the relay (proxy/relay.py) as it
would to the upstream, and the relay fetches it through this transport instead of the network. So the
same hooks see the same response head and chunks as on live traffic, and every fault (header, body,
stream, stall, throttle, reset) acts on it unchanged. Events are released on the recorded schedule
(offsets from the request, scaled by the replay speed), measured from one start so gaps never drift.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from brownout.proxy.record.cassette import CassetteError, Recorded
from brownout.proxy.record.matcher import Stored

__all__ = ["REPLAY_HEADER", "ReplayTransport"]

log = logging.getLogger(__name__)

REPLAY_HEADER = "x-brownout-replay"


class ReplayTransport(httpx.AsyncBaseTransport):
    """Answers requests that carry a registered token with their recorded exchange."""

    def __init__(
        self,
        speed: Callable[[], float],
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._speed = speed
        self._sleep = sleep
        self._clock = clock
        self._pending: dict[str, Stored] = {}

    def register(self, recorded: Stored) -> str:
        token = secrets.token_hex(12)
        self._pending[token] = recorded
        return token

    def discard(self, token: str) -> None:
        self._pending.pop(token, None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        stored = self._pending.pop(request.headers.get(REPLAY_HEADER, ""), None)
        if stored is None:
            raise httpx.ConnectError("no recorded answer registered for this request", request=request)
        start = self._clock()
        if isinstance(stored, Recorded):
            rec = stored
        else:
            try:  # read from its file in a worker thread: a large exchange never holds up the loop
                rec = await asyncio.to_thread(stored.load)
            except CassetteError as e:
                log.error("replay: %s", e)
                raise httpx.ConnectError(str(e), request=request) from e
        await self._until(start, rec.headers_s)
        if rec.status is None:
            # Upstream never answered when recorded: neither does the replay (the proxy's error hook then
            # fails the client's connection as it did live).
            raise httpx.RemoteProtocolError(rec.error or "upstream gave no response", request=request)
        return httpx.Response(
            rec.status,
            headers=rec.response_headers,
            stream=_Body(self, rec, start),
            extensions={"reason_phrase": rec.reason.encode("latin-1", "replace"), "http_version": b"HTTP/1.1"},
            request=request,
        )

    async def _until(self, start: float, offset_s: float) -> None:
        speed = self._speed()
        if speed <= 0 or offset_s <= 0:
            return
        delay = start + offset_s / speed - self._clock()
        if delay > 0:
            await self._sleep(delay)


class _Body(httpx.AsyncByteStream):
    """A recorded body, event by event on the recorded schedule; ends the way the recording ended."""

    def __init__(self, transport: ReplayTransport, rec: Recorded, start: float) -> None:
        self.transport = transport
        self.rec = rec
        self.start = start

    async def __aiter__(self) -> AsyncIterator[bytes]:
        rec = self.rec
        if rec.events is not None:
            for event in rec.events:
                await self.transport._until(self.start, event.t)
                yield event.data
            # A stream held open after its last event (an MCP server stream) stays open as long.
            await self.transport._until(self.start, rec.end_s)
        else:
            await self.transport._until(self.start, rec.end_s)
            if rec.body:
                yield rec.body
        if rec.error is not None:
            # Upstream cut the body when recorded: the relay passes the cut on (no final chunk).
            raise httpx.ReadError(rec.error)
