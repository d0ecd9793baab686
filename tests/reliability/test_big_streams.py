"""Big and compressed event streams through the proxy: linear work, bounded memory, parsed as streams.

A 12 MB OpenAI stream of 80,000 events is sent plain, gzip-compressed, and gzip-compressed under a
truncate fault; a 16 MB event stream has no event boundary at all. Timing is relative to the plain
stream measured in the same test (a compressed stream must not cost several times as much), and
memory is this process's RSS growth (proxy, upstream and client live here).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from functools import cache
from typing import Any

import httpx
import pytest

from tests.reliability.badinput import CHAT_STREAM, Collector, internal_errors, rule, rules
from tests.reliability.probes import RssPeak
from tests.reliability.rawupstream import RawRequest, RawUpstream

MB = 1 << 20
EVENTS = 80_000


@cache
def openai_stream() -> bytes:
    def chunk(i: int) -> bytes:
        delta = {"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}
        doc = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [delta]}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    return b"".join(chunk(i) for i in range(EVENTS)) + b"data: [DONE]\n\n"


def sender(body: bytes, encoding: str = "") -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        if encoding:
            head += b"content-encoding: %s\r\n" % encoding.encode()
        writer.write(head + b"\r\n")
        for i in range(0, len(body), 64 << 10):
            piece = body[i : i + (64 << 10)]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return False

    return handle


def run_case(
    proxy: Any, seen: Collector, body: bytes, encoding: str = "", case: str = "plain"
) -> tuple[bytes, Any, float, int]:
    """(raw body received, exchange, seconds from request to recorded exchange, RSS growth)."""
    up = RawUpstream(sender(body, encoding))
    n = len(seen.seen)
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=60) as client:
        t0 = time.monotonic()
        with (
            RssPeak() as rss,
            client.stream("POST", up.url + "/v1/chat/completions", json=CHAT_STREAM, headers={"x-case": case}) as r,
        ):
            raw = b"".join(r.iter_raw())
            ex = seen.wait(n + 1, timeout_s=60)[n]
        return raw, ex, time.monotonic() - t0, rss.growth


@pytest.mark.timeout(240)
def test_compressed_and_edited_streams_cost_about_what_a_plain_one_does(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    plain = openai_stream()
    packed = gzip.compress(plain, compresslevel=6, mtime=0)

    raw, ex, base_s, growth = run_case(proxy, seen, plain)
    assert raw == plain and ex.stream_events == EVENTS + 1 and ex.stream_complete is True
    assert growth < 150 * MB, f"plain stream: RSS grew {growth / MB:.0f} MB"

    raw, ex, gzip_s, growth = run_case(proxy, seen, packed, "gzip")
    assert raw == packed  # no fault: the compressed bytes pass untouched
    # Decoding is cheap next to parsing, and the compressed copy is parsed at no more than half the
    # loop's pace (other flows get the rest): about twice the plain stream's time. With the framer
    # re-scanning its buffer per event it took about five times as long.
    assert gzip_s < 3 * base_s + 1.0, f"gzip stream took {gzip_s:.1f} s, a plain one {base_s:.1f} s"
    assert growth < 150 * MB, f"gzip stream: RSS grew {growth / MB:.0f} MB"
    assert ex.stream_events == EVENTS + 1 and ex.stream_complete is True and ex.uninspected is None
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(240)
def test_a_compressed_stream_cut_by_truncate_is_valid_gzip_of_the_events_kept(brownout_proxy):
    seen = Collector()
    cut = rule("cut", "{type: truncate, after_events: 60000}", "{header: {x-case: cut}}")
    proxy = brownout_proxy(rules(cut), on_exchange=seen)
    plain = openai_stream()
    packed = gzip.compress(plain, compresslevel=6, mtime=0)
    _, _, base_s, _ = run_case(proxy, seen, plain)

    raw, ex, cut_s, growth = run_case(proxy, seen, packed, "gzip", case="cut")
    decoder = zlib.decompressobj(31)
    kept = decoder.decompress(raw)
    assert decoder.eof and not decoder.unused_data  # a complete gzip body, not a torn one
    assert kept == plain[: len(kept)] and kept.count(b"data: ") == 60_000 and kept.endswith(b"\n\n")
    assert ex.stream_events == 60_000 and ex.stream_complete is False and ex.parse_error is None
    assert [f.fault for f in ex.faults] == ["truncate"]
    assert growth < 150 * MB, f"RSS grew {growth / MB:.0f} MB"
    assert cut_s < 3 * base_s + 2, f"cut gzip stream took {cut_s:.1f} s, a plain one {base_s:.1f} s"
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(120)
def test_an_event_stream_without_boundaries_passes_untouched_and_is_not_buffered(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(on_exchange=seen)
    _, _, base_s, _ = run_case(proxy, seen, openai_stream())
    body = b"data: " + b"x" * (16 * MB) + b"\n\n"
    raw, ex, took_s, growth = run_case(proxy, seen, body)
    assert raw == body
    assert took_s < 3 * base_s + 2, f"16 MB without a boundary took {took_s:.1f} s, 12 MB of events {base_s:.1f} s"
    assert growth < 150 * MB, f"RSS grew {growth / MB:.0f} MB"
    assert ex.uninspected == "event_too_large" and "event_max_bytes" in ex.notes["uninspected"]
    assert ex.stream_complete is None  # unknown, not "cut": the end was never read
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert registry.get_sample_value("brownout_uninspected_total", {"reason": "event_too_large"}) == 1
    assert internal_errors(proxy) == {}
