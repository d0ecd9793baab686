"""Tiny upstream servers that send exactly the bytes a test wants (bad, odd, slow or broken).

`RawUpstream(handler)` is an asyncio HTTP/1.1 server on a background thread. For each request
it calls `await handler(req, reader, writer)`; the handler writes whatever it likes (a valid
response, garbage, half a body) and the connection is closed afterwards unless the handler
returns True. `H2Upstream` is the same idea over TLS with HTTP/2 (the `h2` library), and
`ws_echo` is a WebSocket echo handler for `RawUpstream`.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import shutil
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "H2Response",
    "H2Upstream",
    "RawRequest",
    "RawUpstream",
    "chunked",
    "fixed",
    "gzip_bytes",
    "http_response",
    "routes",
    "ws_echo",
]


@dataclass
class RawRequest:
    """A request as it arrived (header names as sent, in order)."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    protocol: str = "HTTP/1.1"

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


Handler = Callable[[RawRequest, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool | None]]


def http_response(
    status: int = 200,
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    length: bool = True,
    reason: str = "OK",
) -> bytes:
    """A raw HTTP/1.1 response; `length=False` leaves out content-length (body delimited by close)."""
    head = [f"HTTP/1.1 {status} {reason}\r\n"]
    head += [f"{k}: {v}\r\n" for k, v in headers]
    if length:
        head.append(f"content-length: {len(body)}\r\n")
    head.append("\r\n")
    return "".join(head).encode("latin-1") + body


def chunked(*pieces: bytes, end: bool = True) -> bytes:
    """Pieces in chunked transfer-coding (with the terminating 0-chunk when `end`)."""
    out = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    return out + (b"0\r\n\r\n" if end else b"")


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def fixed(raw: bytes) -> Handler:
    """A handler answering every request with these exact bytes."""

    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(raw)
        await writer.drain()
        return False

    return handle


def routes(table: dict[str, Handler]) -> Handler:
    """Dispatch on the request path; 404 otherwise. Keeps the connection open after a full answer."""

    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool | None:
        h = table.get(req.path)
        if h is None:
            writer.write(http_response(404, [("content-type", "text/plain")], b"no route"))
            await writer.drain()
            return True
        return await h(req, reader, writer)

    return handle


