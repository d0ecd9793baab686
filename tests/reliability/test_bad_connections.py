"""Promise 2, connections: upstreams that close or never answer, clients that disconnect.

The method every case follows is in tests/reliability/badinput.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from tests.reliability.badinput import (
    CHAT,
    CHAT_STREAM,
    GOOD_CHAT,
    JSON_CT,
    Collector,
    chat_chunk,
    client_for,
    fetch,
    internal_errors,
    sse,
    wait_until,
)
from tests.reliability.rawupstream import (
    RawRequest,
    RawUpstream,
    chunked,
    fixed,
    http_response,
)


def loop_tasks(handle: Any) -> int:
    """Number of asyncio tasks on the proxy's event loop, counted on that loop."""
    import concurrent.futures

    loop = handle.master.event_loop
    fut: concurrent.futures.Future[int] = concurrent.futures.Future()
    loop.call_soon_threadsafe(lambda: fut.set_result(len(asyncio.all_tasks(loop))))
    return fut.result(5)


def closing_midstream(head: bytes, *parts: bytes) -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(head)
        for p in parts:
            writer.write(p)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.transport.close()  # FIN mid-body
        return False

    return handle


@pytest.mark.timeout(30)
def test_upstream_closing_mid_stream(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    big = b"x" * 3_000_000  # above stream_large_bodies (1m): streamed
    cases = [
        (
            "sse_chunked_cut",
            CHAT_STREAM,
            closing_midstream(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                chunked(sse(chat_chunk("a")), end=False),
                chunked(sse(chat_chunk("b")), end=False),
            ),
        ),
        (
            "sse_content_length_cut",
            CHAT_STREAM,
            closing_midstream(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\n",
                sse(chat_chunk("a")),
            ),
        ),
        (
            "large_body_cut",
            CHAT,
            closing_midstream(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 6000000\r\n\r\n", big
            ),
        ),
        (
            "json_buffered_cut",
            CHAT,
            closing_midstream(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n", GOOD_CHAT[:50]
            ),
        ),
        ("no_response_at_all", CHAT, closing_midstream(b"")),
        ("headers_cut", CHAT, closing_midstream(b"HTTP/1.1 200 OK\r\ncontent-ty")),
    ]
    up = RawUpstream(fixed(b""))
    with up.running():
        for n, (name, req, handler) in enumerate(cases, start=1):
            up.handler = handler
            direct = fetch(up.url + "/v1/chat/completions", body=req)
            proxied = fetch(up.url + "/v1/chat/completions", proxy, body=req)
            ex = seen.wait(n)[-1]
            assert direct["error"] == "RemoteProtocolError", name
            assert ex.error_type == "connection" and ex.error_message, name
            if name in ("no_response_at_all", "headers_cut"):
                # No response started: the client's connection ends unanswered, as it does directly
                # (plain mitmdump would make up a 502 page, which SDKs retry as a server error).
                assert (proxied["status"], proxied["error"]) == (None, direct["error"]), name
                assert ex.status is None, name
            elif name == "json_buffered_cut":
                # A buffered 200 cut short: the client sees the connection drop, never a 502 page.
                assert proxied["status"] is None and proxied["error"] == "RemoteProtocolError", name
                assert ex.status == 200 and not ex.streamed, name
            else:
                # Streamed: the same status, the same bytes, then the same broken connection.
                assert (proxied["status"], proxied["error"]) == (direct["status"], direct["error"]), name
                assert proxied["body"] == direct["body"] and ex.response_bytes == len(direct["body"]), name
                assert ex.streamed and ex.status == 200, name
    assert internal_errors(proxy) == {}
    assert wait_until(lambda: proxy.addon._states == {})


def endless_sse(interval_s: float = 0.02) -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        while True:  # until the peer goes away (ConnectionError ends the connection)
            writer.write(chunked(sse(chat_chunk("tick")), end=False))
            await writer.drain()
            await asyncio.sleep(interval_s)

    return handle


@pytest.mark.timeout(30)
def test_client_disconnecting_mid_stream_leaks_nothing(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    up = RawUpstream(endless_sse())
    with up.running():
        # Warm up (lazily created tasks and connections), then take the baseline.
        up.handler = fixed(http_response(200, JSON_CT, GOOD_CHAT))
        fetch(up.url + "/v1/chat/completions", proxy)
        seen.wait(1)
        assert wait_until(lambda: up.stats.open == 0)
        time.sleep(0.2)
        baseline = loop_tasks(proxy)
        up.handler = endless_sse()

        def read_then_leave() -> int:
            with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10, verify=False) as client:
                with client.stream("POST", up.url + "/v1/chat/completions", json=CHAT_STREAM) as r:
                    got = 0
                    for line in r.iter_lines():
                        got += line.startswith("data:")
                        if got == 3:
                            return got  # leaving the block closes the connection mid-stream
            return got

        n = 20
        threads = [threading.Thread(target=read_then_leave) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        exs = seen.wait(1 + n)[1:]
        assert all(ex.error_type == "connection" and ex.streamed and ex.stream_events >= 3 for ex in exs)
        # Upstream connections are closed, per-flow state and loop tasks go back to the baseline.
        assert wait_until(lambda: up.stats.open == 0), up.stats
        assert wait_until(lambda: proxy.addon._states == {})
        assert wait_until(lambda: loop_tasks(proxy) <= baseline), (loop_tasks(proxy), baseline)
    assert internal_errors(proxy) == {}


async def never_answers(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    await reader.read()  # reads the request, then silence until the peer closes
    return False


@pytest.mark.timeout(30)
def test_upstream_that_never_answers(brownout_proxy):
    """The client's own timeout ends it; brownout adds no wait and cleans up; tcp_timeout bounds the rest.

    No brownout hang/latency code is involved: with no rule, `request` returns at once. mitmproxy's
    only relevant timeout is `tcp_timeout` (default 600 s of inactivity), which closes idle
    connections; here it is set to 2 s to show the bound without waiting ten minutes.
    """
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen, extra_options={"tcp_timeout": 2})
    up = RawUpstream(never_answers)
    with up.running():
        client = client_for(proxy)
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.post(up.url + "/v1/chat/completions", json=CHAT, timeout=0.5)
        assert time.monotonic() - t0 < 2.0
        ex = seen.wait(1)[0]  # the client left: recorded as a connection error
        assert ex.error_type == "connection" and ex.status is None
        assert wait_until(lambda: up.stats.open == 0)  # upstream connection released
        # A client with no timeout at all: mitmproxy's tcp_timeout closes the idle connection.
        t0 = time.monotonic()
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=None) as patient:
            with pytest.raises(httpx.RemoteProtocolError):
                patient.post(up.url + "/v1/chat/completions", json=CHAT)
        elapsed = time.monotonic() - t0
        assert 1.5 < elapsed < 6.0, elapsed
        ex = seen.wait(2)[1]
        assert ex.error_type == "connection"
        assert wait_until(lambda: proxy.addon._states == {})
        assert wait_until(lambda: up.stats.open == 0)
    assert internal_errors(proxy) == {}


# --- size and memory -------------------------------------------------------------------------
