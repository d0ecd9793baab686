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
