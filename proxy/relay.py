"""An in-process relay that paces a response body with real awaits (stall, throttle, latency on the
stream) and can put events of brownout's own between upstream's (an MCP listen stream's announcements).

mitmproxy's stream callable is synchronous, so a sleep inside it would stall every flow, and it runs
only when upstream sends something. Instead a flow that needs either is re-routed, in the `request`
hook, to this HTTP/1.1 server on the proxy's own event loop. It fetches the real upstream with httpx and
writes the body back with `await asyncio.sleep(...)` between slices; mitmproxy streams it on.

Limits: mitmproxy speaks HTTP/1.1 to the relay, but its client side may be HTTP/2; the
relay speaks HTTP/1.1 to the upstream and trusts what mitmproxy trusts (the addon passes
`ssl_verify_upstream_trusted_ca` / `ssl_insecure`). It cannot go through an upstream proxy:
in upstream mode flows are not routed here (see `proxy.effects.route_to_relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import h11
import httpx

from brownout.core.guard import Guard
from brownout.faults.base import StreamTiming
from brownout.proxy.pacing import StallPoint

__all__ = ["Relay", "RelayTarget"]

log = logging.getLogger(__name__)

RELAY_HEADER = "x-brownout-relay"
_READ_AHEAD = 256  # chunks read ahead of the pacing for a target that watches upstream's timing
# Hop-by-hop and framing headers stay behind: httpx (to upstream) and h11 (back to mitmproxy) frame bodies.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "upgrade",
        "content-length",
        RELAY_HEADER,
    }
)


@dataclass(slots=True)
class RelayTarget:
    """Where a relayed request really goes, and how to pace its response."""

    url: str
    timing: StreamTiming
    # Told each body chunk the moment upstream delivers it, before any pacing, and b"" at its end:
    # the clock of a recording, which must not show the waits brownout adds.
    on_upstream: Callable[[bytes], None] | None = None
    # Whole SSE events to write between upstream's (an MCP listen stream's announcements).
    inbox: asyncio.Queue[bytes] | None = None


class Relay:
    """Loopback HTTP/1.1 server that forwards to the real upstream and paces the body."""

    def __init__(
        self,
        guard: Guard,
        *,
        verify: ssl.SSLContext | bool = True,
        sleep=asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
        on_unreachable: Callable[[str, int, BaseException], None] | None = None,
    ) -> None:
        """`on_unreachable(host, port, error)`: told when an upstream cannot be reached."""
        self.guard = guard  # contains a relay bug: counted as component "relay", that one response ends
        self._targets: dict[str, RelayTarget] = {}
        self._verify = verify
        self._transport = transport  # replay: recorded answers instead of the network
        self._on_unreachable = on_unreachable
        self._sleep = sleep
        self._server: asyncio.AbstractServer | None = None
        self._client: httpx.AsyncClient | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        # trust_env=False: the relay must never loop back through HTTP(S)_PROXY.
        self._client = httpx.AsyncClient(
            trust_env=False, verify=self._verify, timeout=httpx.Timeout(None), transport=self._transport
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def register(self, target: RelayTarget) -> str:
        """A token for a request to carry in the relay header."""
        token = secrets.token_hex(12)
        self._targets[token] = target
        return token

    def discard(self, token: str) -> None:
        self._targets.pop(token, None)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, h11.ProtocolError) as e:
            log.debug("relay connection ended: %s", e)
        except httpx.TransportError as e:
            # Upstream cut the body short: closing without the last chunk passes the cut on,
            # as the client would see it without brownout. Not a brownout failure.
            log.debug("relay: upstream ended mid-body: %r", e)
        except Exception as e:  # noqa: BLE001 - traffic first: a relay bug ends this one response, nothing else
            self.guard.failed("relay", e, "pacing a response body")
        finally:
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
        assert request is not None
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw_items()]
        token = next((v for k, v in headers if k.lower() == RELAY_HEADER), "")
        target = self._targets.pop(token, None)
        if target is None or self._client is None:
            _write(
                writer, conn, h11.Response(status_code=502, headers=[("content-length", "0"), ("connection", "close")])
            )
            _write(writer, conn, h11.EndOfMessage())
            return
        fwd = [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED]
        req = self._client.build_request(request.method.decode(), target.url, headers=fwd, content=bytes(body))
        try:
            resp = await self._client.send(req, stream=True)
        except httpx.TransportError as e:
            # Refused, TLS verification, DNS: hang up unanswered. mitmproxy then sees no response and
            # the addon's error hook does what it does for any unreachable upstream (proxy.upstream_error).
            url = httpx.URL(target.url)
            if self._on_unreachable is not None and isinstance(e, httpx.ConnectError):
                self._on_unreachable(url.host, url.port or (443 if url.scheme == "https" else 80), e)
            else:
                log.info("relay: cannot reach upstream %s: %r", url.host, e)
            return
        try:
            await _until_closed(reader, self._relay_response(resp, conn, writer, target))
        finally:
            await resp.aclose()

    async def _relay_response(
        self, resp: httpx.Response, conn: h11.Connection, writer: asyncio.StreamWriter, target: RelayTarget
    ) -> None:
        timing = target.timing
        # Body framing is h11's: with no content-length it chunks the body for mitmproxy's HTTP/1.1,
        # and sends none at all where the status or method allows no body.
        # A recorded exchange keeps its framing (a buffered answer stays buffered): pacing never changes the size.
        dropped = _NOT_FORWARDED if target.on_upstream is None else _NOT_FORWARDED - {"content-length"}
        headers = [(k, v) for k, v in resp.headers.raw if k.lower().decode("latin-1") not in dropped]
        headers.append((b"connection", b"close"))
        reason = resp.extensions.get("reason_phrase", b"")  # upstream's own bytes, whatever their charset
        _write(writer, conn, h11.Response(status_code=resp.status_code, reason=reason, headers=headers))
        await writer.drain()
        stall: StallPoint | None = None
        if timing.pause_after_events is not None:
            stall = StallPoint(
                timing.pause_after_events,
                resp.headers.get("content-type", ""),
                resp.headers.get("content-encoding", ""),
            )
            if stall.at_start:
                await self._sleep(timing.pause_s)  # after_events 0: headers out, no event yet
        # Chunks go on as upstream sent them; only the one holding the Nth event's end is split.
        ahead = None
        if target.on_upstream is not None or timing.event_delay_s:
            ahead = _read_ahead(resp.aiter_raw(), target.on_upstream)
        chunks: AsyncIterator[bytes] = resp.aiter_raw() if ahead is None else _chunks(ahead)
        if ahead is not None and timing.event_delay_s:
            chunks = _delayed(ahead, timing.event_delay_s, self._sleep)
        if target.inbox is not None and not resp.headers.get("content-encoding"):
            chunks = _with_inbox(chunks, target.inbox)  # events go between upstream's, never inside compressed bytes
        try:
            async for chunk in chunks:
                cut = stall.feed(chunk) if stall is not None and not stall.done else None
                if cut is None:
                    await self._send(writer, conn, chunk, timing)
                    continue
                await self._send(writer, conn, chunk[:cut], timing)
                await self._sleep(timing.pause_s)
                await self._send(writer, conn, chunk[cut:], timing)
        finally:
            if ahead is not None:
                await ahead.aclose()  # stops its reader task
        _write(writer, conn, h11.EndOfMessage())
        await writer.drain()

    async def _send(
        self, writer: asyncio.StreamWriter, conn: h11.Connection, data: bytes, timing: StreamTiming
    ) -> None:
        if not data:
            return
        rate = timing.bytes_per_s
        if not rate:
            _write(writer, conn, h11.Data(data=data))
            await writer.drain()
            return
        # Throttle in slices of ~50 ms worth of bytes so delivery is smooth, not bursty.
        step = max(1, int(rate / 20))
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            _write(writer, conn, h11.Data(data=piece))
            await writer.drain()
            await self._sleep(len(piece) / rate)


async def _read_ahead(
    chunks: AsyncIterator[bytes], on_upstream: Callable[[bytes], None] | None = None
) -> AsyncGenerator[tuple[float, bytes]]:
    """The body read by its own task, so pacing and mitmproxy's holds never delay the reads (which
    `on_upstream` times, told b"" at the end); each chunk is handed on in order with when it arrived."""
    queue: asyncio.Queue[tuple[float, bytes] | Exception | None] = asyncio.Queue(_READ_AHEAD)

    async def read() -> None:
        try:
            async for chunk in chunks:
                if on_upstream is not None:
                    on_upstream(chunk)
                await queue.put((time.monotonic(), chunk))
            if on_upstream is not None:
                on_upstream(b"")
            await queue.put(None)
        except Exception as e:  # noqa: BLE001 - handed to the reader below, whose handler sorts it out
            await queue.put(e)

    task = asyncio.create_task(read())
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        task.cancel()


async def _chunks(timed: AsyncIterator[tuple[float, bytes]]) -> AsyncGenerator[bytes]:
    async for _, chunk in timed:
        yield chunk


async def _until_closed(reader: asyncio.StreamReader, relaying: Coroutine[Any, Any, None]) -> None:
    """Relay until done, or until mitmproxy closes its end (the client left): a long-lived stream with nothing
    to send (an MCP listen stream) would otherwise keep its upstream connection, and the server's
    subscription, open for as long as the server lets it."""
    task = asyncio.ensure_future(relaying)
    closed = asyncio.ensure_future(reader.read(1))  # nothing more comes after the request but the close
    try:
        await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        closed.cancel()
        task.cancel()


async def _delayed(
    timed: AsyncIterator[tuple[float, bytes]], delay_s: float, sleep: Callable[[float], Awaitable[None]]
) -> AsyncGenerator[bytes]:
    """Each chunk `delay_s` after upstream delivered it, in order (read ahead, so the wait for one chunk never
    holds back reading the next: a delay, not a slower rate)."""
    async for arrived, chunk in timed:
        wait = arrived + delay_s - time.monotonic()
        if wait > 0:
            await sleep(wait)
        yield chunk


async def _with_inbox(chunks: AsyncIterator[bytes], inbox: asyncio.Queue[bytes]) -> AsyncGenerator[bytes]:
    """Upstream's chunks, with the inbox's events put in as they come: only where an upstream event has ended."""
    upstream = chunks.__aiter__()
    next_chunk: asyncio.Future[bytes] = asyncio.ensure_future(upstream.__anext__())
    next_event: asyncio.Future[bytes] = asyncio.ensure_future(inbox.get())
    held: list[bytes] = []
    at_boundary = True
    try:
        while True:
            done, _ = await asyncio.wait({next_chunk, next_event}, return_when=asyncio.FIRST_COMPLETED)
            if next_event in done:
                held.append(next_event.result())
                next_event = asyncio.ensure_future(inbox.get())
            if next_chunk in done:
                try:
                    chunk = next_chunk.result()
                except StopAsyncIteration:
                    break
                yield chunk
                if chunk:
                    at_boundary = chunk.endswith((b"\n\n", b"\r\n\r\n", b"\r\r"))
                next_chunk = asyncio.ensure_future(upstream.__anext__())
            if held and at_boundary:
                for event in held:
                    yield event
                held.clear()
    finally:
        next_event.cancel()
        next_chunk.cancel()


def _write(writer: asyncio.StreamWriter, conn: h11.Connection, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        writer.write(data)
