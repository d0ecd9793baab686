"""The pacing relay (stall, throttle) through the real proxy: what it counts, encoded streams,
TLS upstreams, HTTP/2 clients, upstream-proxy mode, and what the exchange records."""

from __future__ import annotations

import asyncio
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import brotli
import httpx
import pytest
import zstandard

from brownout.core.guard import Guard
from brownout.core.span_attributes import exchange_attributes
from brownout.faults.base import StreamTiming
from brownout.proxy.demo.httpserver import Handler, HttpServer, Request, Responder
from brownout.proxy.relay import RELAY_HEADER, Relay, RelayTarget
from tests.proxy.test_faults_proxy import MSG, TOOLS, rule, rules
from tests.proxy.test_passthrough import collect, wait_for
from tests.reliability.badinput import h2_first_context


@contextmanager
def serving(handler: Handler) -> Iterator[str]:
    """`handler` served over plain HTTP from a background loop; yields its base URL."""
    server = HttpServer(handler)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        port = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0, None), loop).result(10)
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def scripted_upstream(chunks: list[bytes], headers: dict[str, str], gap_s: float = 0.02) -> Any:
    """An upstream that answers every request with `chunks`, `gap_s` apart."""

    async def handler(req: Request, resp: Responder) -> None:
        await resp.start_stream(200, "text/event-stream", headers)
        for i, chunk in enumerate(chunks):
            if i:
                await asyncio.sleep(gap_s)
            await resp.chunk(chunk)

    return serving(handler)


async def forward_proxy(req: Request, resp: Responder) -> None:
    """A minimal plain-HTTP forward proxy (absolute-form targets), standing in for a corporate proxy."""
    headers = {k: v for k, v in req.headers.items() if k not in ("proxy-connection", "connection", "content-length")}
    async with httpx.AsyncClient(trust_env=False) as client:
        async with client.stream(req.method, req.target, headers=headers, content=req.body) as r:
            await resp.start_stream(r.status_code, r.headers.get("content-type", ""))
            async for chunk in r.aiter_raw():
                await resp.chunk(chunk)


def data_arrivals(client: httpx.Client, url: str) -> tuple[float, list[tuple[str, float]]]:
    """(seconds to the response headers, [(data line, seconds since the request)])."""
    t0 = time.perf_counter()
    with client.stream("GET", url) as r:
        head = time.perf_counter() - t0
        lines = [(line, time.perf_counter() - t0) for line in r.iter_lines() if line.startswith("data:")]
    return head, lines


def stall(after: int, pause_ms: int) -> str:
    return rules(rule("stall", f"{{type: stall, after_events: {after}, pause_ms: {pause_ms}}}"))


def test_stall_counts_only_data_events_not_keepalives(brownout_proxy):
    # Keep-alive comments and a stray blank line come first: counting them would pause after "1".
    chunks = [
        b": keep-alive\n\n",
        b"\n",
        b"data: 1\n\n",
        b": keep-alive\n\n",
        b"data: 2\n\n",
        b": ping\n\n",
        b"data: 3\n\n",
    ]
    with scripted_upstream(chunks, {}) as url:
        proxy = brownout_proxy(stall(2, 500))
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
            _, lines = data_arrivals(client, f"{url}/sse")
    assert [line for line, _ in lines] == ["data: 1", "data: 2", "data: 3"]
    (_, t1), (_, t2), (_, t3) = lines
    assert t2 - t1 < 0.3 and t3 - t2 >= 0.45, lines


def test_stall_after_zero_events_pauses_before_the_first_event(upstream, brownout_proxy):
    proxy = brownout_proxy(stall(0, 500), upstream=upstream)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        head, lines = data_arrivals(client, f"{upstream.url}/sse?events=3&delay_ms=10")
    assert len(lines) == 3
    # Headers on time, then the pause: measured from the headers, so a loaded machine cannot fake it.
    assert lines[0][1] - head >= 0.45, (head, lines)
    assert lines[2][1] - lines[0][1] < 0.3


