"""Promise 2, size and protocols: 200 MB bodies, HTTP/2, WebSocket, bodiless answers, 1,000 streams.

The method every case follows is in tests/reliability/badinput.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import pytest

from tests.reliability.badinput import (
    CHAT,
    CHAT_STREAM,
    GOOD_CHAT,
    JSON_CT,
    SSE_CT,
    TOOL_JSON,
    Collector,
    chat_chunk,
    client_for,
    h2_first_context,
    internal_errors,
    rule,
    rules,
    sse,
    wait_until,
)
from tests.reliability.probes import RssPeak, rss_bytes
from tests.reliability.rawupstream import (
    H2Response,
    H2Upstream,
    RawRequest,
    RawUpstream,
    chunked,
    fixed,
    http_response,
    ws_echo,
)


def big_body(total: int, ctype: bytes, piece: bytes) -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (ctype, total))
        sent = 0
        while sent < total:
            part = piece[: total - sent]
            writer.write(part)
            sent += len(part)
            await writer.drain()
        return False

    return handle


MB = 1 << 20


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind,total", [("binary", 200 * MB), ("sse", 50 * MB)])
def test_huge_response_streams_with_bounded_memory(brownout_proxy, kind, total):
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    if kind == "binary":
        handler = big_body(total, b"application/octet-stream", bytes(range(256)) * 4096)
    else:  # an SSE stream of ~1 KB events: framed and parsed event by event, never accumulated
        event = sse(chat_chunk("x" * 900))
        handler = big_body(total, b"text/event-stream", event * (MB // len(event) + 1))
    up = RawUpstream(handler)
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30, verify=False) as client:
        client.get(up.url + "/warmup")  # first exchange: allocations that are not per-byte
        seen.wait(1)
        before = rss_bytes()
        got = 0
        t0 = time.monotonic()
        with RssPeak() as rss, client.stream("POST", up.url + "/v1/chat/completions", json=CHAT_STREAM) as r:
            for chunk in r.iter_raw(65536):
                got += len(chunk)
        elapsed = time.monotonic() - t0
    assert got == total
    growth = rss.peak - before
    print(f"{kind}: {total / MB:.0f} MB in {elapsed:.1f} s, RSS growth {growth / MB:.1f} MB")
    assert growth < 50 * MB, f"RSS grew {growth / MB:.0f} MB while streaming {total / MB:.0f} MB"
    ex = seen.wait(2)[1]
    assert ex.streamed and ex.response_bytes == total and ex.status == 200
    if kind == "sse":
        assert ex.stream_events >= total // 1063 - 1  # every ~1 KB event counted
    assert internal_errors(proxy) == {}


# --- HTTP/2 ----------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_http2_client_through_brownout(upstream_tls, brownout_proxy):
    """An h2 client (ALPN over the CONNECT tunnel) to an HTTP/1.1 TLS upstream: recorded, parsed.

    brownout runs mitmproxy with connection_strategy=lazy, so mitmproxy answers the client's TLS
    handshake before it dials the upstream and picks the client's *first* ALPN choice. curl, Go and
    browsers put h2 first; httpx puts http/1.1 first, so a stock `httpx.Client(http2=True)` gets
    HTTP/1.1 through brownout (harmless: same semantics). The client here offers h2 first.
    """
    seen = Collector()
    proxy = brownout_proxy(upstream=upstream_tls, on_exchange=seen)
    verify = h2_first_context(proxy.ca_bundle_path)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=10) as client:
        r = client.post(f"{upstream_tls.url}/v1/chat/completions", json=CHAT)
        assert r.http_version == "HTTP/2" and r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"]
        with client.stream("POST", f"{upstream_tls.url}/v1/chat/completions", json=CHAT_STREAM) as s:
            assert s.http_version == "HTTP/2"
            lines = [ln for ln in s.iter_lines() if ln.startswith("data:")]
        assert lines[-1] == "data: [DONE]"
    a, b = seen.wait(2)
    assert (a.provider, a.status, a.parse_error) == ("openai", 200, None) and a.output_text
    assert b.streamed and b.stream_complete is True and b.stream_events == len(lines)
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(30)
def test_http2_upstream_through_brownout(brownout_proxy):
    """An h2 client to an h2-only upstream: mitmproxy speaks h2 on both sides; bodies intact, faults work."""
    seen = Collector()
    events = [sse(chat_chunk(w)) for w in ("a", "b", "c")] + [sse("[DONE]")]

    def respond(req: RawRequest) -> H2Response:
        if b'"stream": true' in req.body or b'"stream":true' in req.body:
            return H2Response(200, SSE_CT, events, delay_s=0.05)
        if req.path == "/tools/weather":
            return H2Response(200, JSON_CT, [TOOL_JSON])
        return H2Response(200, JSON_CT, [GOOD_CHAT[:40], GOOD_CHAT[40:]])

    up = H2Upstream(respond)
    with up.running():
        cfg = rules(rule("inject", "{type: inject, text: INJECTED}", "{provider: http}"))
        proxy = brownout_proxy(cfg, upstream=up, on_exchange=seen)
        verify = h2_first_context(proxy.ca_bundle_path)
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=10) as client:
            r = client.post(f"{up.url}/v1/chat/completions", json=CHAT)
            assert r.http_version == "HTTP/2" and r.content == GOOD_CHAT
            with client.stream("POST", f"{up.url}/v1/chat/completions", json=CHAT_STREAM) as s:
                body = b"".join(s.iter_raw())
            assert body == b"".join(events)
            r = client.get(f"{up.url}/tools/weather")
            assert r.json()["conditions"].endswith("INJECTED")
    assert [q.protocol for q in up.requests] == ["HTTP/2"] * 3
    a, b, c = seen.wait(3)
    assert a.output_text == "hello there" and a.parse_error is None
    assert b.streamed and b.stream_events == 4 and b.stream_complete is True
    assert c.faults and c.faults[0].fault == "inject"
    assert internal_errors(proxy) == {}


# --- WebSocket -------------------------------------------------------------------------------


def ws_session(host: str, port: int, target: str, messages: list[str | bytes], authority: str) -> list[str | bytes]:
    """Open a WebSocket (absolute-form target when talking to a proxy), send messages, collect echoes."""
    from wsproto import WSConnection
    from wsproto.connection import ConnectionType
    from wsproto.events import (
        AcceptConnection,
        BytesMessage,
        CloseConnection,
        Message,
        Request,
        TextMessage,
    )

    ws = WSConnection(ConnectionType.CLIENT)
    sock = socket.create_connection((host, port), timeout=10)
    try:
        sock.sendall(ws.send(Request(host=authority, target=target)))
        out: list[str | bytes] = []
        parts: list[Any] = []
        accepted = closing = False
        pending = list(messages)
        while True:
            if accepted and pending and len(out) == len(messages) - len(pending):
                m = pending.pop(0)  # one at a time: send, wait for its echo
                sock.sendall(ws.send(TextMessage(data=m) if isinstance(m, str) else BytesMessage(data=m)))
            if accepted and not pending and not closing and len(out) == len(messages):
                sock.sendall(ws.send(CloseConnection(code=1000)))
                closing = True
            data = sock.recv(65536)
            ws.receive_data(data or None)
            for ev in ws.events():
                if isinstance(ev, AcceptConnection):
                    accepted = True
                elif isinstance(ev, Message):
                    parts.append(ev.data)
                    if ev.message_finished:
                        out.append("".join(parts) if isinstance(ev, TextMessage) else b"".join(parts))
                        parts = []
                elif isinstance(ev, CloseConnection):
                    return out
            if not data:
                return out
    finally:
        sock.close()


WS_MESSAGES: list[str | bytes] = [
    "hello",
    '{"jsonrpc": "2.0", "method": "tools/call", "id": 1}',
    bytes(range(256)) * 4096,
    "data: [DONE]\n\n",
    "ü" * 5000,
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("with_rules", [False, True], ids=["no_rules", "body_fault_rules"])
def test_websocket_passes_through_untouched(brownout_proxy, with_rules):
    seen = Collector()
    cfg = (
        rules(
            rule("bad-json", "{type: malformed_json, target: body}"),
            rule("inject", "{type: inject, text: INJECTED}"),
        )
        if with_rules
        else None
    )
    proxy = brownout_proxy(cfg, on_exchange=seen)
    up = RawUpstream(ws_echo)
    with up.running():
        authority = f"127.0.0.1:{up.port}"
        direct = ws_session("127.0.0.1", up.port, "/ws", WS_MESSAGES, authority)
        proxied = ws_session(proxy.host, proxy.port, f"http://{authority}/ws", WS_MESSAGES, authority)
    assert direct == WS_MESSAGES
    assert proxied == WS_MESSAGES
    ex = seen.wait(1)[0]
    assert ex.status == 101 and ex.error_type is None
    assert wait_until(lambda: proxy.addon._states == {})
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(30)
def test_bodiless_responses_stay_bodiless_under_body_faults(brownout_proxy):
    """204, 304 and HEAD answers carry no body: a body fault (inject) must not give them one."""
    seen = Collector()
    proxy = brownout_proxy(rules(rule("inject", "{type: inject, text: INJECTED}")), on_exchange=seen)
    up = RawUpstream(fixed(b""))
    # `fixed` closes the connection after each answer, so it must say so: without `connection:
    # close` a keep-alive response invites the proxy to reuse a connection the server is closing,
    # and the second request races the FIN (a 502 now and then, as it would for any client).
    close = [*JSON_CT, ("connection", "close")]
    with up.running():
        client = client_for(proxy)
        for n, (method, raw, status) in enumerate(
            [
                ("GET", http_response(204, close, b"", length=False, reason="No Content"), 204),
                ("GET", http_response(304, close, b"", length=False, reason="Not Modified"), 304),
                ("HEAD", http_response(200, [*close, ("content-length", "42")], b"", length=False), 200),
            ],
            start=1,
        ):
            up.handler = fixed(raw)
            # Two requests on one connection: an invented body would corrupt the second response.
            for _ in range(2):
                r = client.request(method, up.url + "/tools/weather")
                assert r.status_code == status and r.content == b""
            seen.wait(2 * n)
    assert internal_errors(proxy) == {}


# --- load --------------------------------------------------------------------------------------


def paced_sse(events: int, interval_s: float) -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i in range(events):
            writer.write(chunked(sse(chat_chunk(str(i))), end=False))
            await writer.drain()
            await asyncio.sleep(interval_s)
        writer.write(chunked(sse("[DONE]")))
        await writer.drain()
        return True

    return handle


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_1000_concurrent_streams(brownout_proxy):
    """1,000 SSE streams open at once through one proxy; each gets every event, in order."""
    import resource

    n, events = 1000, 5
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 5 * n + 500  # client + proxy (two sides) + upstream sockets, all in this process
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"needs {need} file descriptors, hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    up = RawUpstream(paced_sse(events, 0.2))
    want = [f"data: {chat_chunk(str(i))}" for i in range(events)] + ["data: [DONE]"]

    async def one(client: httpx.AsyncClient, i: int, all_open: asyncio.Event, opened: list[int]) -> list[str]:
        async with client.stream("POST", f"{up.url}/v1/chat/completions", json=CHAT_STREAM) as r:
            opened[0] += 1
            if opened[0] == n:
                all_open.set()
            return [ln async for ln in r.aiter_lines() if ln]

    async def main() -> tuple[list[list[str]], float]:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
        timeout = httpx.Timeout(40.0, pool=40.0)
        async with httpx.AsyncClient(
            proxy=proxy.proxy_url(), trust_env=False, limits=limits, timeout=timeout, verify=False
        ) as client:
            all_open, opened = asyncio.Event(), [0]
            t0 = time.monotonic()
            results = await asyncio.gather(*(one(client, i, all_open, opened) for i in range(n)))
            return results, time.monotonic() - t0

    with up.running():
        results, elapsed = asyncio.run(main())
        print(f"{n} streams in {elapsed:.1f} s")
        assert up.stats.connections == n  # one connection per stream, all open together
        assert all(r == want for r in results), next(r for r in results if r != want)
        exs = seen.wait(n, timeout_s=20)
        assert all(ex.streamed and ex.stream_complete and ex.stream_events == events + 1 for ex in exs)
        assert wait_until(lambda: proxy.addon._states == {})
    assert internal_errors(proxy) == {}
