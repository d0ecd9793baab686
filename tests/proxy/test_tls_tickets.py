"""brownout sends a client its TLS 1.3 session tickets with its first response, not the instant the handshake
ends (proxy/tlstickets.py): a client that reads on one thread and writes on another (the websockets sync client
under the openai SDK's sync realtime client) must not process them while it writes its first request."""

from __future__ import annotations

import select
import socket
import ssl
from pathlib import Path
from typing import Any

from OpenSSL import SSL

from brownout.proxy.demo.tlsgen import make_tls_files
from brownout.proxy.tlstickets import HeldTickets


class TlsThroughProxy:
    """A TLS 1.3 client on memory BIOs over a CONNECT tunnel: every byte the proxy sends is seen raw."""

    def __init__(self, proxy: Any, upstream: Any) -> None:
        host, port = upstream.url.split("//")[1].split(":")
        self.sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        self.sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        assert self.sock.recv(4096).startswith(b"HTTP/1.1 200")
        ctx = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.host = host

    def flush(self) -> None:
        if data := self.outgoing.read():
            self.sock.sendall(data)

    def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self.flush()
                self.incoming.write(self.sock.recv(65536))
            else:
                self.flush()  # the client's Finished
                return

    def raw_within(self, seconds: float) -> bytes:
        """What the proxy sends in `seconds` with nothing asked of it."""
        readable, _, _ = select.select([self.sock], [], [], seconds)
        return self.sock.recv(65536) if readable else b""

    def get(self, path: str) -> bytes:
        self.tls.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n".encode())
        self.flush()
        body = b""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return body
            self.incoming.write(data)
            try:
                while chunk := self.tls.read(65536):
                    body += chunk
            except ssl.SSLWantReadError:
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return body


def test_the_tickets_wait_for_the_first_response_and_then_arrive(brownout_proxy: Any, upstream_tls: Any) -> None:
    proxy = brownout_proxy(upstream=upstream_tls)
    client = TlsThroughProxy(proxy, upstream_tls)
    client.handshake()
    assert client.tls.version() == "TLSv1.3"
    assert client.raw_within(0.5) == b""  # without the hold, two NewSessionTicket records arrive here at once
    response = client.get("/ping")
    assert response.startswith(b"HTTP/1.1 200")
    assert client.tls.session is not None and client.tls.session.has_ticket  # delivered with the response


def _server_pair(directory: Path) -> tuple[HeldTickets, SSL.Connection]:
    """A TLS 1.3 server connection (wrapped) and a client one, on memory BIOs, handshake done."""
    files = make_tls_files(directory)
    server_ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    server_ctx.use_certificate_chain_file(str(files.cert_pem))
    server_ctx.use_privatekey_file(str(files.key_pem))
    server = HeldTickets(SSL.Connection(server_ctx))
    server.set_accept_state()
    client = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD))
    client.set_connect_state()
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except SSL.WantReadError:
                pass
        _pump(client, server)
        _pump(server, client)
    return server, client


def _pump(src: Any, dst: Any) -> int:
    moved = 0
    while True:
        try:
            data = src.bio_read(65535)
        except SSL.WantReadError:
            return moved
        dst.bio_write(data)
        moved += len(data)


def test_held_bytes_leave_first_and_in_order(tmp_path: Path) -> None:
    server, client = _server_pair(tmp_path)
    assert server.holding > 0  # the tickets
    assert _pump(server, client) == 0
    server.sendall(b"first answer")
    assert _pump(server, client) > 0
    assert client.recv(100) == b"first answer"  # records arrive in order, or the client could not decrypt them
