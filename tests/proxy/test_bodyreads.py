"""The chunks of a chunked body that reach brownout in one read leave it as one chunk, at once.

mitmproxy passes each chunk of a chunked body through its layers, the stream callable and a write of
its own; an LLM stream is chunked one event per chunk. On brownout's connections what one read
brings travels as one chunk (proxy/bodyreads.py): the same bytes, never held for a later read.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest
from mitmproxy import connection, options
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers.http._http1 import Http1Client

from brownout.proxy import bodyreads
from tests.reliability.badinput import internal_errors
from tests.reliability.rawupstream import RawRequest, RawUpstream, chunked

EVENTS = [b'data: {"choices": [{"delta": {"content": "token %d"}}]}\n\n' % i for i in range(20)]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def read_chunks(sock: socket.socket, until: bytes, buf: bytearray) -> list[bytes]:
    """Chunks of a chunked body from `sock` (after its head), until their joined data ends with `until`."""
    chunks: list[bytes] = []
    while not b"".join(chunks).endswith(until):
        while b"\r\n" not in buf:
            buf += sock.recv(65536) or b""
        size_line, _, rest = bytes(buf).partition(b"\r\n")
        size = int(size_line, 16)
        while len(rest) < size + 2:
            rest += sock.recv(65536)
        chunks.append(rest[:size])
        buf[:] = rest[size + 2 :]
    return chunks


def ask(port: int) -> tuple[socket.socket, bytearray]:
    """A raw request; returns the socket and what followed the response head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    return sock, bytearray(rest)


@pytest.mark.timeout(30)
def test_chunks_that_arrive_together_leave_as_one(brownout_proxy):
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(HEAD + chunked(*EVENTS))  # one write, 20 chunks
        await writer.drain()
        return False

    seen: list = []
    with RawUpstream(handle).running() as up:
        proxy = brownout_proxy("version: 1\n", mode=f"reverse:{up.url}", on_exchange=seen.append)
        sock, buf = ask(proxy.port)
        with sock:
            chunks = read_chunks(sock, EVENTS[-1], buf)
    assert b"".join(chunks) == b"".join(EVENTS)
    assert len(chunks) <= 2, f"{len(chunks)} chunks for one read of 20"  # mitmproxy alone: 20


@pytest.mark.timeout(30)
def test_a_chunk_is_never_held_for_the_next_read(brownout_proxy):
    """The second half is sent only once the client holds the first: joining reads must not wait."""
    first_seen = threading.Event()

    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(HEAD + chunked(*EVENTS[:10], end=False))
        await writer.drain()
        await asyncio.get_running_loop().run_in_executor(None, first_seen.wait, 10)
        writer.write(chunked(*EVENTS[10:]))
        await writer.drain()
        return False

    with RawUpstream(handle).running() as up:
        proxy = brownout_proxy("version: 1\n", mode=f"reverse:{up.url}")
        sock, buf = ask(proxy.port)
        with sock:
            first = read_chunks(sock, EVENTS[9], buf)
            first_seen.set()
            second = read_chunks(sock, EVENTS[-1], buf)
    assert b"".join(first) == b"".join(EVENTS[:10]) and b"".join(second) == b"".join(EVENTS[10:])


def test_only_a_brownout_masters_connections_join_reads(brownout_proxy):
    client = connection.Client(peername=("127.0.0.1", 1), sockname=("127.0.0.1", 2))
    proxy = brownout_proxy("version: 1\n")
    ours = Http1Client(Context(client, proxy.master.options))
    plain = Http1Client(Context(client, options.Options()))
    assert bodyreads.joins_reads(ours) and not bodyreads.joins_reads(plain)


@pytest.mark.timeout(30)
def test_trailers_fail_the_answer_as_a_protocol_error_and_the_proxy_goes_on(brownout_proxy, caplog):
    """mitmproxy 12.2 raises NotImplementedError on HTTP/1 trailers; here the answer ends cut, cleanly."""

    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if req.path == "/ok":
            writer.write(HEAD + chunked(*EVENTS[:2]))
        else:
            writer.write(HEAD + chunked(*EVENTS[:2], end=False) + b"0\r\nx-checksum: 1\r\n\r\n")
        await writer.drain()
        return False

    with RawUpstream(handle).running() as up:
        proxy = brownout_proxy("version: 1\n", mode=f"reverse:{up.url}")
        sock, buf = ask(proxy.port)
        with sock:
            assert read_chunks(sock, EVENTS[1], buf) and not sock.recv(65536)  # the events, then a close
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as again:
            again.sendall(b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\n")
            assert again.recv(65536).startswith(b"HTTP/1.1 200")
    assert internal_errors(proxy) == {}
    assert not [r for r in caplog.records if "crashed" in r.getMessage()]  # mitmproxy's own layer raised