async def _read_request(reader: asyncio.StreamReader) -> RawRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, protocol = lines[0].split(" ", 2)
    headers = [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)]
    req = RawRequest(method, target, headers, b"", protocol)
    if (req.header("transfer-encoding") or "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            body += await reader.readexactly(size + 2)
            if size == 0:
                break
            del body[-2:]
        req.body = bytes(body[:-2]) if body.endswith(b"\r\n") else bytes(body)
    else:
        n = int(req.header("content-length") or 0)
        req.body = await reader.readexactly(n) if n else b""
    return req


@dataclass
class _Stats:
    connections: int = 0  # accepted so far
    open: int = 0  # open right now
    closed_by_peer: int = 0  # handler saw the peer go away while writing


class RawUpstream:
    """An HTTP/1.1 server whose handler writes raw bytes; plain or TLS; runs in its own thread."""

    def __init__(self, handler: Handler, *, tls: bool = False, alpn: list[str] | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.alpn = alpn
        self.requests: list[RawRequest] = []
        self.stats = _Stats()
        self.port = 0
        self.url = ""
        self.ca_pem_path: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tmpdir: str | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        from brownout.proxy.demo.tlsgen import make_tls_files, server_ssl_context

        self._tmpdir = tempfile.mkdtemp(prefix="brownout-raw-tls-")
        files = make_tls_files(Path(self._tmpdir))
        self.ca_pem_path = str(files.ca_pem)
        ctx = server_ssl_context(files)
        if self.alpn:
            ctx.set_alpn_protocols(self.alpn)
        return ctx

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            self._conn, "127.0.0.1", 0, ssl=self._ssl(), limit=1 << 20, backlog=4096
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        await asyncio.sleep(0.01)  # let the aborted connections finish before the loop stops
        # Connection tasks still waiting must end here: destroyed later while pending, they log an
        # asyncio ERROR that lands in whatever test runs next.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        self.stats.open += 1
        self._writers.add(writer)
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    break
                self.requests.append(req)
                if not await self.handler(req, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            self.stats.closed_by_peer += 1
        except asyncio.CancelledError:
            pass
        finally:
            self.stats.open -= 1
            self._writers.discard(writer)
            writer.close()

    def stop_listening(self) -> None:
        """Refuse new connections from now on (the port is closed); open connections carry on."""
        assert self.loop is not None and self._server is not None
        asyncio.run_coroutine_threadsafe(self._close_listener(), self.loop).result(5)

    async def _close_listener(self) -> None:
        assert self._server is not None
        self._server.close()  # closes the listening sockets only; serving connections go on

    @contextmanager
    def running(self) -> Iterator[RawUpstream]:
        loop = asyncio.new_event_loop()
        self.loop = loop
        thread = threading.Thread(target=loop.run_forever, name="raw-upstream", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), loop).result(30)
            yield self
        finally:
            try:
                asyncio.run_coroutine_threadsafe(self._stop(), loop).result(10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)
                loop.close()


# --- WebSocket -------------------------------------------------------------------------------

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()


async def ws_echo(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """WebSocket echo: answers the upgrade by hand, then echoes every message (wsproto frames)."""
    from wsproto.connection import Connection, ConnectionType
    from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage

    key = req.header("sec-websocket-key") or ""
    writer.write(
        http_response(
            101,
            [("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-accept", ws_accept(key))],
            length=False,
            reason="Switching Protocols",
        )
    )
    await writer.drain()
    conn = Connection(ConnectionType.SERVER)
    while True:
        data = await reader.read(65536)
        conn.receive_data(data or None)
        for ev in conn.events():
            if isinstance(ev, Message):
                # Echo whole messages (fragments reassembled by us).
                buf = getattr(conn, "_echo_buf", [])
                buf.append(ev.data)
                conn._echo_buf = buf  # type: ignore[attr-defined]
                if ev.message_finished:
                    whole = "".join(buf) if isinstance(ev, TextMessage) else b"".join(buf)
                    conn._echo_buf = []  # type: ignore[attr-defined]
                    cls = TextMessage if isinstance(ev, TextMessage) else BytesMessage
                    writer.write(conn.send(cls(data=whole)))
            elif isinstance(ev, Ping):
                writer.write(conn.send(ev.response()))
            elif isinstance(ev, CloseConnection):
                if data:  # a close frame from the peer (not just EOF): answer it
                    writer.write(conn.send(ev.response()))
                    await writer.drain()
                return False
        await writer.drain()
        if not data:
            return False


# --- HTTP/2 ----------------------------------------------------------------------------------


@dataclass
class H2Response:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    delay_s: float = 0.0  # between DATA chunks


class H2Upstream:
    """An HTTP/2-only TLS server (ALPN h2) built on the `h2` state machine.

    `respond(req) -> H2Response` picks the answer; requests land in `.requests` with protocol "HTTP/2".
    """

    def __init__(self, respond: Callable[[RawRequest], H2Response]) -> None:
        self.respond = respond
        self.requests: list[RawRequest] = []
        self.raw = RawUpstream(self._unused, tls=True, alpn=["h2"])

    @property
    def url(self) -> str:
        return self.raw.url

    @property
    def ca_pem_path(self) -> str | None:
        return self.raw.ca_pem_path

    async def _unused(self, *a: Any) -> bool:  # pragma: no cover - replaced below
        return False

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h2.config
        import h2.connection
        import h2.events

        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        pending: dict[int, RawRequest] = {}
        tasks: set[asyncio.Task[None]] = set()

        async def answer(stream_id: int, req: RawRequest) -> None:
            r = self.respond(req)
            conn.send_headers(stream_id, [(":status", str(r.status)), *r.headers], end_stream=not r.chunks)
            writer.write(conn.data_to_send())
            for i, chunk in enumerate(r.chunks):
                if r.delay_s and i:
                    await asyncio.sleep(r.delay_s)
                while conn.local_flow_control_window(stream_id) < len(chunk):
                    await asyncio.sleep(0.01)  # tiny bodies only; good enough for tests
                conn.send_data(stream_id, chunk, end_stream=i == len(r.chunks) - 1)
                writer.write(conn.data_to_send())
                await writer.drain()

        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        hd = dict(ev.headers)
                        pending[ev.stream_id] = RawRequest(
                            hd[":method"], hd[":path"], [(k, v) for k, v in ev.headers], b"", "HTTP/2"
                        )
                    elif isinstance(ev, h2.events.DataReceived):
                        pending[ev.stream_id].body += ev.data
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    if isinstance(ev, h2.events.StreamEnded):
                        req = pending.pop(ev.stream_id)
                        self.requests.append(req)
                        t = asyncio.ensure_future(answer(ev.stream_id, req))
                        tasks.add(t)
                        t.add_done_callback(tasks.discard)
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            writer.close()

    @contextmanager
    def running(self) -> Iterator[H2Upstream]:
        self.raw._conn = self._conn  # type: ignore[method-assign]
        with self.raw.running():
            yield self
