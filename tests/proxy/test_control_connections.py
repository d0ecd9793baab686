"""The control API's connections, seen from raw sockets: an idle client is closed after a bound, open
connections are capped, and a request whose Content-Length is negative, absurd, doubled or missing for a
chunked body is answered at once and its connection closed, never left waiting for bytes."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from brownout.proxy.control import ControlServer
from tests.exporters.test_control_api import TOKEN, FakeTarget

IDLE_S = 0.5


@pytest.fixture
def server() -> Iterator[ControlServer]:
    s = ControlServer(FakeTarget(), listen="127.0.0.1:0", token=TOKEN, idle_timeout_s=IDLE_S, max_connections=3)
    yield s.start()
    s.stop()


def _connect(server: ControlServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took."""
    start, data = time.monotonic(), b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - start


def _request(method: str, path: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: control", f"Authorization: Bearer {TOKEN}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_an_idle_connection_is_closed_after_the_bound(server: ControlServer) -> None:
    with _connect(server) as silent:
        data, took = _read_all(silent)
    assert data == b"" and IDLE_S * 0.8 < took < IDLE_S + 5


def test_a_kept_alive_connection_is_closed_once_idle(server: ControlServer) -> None:
    with _connect(server) as sock:
        sock.sendall(_request("GET", "/healthz"))
        data, took = _read_all(sock)  # HTTP/1.1: kept alive after the answer, until idle too long
    assert data.startswith(b"HTTP/1.1 200 ") and b'{"ok": true}' in data and took < IDLE_S + 5


def test_connections_past_the_cap_are_closed_at_once_and_served_again_once_some_end(
    server: ControlServer,
) -> None:
    held = [_connect(server) for _ in range(3)]
    time.sleep(0.1)  # the server has taken the three
    try:
        with _connect(server) as extra:
            data, took = _read_all(extra)
        assert data == b"" and took < IDLE_S  # closed before any idle bound could
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    with _connect(server) as sock:
        sock.sendall(_request("GET", "/healthz", "Connection: close"))
        assert _read_all(sock)[0].startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (("Content-Length: -5",), 400),
        (("Content-Length: 99999999999999999999999",), 400),
        (("Content-Length: 1e3",), 400),
        (("Content-Length: 10", "Content-Length: 12"), 400),
        (("Content-Length: 1000000000",), 413),
        (("Transfer-Encoding: chunked",), 411),
    ],
)
@pytest.mark.parametrize(("method", "path"), [("PUT", "/rules/slow"), ("POST", "/reload"), ("GET", "/healthz")])
def test_a_bad_content_length_is_refused_at_once_and_the_connection_closed(
    server: ControlServer, headers: tuple[str, ...], status: int, method: str, path: str
) -> None:
    with _connect(server) as sock:
        sock.sendall(_request(method, path, *headers, body=b'{"enabled": false}'))
        data, took = _read_all(sock)
    head = data.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in head
    assert took < IDLE_S  # answered, not left to wait for the bytes it announced
    assert server.target.rules["slow"] is True  # type: ignore[attr-defined] - nothing was done


def test_a_body_no_endpoint_reads_closes_the_connection(server: ControlServer) -> None:
    # POST /faults/pause reads no body: its bytes must not be taken for the next request.
    smuggled = _request("PUT", "/rules/slow", "Content-Length: 18", body=b'{"enabled": false}')
    with _connect(server) as sock:
        sock.sendall(_request("POST", "/faults/pause", f"Content-Length: {len(smuggled)}", body=smuggled))
        data, _ = _read_all(sock)
    assert data.count(b"HTTP/1.1 ") == 1 and data.startswith(b"HTTP/1.1 200 ")
    assert server.target.rules["slow"] is True  # type: ignore[attr-defined]


def test_a_good_body_still_works_on_a_kept_alive_connection(server: ControlServer) -> None:
    body = b'{"enabled": false}'
    with _connect(server) as sock:
        sock.sendall(_request("PUT", "/rules/slow", f"Content-Length: {len(body)}", body=body))
        sock.sendall(_request("GET", "/status", "Connection: close"))
        data, _ = _read_all(sock)
    assert data.count(b"HTTP/1.1 200 ") == 2 and server.target.rules["slow"] is False  # type: ignore[attr-defined]
