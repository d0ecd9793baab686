"""brownout.proxy.pacing.StallPoint: where the stall's pause falls, without sockets."""

from __future__ import annotations

import gzip

from brownout.proxy.pacing import StallPoint

SSE = "text/event-stream"


def pause_at(point: StallPoint, chunks: list[bytes]) -> tuple[int, int] | None:
    """(chunk index, offset in it) of the pause, or None."""
    for i, chunk in enumerate(chunks):
        cut = point.feed(chunk)
        if cut is not None:
            return i, cut
    return None


def test_pause_falls_right_after_the_nth_data_event_even_inside_a_chunk() -> None:
    chunks = [b": keep-alive\n\ndata: 1\n", b"\ndata: 2\n\ndata: 3\n\n"]
    assert pause_at(StallPoint(2, SSE), chunks) == (1, len(b"\ndata: 2\n\n"))
    assert pause_at(StallPoint(1, SSE), chunks) == (1, 1)  # "data: 1" ends with the next chunk's first byte


def test_comments_blank_blocks_and_data_less_events_do_not_count() -> None:
    chunks = [b": ping\n\n", b"\n\n", b"event: ping\n\n", b"data: x\n\n"]
    assert pause_at(StallPoint(1, SSE), chunks) == (3, len(b"data: x\n\n"))


def test_ndjson_lines_count() -> None:
    assert pause_at(StallPoint(2, "application/x-ndjson"), [b'{"a":1}\n{"a":2}\n{"a":3}\n']) == (0, 16)


def test_zero_pauses_at_the_start_and_non_streams_never() -> None:
    assert StallPoint(0, SSE).at_start and StallPoint(0, SSE).done
    plain = StallPoint(0, "application/json")
    assert not plain.at_start and plain.feed(b"data: x\n\n") is None


def test_encoded_streams_pause_after_the_chunk_that_ends_the_nth_event() -> None:
    body = gzip.compress(b": k\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n")
    chunks = [body[:20], body[20:]]
    point = StallPoint(2, SSE, "gzip")
    assert pause_at(point, chunks) == (1, len(chunks[1]))  # whole chunk: encoded bytes are never split


def test_undecodable_encodings_count_chunks() -> None:
    assert pause_at(StallPoint(2, SSE, "compress"), [b"a", b"b", b"c"]) == (1, 1)
    assert pause_at(StallPoint(2, SSE, "gzip"), [b"not gzip", b"x", b"y"]) == (1, 1)  # corrupt: fall back
