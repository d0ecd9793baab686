"""The event-stream codec against botocore's own decoder, both ways, and fed in chunks of any size."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer, ParserError
from hypothesis import given, settings
from hypothesis import strategies as st

from brownout.core.wire.eventstream import (
    Decoder,
    EventStreamEvent,
    FrameError,
    encode,
    event_of,
    replace_payload,
)
from brownout.core.wire.framing import EventStreamFramer, framer_for

# -- an independent encoder, written from the format's description: every header type ----------------
_PACK = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


def reference_frame(headers: list[tuple[str, int, Any]], payload: bytes) -> bytes:
    block = b""
    for name, kind, value in headers:
        raw = name.encode()
        block += bytes([len(raw)]) + raw + bytes([kind])
        if kind in _PACK:
            block += struct.pack(_PACK[kind], value)
        elif kind in (6, 7):
            data = value.encode() if kind == 7 else value
            block += struct.pack(">H", len(data)) + data
        elif kind == 9:
            block += value
    total = 16 + len(block) + len(payload)
    prelude = struct.pack(">II", total, len(block))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return head + struct.pack(">I", zlib.crc32(head))


def botocore_messages(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    buf = EventStreamBuffer()
    buf.add_data(data)
    return [(m.headers, m.payload) for m in buf]


def ours(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    return [(m.headers, m.payload) for m in Decoder().feed(data)]


_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12).filter(
    lambda s: len(s.encode()) < 256
)
_typed_value = st.one_of(
    st.tuples(st.just(0), st.just(True)),
    st.tuples(st.just(1), st.just(False)),
    st.tuples(st.just(2), st.integers(-(2**7), 2**7 - 1)),
    st.tuples(st.just(3), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just(4), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(5), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(6), st.binary(max_size=40)),
    st.tuples(st.just(7), st.text(max_size=40)),
    st.tuples(st.just(8), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(9), st.binary(min_size=16, max_size=16)),
)
_typed_headers = st.dictionaries(_names, _typed_value, max_size=6).map(
    lambda d: [(name, kind, value) for name, (kind, value) in d.items()]
)
_plain_value = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=40), st.text(max_size=40))
_plain_headers = st.dictionaries(_names, _plain_value, max_size=6)
_payloads = st.binary(max_size=300)


@settings(max_examples=200, deadline=None)
@given(_plain_headers, _payloads)
def test_what_we_encode_botocore_decodes(headers: dict[str, Any], payload: bytes) -> None:
    frame = encode(headers, payload)
    assert botocore_messages(frame) == [(headers, payload)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_typed_headers, _payloads), min_size=1, max_size=4))
def test_what_botocore_decodes_we_decode_alike(frames: list[tuple[list[Any], bytes]]) -> None:
    data = b"".join(reference_frame(h, p) for h, p in frames)
    theirs = botocore_messages(data)
    assert len(theirs) == len(frames)
    assert ours(data) == theirs


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_plain_headers, _payloads), min_size=1, max_size=5),
    st.lists(st.integers(0, 2000), max_size=12),
)
def test_chunk_boundaries_change_nothing(frames: list[tuple[dict[str, Any], bytes]], cuts: list[int]) -> None:
    data = b"".join(encode(h, p) for h, p in frames)
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    decoder, got = Decoder(), []
    for piece in pieces:
        got += [(m.headers, m.payload) for m in decoder.feed(piece)]
    assert got == [(h, p) for h, p in frames] and decoder.pending == 0
    framer = EventStreamFramer()
    events = [ev for piece in pieces for ev in framer.feed(piece)] + framer.flush()
    assert b"".join(ev.raw for ev in events) == data  # bytes conserved, one event per message
    assert len(events) == len(frames)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_plain_headers, _payloads), min_size=1, max_size=3), st.integers(0), st.integers(1, 255))
def test_a_corrupt_byte_is_refused_as_botocore_refuses_it(frames: list[Any], at: int, flip: int) -> None:
    data = bytearray(b"".join(encode(h, p) for h, p in frames))
    data[at % len(data)] ^= flip
    with pytest.raises((ParserError, struct.error, KeyError, UnicodeDecodeError)):
        botocore_messages(bytes(data))
    with pytest.raises(FrameError):
        ours(bytes(data))


def test_a_partial_message_waits_for_the_rest() -> None:
    frame = encode({":message-type": "event", ":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    decoder = Decoder()
    assert decoder.feed(frame[:5]) == [] and decoder.feed(frame[5:-1]) == [] and decoder.pending == len(frame) - 1
    (message,) = decoder.feed(frame[-1:])
    assert message.raw == frame and message.headers[":event-type"] == "messageStop"


def test_limits_are_botocores() -> None:
    prelude = struct.pack(">II", 16 + 200 * 1024, 200 * 1024)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(FrameError, match="limits"):
        Decoder().feed(prelude)
    with pytest.raises(ParserError):
        botocore_messages(prelude)


def test_replace_payload_keeps_headers_and_fixes_crcs() -> None:
    frame = encode({":message-type": "event", ":event-type": "contentBlockDelta", "n": 7}, b'{"a":1}')
    edited = replace_payload(frame, b'{"a":2,"b":[]}')
    assert botocore_messages(edited) == [({":message-type": "event", ":event-type": "contentBlockDelta", "n": 7},
                                           b'{"a":2,"b":[]}')]  # fmt: skip


def test_payload_parts_present_their_decoded_bytes_and_rewrap() -> None:
    inner = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}'
    spaced = encode(
        {":message-type": "event", ":event-type": "chunk"}, b'{ "bytes": "' + base64.b64encode(inner) + b'"}'
    )
    assert event_of(Decoder().feed(spaced)[0]).data == inner.decode()  # however the JSON is spaced
    payload = b'{"bytes":"' + base64.b64encode(inner) + b'","p":"abcdef"}'
    (message,) = Decoder().feed(encode({":message-type": "event", ":event-type": "chunk"}, payload))
    event = event_of(message)
    assert event.data == inner.decode() and event.event == "chunk" and event.envelope is not None
    edited = event.with_data(event.data.replace("Hi", "Bye"))
    ((_, new_payload),) = botocore_messages(edited)
    assert new_payload.startswith(b'{"bytes":"') and new_payload.endswith(b'"p":"abcdef"}')
    assert b"Bye" in base64.b64decode(json.loads(new_payload)["bytes"])


def test_exceptions_and_errors_are_named_by_their_type() -> None:
    exc = encode(
        {":message-type": "exception", ":exception-type": "throttlingException", ":content-type": "application/json"},
        b'{"message":"slow down"}',
    )
    err = encode({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    events = framer_for("application/vnd.amazon.eventstream").feed(exc + err)  # type: ignore[union-attr]
    assert [(e.event, getattr(e, "message_type", None)) for e in events] == [
        ("throttlingException", "exception"),
        ("InternalFailure", "error"),
    ]
    assert events[1].json() == {"message": "boom"}


def test_the_framer_passes_bytes_that_are_no_message_on_as_they_are() -> None:
    good = encode({":message-type": "event", ":event-type": "messageStart"}, b'{"role":"assistant"}')
    junk = b"<html>not an event stream</html>"
    framer = EventStreamFramer()
    events = framer.feed(good + junk) + framer.feed(b"more") + framer.flush()
    assert b"".join(e.raw for e in events) == good + junk + b"more"
    assert events[0].event == "messageStart"
    assert all(isinstance(e, EventStreamEvent) and e.problem and not e.data for e in events[1:])


def test_a_message_cut_short_is_flushed_as_a_problem() -> None:
    frame = encode({":message-type": "event", ":event-type": "metadata"}, b"{}")
    framer = EventStreamFramer()
    assert framer.feed(frame[:-3]) == []
    (tail,) = framer.flush()
    assert isinstance(tail, EventStreamEvent) and tail.problem == "message cut short" and tail.raw == frame[:-3]