def _compressor(encoding: str) -> Callable[[bytes], bytes]:
    """Compress one event and flush, the way servers that compress event streams do."""
    if encoding in ("gzip", "deflate"):
        c = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        return lambda b: c.compress(b) + c.flush(zlib.Z_SYNC_FLUSH)
    if encoding == "br":
        b_ = brotli.Compressor()
        return lambda b: b_.process(b) + b_.flush()
    z = zstandard.ZstdCompressor().compressobj()
    return lambda b: z.compress(b) + z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def _decompressor(encoding: str) -> Callable[[bytes], bytes]:
    if encoding in ("gzip", "deflate"):
        return zlib.decompressobj(31 if encoding == "gzip" else 15).decompress
    if encoding == "br":
        return brotli.Decompressor().process
    return zstandard.ZstdDecompressor().decompressobj().decompress


ENCODINGS = ["gzip", "deflate", "br", "zstd"]


def encoded_upstream() -> Any:
    """GET /<encoding>: a keep-alive and four events, each compressed and flushed on its own."""
    streams: dict[str, list[bytes]] = {}
    for encoding in ENCODINGS:
        compress = _compressor(encoding)
        streams[encoding] = [compress(b": keep-alive\n\n")] + [compress(b'data: {"i":%d}\n\n' % i) for i in range(4)]

    async def handler(req: Request, resp: Responder) -> None:
        encoding = req.path.strip("/")
        await resp.start_stream(200, "text/event-stream", {"content-encoding": encoding})
        for chunk in streams[encoding]:
            await asyncio.sleep(0.02)
            await resp.chunk(chunk)

    return serving(handler), streams


def test_stall_on_encoded_streams_pauses_and_keeps_the_encoded_bytes(brownout_proxy):
    server, streams = encoded_upstream()
    with server as url:
        proxy = brownout_proxy(stall(2, 300))
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
            for encoding in ENCODINGS:
                t0 = time.perf_counter()
                with client.stream("GET", f"{url}/{encoding}") as r:
                    assert r.headers["content-encoding"] == encoding
                    raw = [(chunk, time.perf_counter() - t0) for chunk in r.iter_raw()]
                # The client gets upstream's encoded bytes intact ...
                assert b"".join(c for c, _ in raw) == b"".join(streams[encoding]), encoding
                # ... and the pause sits between the second and third data events (keep-alive not counted).
                decode, text, seen = _decompressor(encoding), b"", {}
                for chunk, at in raw:
                    text += decode(chunk)
                    seen.update({i: at for i in range(4) if i not in seen and b'{"i":%d}' % i in text})
                assert len(seen) == 4 and seen[2] - seen[1] >= 0.25 and seen[1] - seen[0] < 0.2, (encoding, seen)


@pytest.mark.contained_errors
def test_upstream_proxy_mode_goes_on_unpaced_and_counts_the_failure(upstream, brownout_proxy):
    # client -> brownout (upstream mode) -> forward proxy -> upstream: the relay cannot be reached
    # through the upstream proxy, so the stall is skipped rather than turned into a 502.
    with serving(forward_proxy) as hop:
        proxy = brownout_proxy(stall(1, 2000), mode=f"upstream:{hop}")
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=5) as client:
            t0 = time.perf_counter()
            r = client.get(f"{upstream.url}/sse?events=3&delay_ms=10")
            took = time.perf_counter() - t0
    assert r.status_code == 200 and r.text.count("data:") == 3
    assert took < 1.5, took
    assert proxy.addon.guard.errors["relay"] == 1


def test_relayed_tls_stream_records_the_real_upstream_and_parses_the_stream(
    upstream_tls, brownout_proxy, openai_client
):
    seen, on_exchange = collect()
    cfg = rules(rule("stall", "{type: stall, after_events: 1, pause_ms: 400}", "{provider: openai}"))
    proxy = brownout_proxy(cfg, upstream=upstream_tls, on_exchange=on_exchange)
    client = openai_client(proxy, upstream_tls)
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model="gpt-4o", messages=MSG, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert time.perf_counter() - t0 >= 0.35  # paced: the relay reached the TLS upstream
    assert any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    wait_for(seen, 1)
    ex = seen[0]
    assert [f.fault for f in ex.faults] == ["stall"]
    attrs = exchange_attributes(ex)
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == upstream_tls.port
    assert ex.scheme == "https" and proxy.addon.relay.port not in (ex.port, attrs["server.port"])
    assert [t.name for t in ex.tool_calls] == ["get_weather"]
    assert ex.usage.output_tokens and ex.usage.input_tokens


