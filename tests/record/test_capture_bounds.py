"""A recorded stream holds about what the cassette keeps (`record.max_body_bytes`), whatever its shape:
an event that never ends is not buffered whole, and many tiny events count what holding them costs.
"""

from __future__ import annotations

import tracemalloc
import zlib

from mitmproxy.test import tflow

from brownout.core.secrets import SecretHeaders
from brownout.proxy.record.capture import Capture
from brownout.proxy.record.cassette import EVENT_OVERHEAD

KEEP = 64 << 10
CHUNK = 64 << 10


def capture(encoding: str = "") -> Capture:
    flow = tflow.tflow(resp=True)
    assert flow.response is not None
    flow.response.headers["content-type"] = "text/event-stream"
    if encoding:
        flow.response.headers["content-encoding"] = encoding
    cap = Capture(flow, "s", KEEP, b"", SecretHeaders())
    cap.response_head(flow)
    cap.start_stream("text/event-stream")
    return cap


def held(cap: Capture) -> int:
    events = cap.rec.events or []
    return sum(len(e.data) for e in events) + EVENT_OVERHEAD * len(events)


def test_an_event_without_end_is_not_buffered_past_what_is_kept() -> None:
    cap = capture()
    piece = b"data: " + b"x" * (CHUNK - 6)
    tracemalloc.start()
    try:
        for _ in range(128):  # 8 MB with no event boundary
            cap.feed(piece)
            piece = b"x" * CHUNK
        cap.feed(b"")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cap.rec.truncated and cap.rec.events == []
    assert peak < 4 * KEEP + 4 * CHUNK, f"{peak} bytes held for a recording keeping {KEEP}"


def test_tiny_events_count_what_holding_them_costs() -> None:
    cap = capture()
    stream = b"x\n\n" * (1 << 18)  # 768 KB of 3-byte events
    for i in range(0, len(stream), CHUNK):
        cap.feed(stream[i : i + CHUNK])
    cap.feed(b"")
    events = cap.rec.events or []
    assert cap.rec.truncated and 0 < len(events) < KEEP // EVENT_OVERHEAD
    assert held(cap) <= KEEP
    assert b"".join(e.data for e in events) == stream[: 3 * len(events)]  # a prefix, byte for byte


def test_a_compressed_stream_of_tiny_events_is_inflated_and_framed_up_to_the_cap_only() -> None:
    cap = capture("gzip")
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    wire = c.compress(b"x\n\n" * (8 << 20)) + c.flush()  # 24 MB of events in about 24 KB
    tracemalloc.start()
    try:
        for i in range(0, len(wire), 4096):
            cap.feed(wire[i : i + 4096])
        cap.feed(b"")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cap.rec.truncated and held(cap) <= KEEP
    assert peak < 8 << 20, f"{peak} bytes held for a recording keeping {KEEP}"


def test_a_stream_under_the_cap_is_kept_whole() -> None:
    cap = capture()
    stream = b"".join(b'data: {"n": %d}\n\n' % i for i in range(200))
    cap.feed(stream[:1000])
    cap.feed(stream[1000:])
    cap.feed(b"")
    events = cap.rec.events or []
    assert not cap.rec.truncated and len(events) == 200
    assert b"".join(e.data for e in events) == stream


def test_a_chunk_that_inflates_far_is_kept_decoded_not_framed_event_by_event() -> None:
    cap = capture("gzip")
    cap.max_body = 4 << 20
    plain = b"data: {}\n\n" * (1 << 20)  # 10 MB of events in about 20 KB
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    wire = c.compress(plain) + c.flush()
    calls = 0
    for i in range(0, len(wire), 4096):
        cap.feed(wire[i : i + 4096])
        calls += 1
    cap.feed(b"")
    events = cap.rec.events or []
    # Framing a chunk's millions of events in one call would hold the loop for seconds.
    assert cap.rec.truncated and 0 < len(events) <= calls
    kept = b"".join(e.data for e in events)
    assert kept == plain[: len(kept)] and held(cap) <= cap.max_body


def test_a_compressed_stream_flushed_per_event_is_kept_event_by_event() -> None:
    cap = capture("gzip")
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    stream = [b'data: {"n": %d}\n\n' % i for i in range(200)]
    for event in stream:
        cap.feed(c.compress(event) + c.flush(zlib.Z_SYNC_FLUSH))
    cap.feed(c.flush())
    cap.feed(b"")
    assert not cap.rec.truncated and cap.rec.decoded == "gzip"
    assert [e.data for e in cap.rec.events or []] == stream
