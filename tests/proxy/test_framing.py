import random

from brownout.core.wire.framing import NDJSONFramer, SSEFramer, framer_for

SSE = (
    b'data: {"a": 1}\n\n'
    b'event: message_start\ndata: {"type": "message_start"}\n\n'
    b": keep-alive comment\n\n"
    b"data: line1\ndata: line2\r\n\r\n"
    b"data: [DONE]\n\n"
)


def feed_in_pieces(framer, data: bytes, seed: int):
    rng = random.Random(seed)
    events, i = [], 0
    while i < len(data):
        n = rng.randint(1, 7)
        events += framer.feed(data[i : i + n])
        i += n
    return events + framer.flush()


def test_sse_events_survive_any_chunking_and_conserve_bytes():
    for seed in range(50):
        events = feed_in_pieces(SSEFramer(), SSE, seed)
        assert b"".join(e.raw for e in events) == SSE
        assert [e.data for e in events if e.data] == ['{"a": 1}', '{"type": "message_start"}', "line1\nline2", "[DONE]"]
        assert events[1].event == "message_start"


def test_ndjson_lines_and_unterminated_tail():
    data = b'{"message": {"content": "a"}}\n{"done": true}'
    events = feed_in_pieces(NDJSONFramer(), data, 3)
    assert [e.data for e in events] == ['{"message": {"content": "a"}}', '{"done": true}']
    assert events[1].json() == {"done": True}
    assert b"".join(e.raw for e in events) == data


def test_framer_for_content_types():
    assert isinstance(framer_for("text/event-stream; charset=utf-8"), SSEFramer)
    assert isinstance(framer_for("application/x-ndjson"), NDJSONFramer)
    assert framer_for("application/json") is None


def test_many_events_in_one_chunk_each_come_out_once_bytes_conserved():
    body = b"".join(b"data: %d\n\n" % i for i in range(20_000))
    for framer in (SSEFramer(), NDJSONFramer()):
        events = framer.feed(body) + framer.flush()
        assert b"".join(e.raw for e in events) == body
    events = SSEFramer().feed(body)
    assert [e.data for e in events[:3]] == ["0", "1", "2"] and len(events) == 20_000


def test_boundary_split_across_chunks_at_every_position():
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        data = b"data: a" + sep + b"data: b" + sep
        for cut in range(1, len(data)):
            framer = SSEFramer()
            events = framer.feed(data[:cut]) + framer.feed(data[cut:])
            assert [e.data for e in events] == ["a", "b"], (sep, cut)
            assert framer.pending() == b""


def test_an_event_with_no_boundary_overflows_the_cap_instead_of_growing():
    framer = SSEFramer(max_pending=1000)
    assert framer.feed(b"data: " + b"x" * 500) == [] and not framer.overflowed
    assert framer.feed(b"x" * 600) == [] and framer.overflowed
    assert framer.pending_size == 1106
    assert framer.take_pending().startswith(b"data: x") and framer.pending() == b""
    small = NDJSONFramer(max_pending=10)
    assert [e.data for e in small.feed(b'{"a":1}\n{"b":')] == ['{"a":1}'] and not small.overflowed


def test_events_completed_in_the_chunk_that_overflows_are_still_returned():
    framer = SSEFramer(max_pending=100)
    events = framer.feed(b"data: a\n\n" + b"data: " + b"y" * 200)
    assert [e.data for e in events] == ["a"] and framer.overflowed
