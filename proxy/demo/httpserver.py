"""A minimal asyncio HTTP/1.1 server: keep-alive, Content-Length and chunked bodies, streaming.

Hand-rolled rather than tornado so the benchmark upstream spends microseconds per request
and streamed chunks reach the socket the moment they are written.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus

__all__ = ["Handler", "HttpServer", "Request", "Responder"]

log = logging.getLogger(__name__)

_MAX_HEAD = 64 * 1024


@dataclass(slots=True)
class Request:
    """One parsed HTTP request."""

    method: str
    target: str  # path and query as sent
    path: str
    query: str
    headers: dict[str, str]  # lower-case names; repeated headers keep the last value
    body: bytes


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Unknown"


class Responder:
    """Writes one response, whole or streamed with chunked transfer encoding."""

    __slots__ = ("_chunked", "_reader", "_writer", "hijacked", "keep_alive", "started")

    def __init__(
        self, writer: asyncio.StreamWriter, keep_alive: bool, reader: asyncio.StreamReader | None = None
    ) -> None:
        self._writer = writer
        self._reader = reader
        self.keep_alive = keep_alive
        self.started = False
        self.hijacked = False
        self._chunked = False

    def hijack(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Take the connection over (a protocol upgrade): the server reads no further request from it."""
        assert self._reader is not None, "this responder was made without its reader"
        self.hijacked = self.started = True
        return self._reader, self._writer

    def _head(self, status: int, headers: dict[str, str], extra: str) -> bytes:
        lines = [f"HTTP/1.1 {status} {_reason(status)}\r\n", "server: brownout-mock\r\n"]
        lines.extend(f"{k}: {v}\r\n" for k, v in headers.items())
        if not self.keep_alive:
            lines.append("connection: close\r\n")
        lines.append(extra)
        return "".join(lines).encode("latin-1")

    def send(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        """Send a complete response with Content-Length."""
        hdrs = {"content-type": content_type, **(headers or {})}
        self.started = True
        self._writer.write(self._head(status, hdrs, f"content-length: {len(body)}\r\n\r\n") + body)

    def send_raw(self, data: bytes) -> None:
        """Send pre-built response bytes (head and body); used by hot benchmark paths."""
        self.started = True
        self._writer.write(data)

    async def start_stream(self, status: int, content_type: str, headers: dict[str, str] | None = None) -> None:
        """Send the head of a chunked response; follow with `chunk()` and `end()`."""
        hdrs = {"content-type": content_type, "cache-control": "no-cache", **(headers or {})}
        self.started = True
        self._chunked = True
        self._writer.write(self._head(status, hdrs, "transfer-encoding: chunked\r\n\r\n"))
        await self._writer.drain()

    async def chunk(self, data: bytes) -> None:
        """Write one chunk and wait until it has left our buffer, so timing is real."""
        if data:
            self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self._writer.drain()

    async def end(self) -> None:
        if self._chunked:
            self._writer.write(b"0\r\n\r\n")
            await self._writer.drain()


Handler = Callable[[Request, Responder], Awaitable[None]]


class HttpServer:
    """Serves `handler` over HTTP/1.1 (optionally TLS) on one asyncio loop."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        self._server = await asyncio.start_server(
            self._serve, host, port, ssl=ssl_context, limit=_MAX_HEAD, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        # Cancel connections still open (keep-alive, slow streams): wait_closed waits for them.
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        # A TLS close waits for the peer's close_notify, which an idle pooled client never
        # sends: abort what is left rather than wait for ssl_shutdown_timeout (30 s).
        abort = getattr(self._server, "abort_clients", None)
        if abort is not None:
            abort()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        except TimeoutError:
            log.debug("mock upstream: connections still closing at stop")
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                req = await self._read_request(reader)
                if req is None:
                    break
                conn = req.headers.get("connection", "").lower()
                keep_alive = conn != "close"
                resp = Responder(writer, keep_alive, reader)
                try:
                    await self._handler(req, resp)
                except (ConnectionError, asyncio.CancelledError):
                    raise
                except Exception:
                    log.exception("mock upstream handler failed for %s %s", req.method, req.target)
                    if resp.started:
                        break  # mid-stream: the only honest signal left is closing
                    resp.send(500, b'{"error":{"message":"mock handler crashed","type":"server_error"}}')
                if resp.hijacked:
                    break  # the handler owned the connection (a WebSocket) and is done with it
                await resp.end()
                if not resp.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the transport may already be gone
                pass

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # no trailers expected from our clients
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(parts)
        else:
            body = b""
        path, _, query = target.partition("?")
        return Request(method, target, path, query, headers, body)