def test_relay_serves_an_http2_client(upstream_tls, brownout_proxy):
    # h2 client -> mitmproxy -> (HTTP/1.1) relay -> (HTTP/1.1, TLS) upstream.
    proxy = brownout_proxy(stall(1, 400), upstream=upstream_tls)
    verify = h2_first_context(proxy.ca_bundle_path)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True) as client:
        with client.stream("GET", f"{upstream_tls.url}/sse?events=3&delay_ms=10") as r:
            assert r.http_version == "HTTP/2"
            t0 = time.perf_counter()
            times = [time.perf_counter() - t0 for line in r.iter_lines() if line.startswith("data:")]
    assert len(times) == 3 and times[1] - times[0] >= 0.35, times


def test_relayed_response_keeps_the_upstreams_status_line_and_header_names(brownout_proxy):
    from tests.reliability.rawupstream import RawUpstream, fixed

    raw = (
        b"HTTP/1.1 200 Quite OK\r\nContent-Type: application/json\r\nX-Request-ID: req-7\r\n"
        b'Content-Length: 11\r\n\r\n{"ok": 1} \n'
    )
    proxy = brownout_proxy(rules(rule("slow", "{type: throttle, bytes_per_s: 100000}")))
    with RawUpstream(fixed(raw)).running() as up:
        with httpx.Client(trust_env=False) as direct_client:
            direct = direct_client.get(f"{up.url}/x")
        with httpx.Client(proxy=proxy.url, trust_env=False) as client:
            relayed = client.get(f"{up.url}/x")
    assert relayed.content == direct.content == b'{"ok": 1} \n'
    assert relayed.extensions["reason_phrase"] == direct.extensions["reason_phrase"] == b"Quite OK"
    names = [k for k, _ in relayed.headers.raw]
    assert b"Content-Type" in names and b"X-Request-ID" in names, names


class _BrokenRate(float):
    """A throttle rate the relay cannot compute with: stands in for a bug in the relay's pacing."""

    def __truediv__(self, other: object) -> float:
        raise ZeroDivisionError("planted relay bug")


def test_a_relay_bug_ends_that_response_and_is_counted_by_the_proxys_guard() -> None:
    upstream = httpx.MockTransport(lambda request: httpx.Response(200, stream=httpx.ByteStream(b"x" * 100)))

    async def two_requests() -> list[int | str]:
        relay = Relay(guard, transport=upstream)
        await relay.start()
        seen: list[int | str] = []
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                for rate in (_BrokenRate(1000.0), None):
                    token = relay.register(RelayTarget("http://upstream.test/", StreamTiming(bytes_per_s=rate)))
                    try:
                        r = await client.get(f"http://127.0.0.1:{relay.port}/", headers={RELAY_HEADER: token})
                        seen.append(r.status_code)
                    except httpx.HTTPError as e:
                        seen.append(type(e).__name__)
        finally:
            await relay.stop()
        return seen

    guard = Guard()
    first, second = asyncio.run(two_requests())
    assert first == "RemoteProtocolError" and second == 200  # the body was cut; the next response is whole
    assert guard.snapshot() == {"relay": 1}


def test_a_client_leaving_a_quiet_relayed_stream_closes_its_upstream_connection(brownout_proxy):
    # A long-lived stream with nothing more to say (an MCP listen stream): only the client's close ends it.
    ended = threading.Event()

    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        writer.write(head + b"d\r\ndata: ready\n\n\r\n")
        await writer.drain()
        if await reader.read() == b"":  # says nothing more, until its peer hangs up
            ended.set()
        writer.close()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(asyncio.start_server(quiet, "127.0.0.1", 0), loop).result(5)
    try:
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/listen"
        proxy = brownout_proxy(rules(rule("slow", "{type: latency, phase: events, delay_ms: 10}")))
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client, client.stream("GET", url) as r:
            assert next(line for line in r.iter_lines() if line) == "data: ready"
        assert ended.wait(5), "the relay kept the upstream stream open after its client left"
    finally:
        loop.call_soon_threadsafe(server.close)  # on its own loop: asyncio's Server is not thread-safe
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
