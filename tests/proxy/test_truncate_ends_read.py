"""Every truncation ends the client's read right after the cut, whatever the body's size or framing.

The upstreams here never end the body on their own: one sends a large body with a content-length
and keeps the connection open, the others stream events until the client goes away. Without an
explicit end after the cut, the client would wait for bytes that never come.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import zlib
from typing import Any

import httpx
import pytest

from tests.reliability.badinput import CHAT_STREAM, Collector, chat_chunk, h2_first_context, internal_errors
from tests.reliability.rawupstream import RawRequest, RawUpstream

MB = 1 << 20
BODY = bytes(range(256)) * (6 * MB // 256)  # 6 MB: streamed past the 2m buffer_max_bytes below
EVENT = f"data: {chat_chunk('word ')}\n\n".encode()


def config(fault: str) -> str:
    return (
        "version: 1\nseed: 1\nproxy: {buffer_max_bytes: 2m}\n"
        f"rules:\n  - name: cut\n    match: {{}}\n    fault: {fault}\n    schedule: {{}}\n"
    )


async def big_body_then_idle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: %d\r\n\r\n" % len(BODY))
    for i in range(0, len(BODY), 256 << 10):
        writer.write(BODY[i : i + (256 << 10)])
        await writer.drain()
    return True  # keep-alive: the connection stays open for a next request that never comes


def endless_events(encoding: str = "") -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        z = zlib.compressobj(6, zlib.DEFLATED, 31)
        if encoding:
            head += b"content-encoding: gzip\r\n"
        writer.write(head + b"\r\n")
        deadline = time.monotonic() + 20  # bounded, should the proxy never let go
        while time.monotonic() < deadline:
            piece = z.compress(EVENT) + z.flush(zlib.Z_SYNC_FLUSH) if encoding else EVENT
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.05)
        return False

    return handle


def read_all(client: httpx.Client, url: str, **kw: Any) -> tuple[bytes, float, str | None]:
    """(raw body, seconds until the read ended, the error that ended it, if any)."""
    body, error = b"", None
    t0 = time.monotonic()
    try:
        with client.stream("POST", url, **kw) as r:
            for chunk in r.iter_raw():
                body += chunk
    except httpx.HTTPError as e:
        error = type(e).__name__
    return body, time.monotonic() - t0, error


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "fault,kept",
    [("{type: truncate, at_fraction: 0.5}", len(BODY) // 2), ("{type: truncate, at_bytes: 100000}", 100_000)],
)
def test_a_large_body_with_a_content_length_ends_at_the_cut(brownout_proxy, fault, kept):
    seen = Collector()
    proxy = brownout_proxy(config(fault), on_exchange=seen)
    up = RawUpstream(big_body_then_idle)
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        body, took_s, error = read_all(client, up.url + "/v1/files/blob", json={})
    assert error is None and body == BODY[:kept]  # a complete, shorter body: the clean cut
    assert took_s < 8, f"the read ended after {took_s:.1f} s"
    ex = seen.wait(1)[0]
    assert [f.fault for f in ex.faults] == ["truncate"] and ex.error_type is None
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_an_endless_stream_ends_right_after_the_cut(brownout_proxy, encoding):
    seen = Collector()
    proxy = brownout_proxy(config("{type: truncate, after_events: 3}"), on_exchange=seen)
    up = RawUpstream(endless_events(encoding))
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        body, took_s, error = read_all(client, up.url + "/v1/chat/completions", json=CHAT_STREAM)
    assert error is None and took_s < 5, (error, took_s)
    plain = gzip.decompress(body) if encoding else body  # gzip.decompress checks the trailer too
    assert plain == EVENT * 3
    ex = seen.wait(1)[0]
    assert ex.stream_events == 3 and ex.stream_complete is False and ex.error_type is None
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_an_http2_client_read_ends_after_the_cut(brownout_proxy):
    seen = Collector()
    up = RawUpstream(endless_events(), tls=True)
    with up.running():
        proxy = brownout_proxy(config("{type: truncate, after_events: 3}"), upstream=up, on_exchange=seen)
        verify = h2_first_context(proxy.ca_bundle_path)
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=10) as client:
            body, took_s, first_error = read_all(client, up.url + "/v1/chat/completions", json=CHAT_STREAM)
            # The connection (and its other streams) is still good for the next request.
            again, _, error = read_all(client, up.url + "/v1/chat/completions", json=CHAT_STREAM)
    assert took_s < 5, f"the read ended after {took_s:.1f} s"
    # HTTP/2 ends the cut stream with a reset of that stream alone: mitmproxy has no clean way to
    # end a response body early, so brownout closes the upstream connection serving it.
    assert body == EVENT * 3 and first_error in (None, "RemoteProtocolError")
    assert again == EVENT * 3 and error == first_error
    assert seen.wait(2)[0].stream_events == 3
