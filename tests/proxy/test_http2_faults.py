"""Faults on HTTP/2 client connections: they act on one stream, never on its neighbours."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import Any

import h2.config
import h2.connection
import httpx
import pytest

from tests.proxy.test_faults_proxy import rule, rules
from tests.reliability.badinput import h2_first_context


def until(pred: Any, timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not pred():
        time.sleep(0.02)
    return bool(pred())


@pytest.mark.timeout(30)
def background_stream(client: httpx.Client, url: str, out: dict[str, Any]) -> threading.Thread:
    """Stream `url` on a thread sharing the client's HTTP/2 connection; `out` gets version, body or error."""

    def stream() -> None:
        try:
            with client.stream("GET", url) as s:
                out["version"] = s.http_version
                out["body"] = b"".join(s.iter_raw())
        except httpx.HTTPError as e:
            out["error"] = repr(e)

    t = threading.Thread(target=stream)
    t.start()
    return t


def test_reset_on_one_http2_stream_leaves_the_other_streams_alone(upstream_tls, brownout_proxy):
    """Before: a request-phase reset closed the whole client connection, so every other request
    multiplexed on it (another session's stream, a parallel tool call) died with it."""
    proxy = brownout_proxy(rules(rule("rst", "{type: reset}", "{path: '/tools/*'}")), upstream=upstream_tls)
    verify = h2_first_context(proxy.ca_bundle_path)
    out: dict[str, Any] = {}
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=5) as client:
        t = background_stream(client, f"{upstream_tls.url}/sse?events=6&delay_ms=80", out)
        time.sleep(0.15)  # the stream is under way on the shared connection
        with pytest.raises(httpx.RemoteProtocolError):  # the reset stream: StreamReset, as from a real server
            client.get(f"{upstream_tls.url}/tools/search")
        t.join()
    assert out.get("version") == "HTTP/2" and "error" not in out, out
    assert out["body"].count(b"data:") == 6


def _h2_tunnel(proxy: Any, upstream: Any) -> tuple[ssl.SSLSocket, h2.connection.H2Connection, str]:
    """A raw HTTP/2 client through the CONNECT tunnel (httpx never sends RST_STREAM; curl and Go do)."""
    host = f"127.0.0.1:{upstream.port}"
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.sendall(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert b" 200" in sock.recv(4096)
    ctx = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    ctx.set_alpn_protocols(["h2"])
    tls = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    tls.sendall(conn.data_to_send())
    return tls, conn, host


@pytest.mark.timeout(30)
def test_hang_ends_when_an_http2_client_cancels_the_stream(upstream_tls, brownout_proxy):
    """Before: `hang` (no duration) waited for the client *connection* to close; an HTTP/2 client
    that gives up cancels only the stream, so the hook, its state and its max_concurrent slot
    were held for as long as the connection lived."""
    cfg = rules(rule("hold", "{type: hang}", "{path: '/tools/*'}", "{max_concurrent: 1}"))
    proxy = brownout_proxy(cfg, upstream=upstream_tls)
    tls, conn, host = _h2_tunnel(proxy, upstream_tls)
    try:
        sid = conn.get_next_available_stream_id()
        headers = [(":method", "GET"), (":path", "/tools/search"), (":scheme", "https"), (":authority", host)]
        conn.send_headers(sid, headers, end_stream=True)
        tls.sendall(conn.data_to_send())
        assert until(lambda: proxy.addon.in_flight == 1)
        conn.reset_stream(sid)  # the client's timeout: RST_STREAM, the connection stays open
        tls.sendall(conn.data_to_send())
        assert until(lambda: proxy.addon.in_flight == 0, 2.0), "the hang outlived its cancelled stream"
        held = proxy.addon.engine.status()["rules"][0]
        assert held["in_flight"] == 0  # the blast-radius slot is free again
    finally:
        tls.close()


@pytest.mark.timeout(30)
def test_upstream_dying_mid_body_drops_only_that_http2_stream(brownout_proxy):
    """Before: a buffered body cut short upstream made brownout close the whole client connection
    (to avoid mitmproxy's 502 page), killing every other stream multiplexed on it."""
    import asyncio

    from tests.reliability.rawupstream import RawUpstream, chunked, routes

    async def slow(req: Any, reader: Any, writer: Any) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i in range(5):
            writer.write(chunked(f"data: {i}\n\n".encode(), end=i == 4))
            await writer.drain()
            await asyncio.sleep(0.08)
        return True

    async def cut(req: Any, reader: Any, writer: Any) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{"a": 1')
        await writer.drain()
        writer.transport.close()
        return False

    up = RawUpstream(routes({"/slow": slow, "/cut": cut}), tls=True)
    with up.running():
        proxy = brownout_proxy(upstream=up)
        verify = h2_first_context(proxy.ca_bundle_path)
        out: dict[str, Any] = {}
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=5) as client:
            t = background_stream(client, f"{up.url}/slow", out)
            time.sleep(0.1)
            with pytest.raises(httpx.RemoteProtocolError):  # the cut stream is reset, not answered with a 502
                client.get(f"{up.url}/cut")
            t.join()
    assert out.get("version") == "HTTP/2" and "error" not in out, out
    assert out["body"].count(b"data:") == 5
