"""The cassette format and its writer: exact bytes, versioned files, replace or append, bounded queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brownout.proxy.record.cassette import (
    EVENT_OVERHEAD,
    VERSION,
    CassetteError,
    Event,
    Recorded,
    WsClose,
    WsMessage,
    file_name,
    read_cassette,
    read_dir,
)
from brownout.proxy.record.writer import CassetteWriter


def rec(session: str = "s", body: bytes = b'{"a":1}', **kw: object) -> Recorded:
    return Recorded(
        session=session,
        seq=0,
        method="POST",
        url="https://api.example.com/v1/x",
        request_headers=[("content-type", "application/json"), ("X-Dup", "1"), ("X-Dup", "2")],
        request_body=body,
        status=200,
        reason="OK",
        response_headers=[("content-type", "text/event-stream")],
        **kw,  # type: ignore[arg-type]
    )


def test_bodies_and_events_round_trip_byte_for_byte(tmp_path: Path) -> None:
    binary = bytes(range(256))
    events = [Event(0.01, b'data: {"x": "\xc3\xa9"}\n\n'), Event(0.2, b"\xff\xfe not utf-8\n\n"), Event(0.3, b"\n")]
    original = rec(body=binary, events=events, headers_s=0.005, end_s=0.31, error="cut")
    writer = CassetteWriter(tmp_path)
    writer.put(original)
    writer.close()
    cassette = read_cassette(tmp_path / file_name("s"))
    [back] = cassette.exchanges
    assert back.request_body == binary and [(e.t, e.data) for e in back.events or []] == [(e.t, e.data) for e in events]
    assert back.request_headers == original.request_headers and back.error == "cut" and back.seq == 1
    line = (tmp_path / file_name("s")).read_text().splitlines()[1]
    assert '"text":"data: {\\"x\\": \\"é\\"}\\n\\n"' in line  # readable where it can be
    assert json.loads(line)["response"]["events"][1]["b64"]


def session_rec(**kw: object) -> Recorded:
    r = rec(**kw)
    r.status, r.reason, r.response_headers = 101, "Switching Protocols", [("upgrade", "websocket")]
    return r


def test_a_websocket_session_round_trips_both_ways_with_its_times_and_close(tmp_path: Path) -> None:
    messages = [
        WsMessage(0.01, False, b'{"type":"session.created"}'),
        WsMessage(0.2, True, b'{"type":"response.create"}'),
        WsMessage(0.35, False, b'{"serverContent":{}}', binary=True),  # Gemini Live: JSON in binary frames
        WsMessage(0.4, False, b"\xff\x00 audio", binary=True),
    ]
    original = session_rec(messages=messages, close=WsClose(1001, "expired", "server"), end_s=0.5)
    writer = CassetteWriter(tmp_path)
    writer.put(original)
    writer.close()
    [back] = read_cassette(tmp_path / file_name("s")).exchanges
    assert [(m.t, m.from_client, m.data, m.binary) for m in back.messages or []] == [
        (m.t, m.from_client, m.data, m.binary) for m in messages
    ]
    assert back.close == WsClose(1001, "expired", "server") and back.events is None and back.body is None
    line = json.loads((tmp_path / file_name("s")).read_text().splitlines()[1])
    assert line["response"]["messages"][2] == {
        "t": 0.35,
        "from": "server",
        "text": '{"serverContent":{}}',
        "binary": True,
    }


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"from": "both"}, r"response\.messages\[0\]: a message needs from: client or server"),
        ({"t": -1}, r"response\.messages\[0\]\.t"),
        ({"close": {"code": 99}}, r"response\.close\.code: 99 is not a WebSocket close code"),
        ({"close": {"code": 1000, "by": "someone"}}, r"response\.close\.by: 'someone'"),
    ],
)
def test_a_bad_websocket_session_line_is_refused_naming_the_field(tmp_path: Path, change: dict, named: str) -> None:
    line = session_rec(messages=[WsMessage(0.01, False, b"{}")], close=WsClose(1000, "", "client")).to_dict()
    response = line["response"]
    if "close" in change:
        response["close"] = change["close"]
    else:
        response["messages"][0].update(change)
    path = tmp_path / "s.jsonl"
    path.write_text(
        json.dumps({"format": "brownout-cassette", "version": VERSION, "session": "s"}) + "\n" + json.dumps(line) + "\n"
    )
    with pytest.raises(CassetteError, match=rf"s\.jsonl:2: {named}"):
        read_cassette(path)


def test_a_file_from_another_format_version_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"format": "brownout-cassette", "version": VERSION + 1, "session": "x"}) + "\n")
    with pytest.raises(CassetteError, match=r"x\.jsonl:1: cassette format version"):
        read_cassette(path)
    path.write_text('{"format": "brownout-cassette", "version": 1, "session": "x"}\n{"broken": \n')
    with pytest.raises(CassetteError, match=r"x\.jsonl:2"):
        read_cassette(path)
    with pytest.raises(CassetteError, match="no such cassette directory"):
        list(read_dir(tmp_path / "missing"))


def test_session_names_become_safe_distinct_file_names() -> None:
    assert file_name("run-1") == "run-1.jsonl"
    odd = [file_name(s) for s in ("client:127.0.0.1", "client/127.0.0.1", "../../etc/passwd", "")]
    assert len(set(odd)) == 4 and all("/" not in n and not n.startswith(".") for n in odd)


def test_a_new_recording_replaces_a_session_and_passthrough_appends(tmp_path: Path) -> None:
    for _ in range(2):
        writer = CassetteWriter(tmp_path)
        writer.put(rec())
        writer.close()
    assert len(read_cassette(tmp_path / file_name("s")).exchanges) == 1
    writer = CassetteWriter(tmp_path, append=True)
    writer.put(rec())
    writer.close()
    cassette = read_cassette(tmp_path / file_name("s"))
    assert [r.seq for r in cassette.exchanges] == [1, 2]
    assert (tmp_path / file_name("s")).read_text().count('"format"') == 1


def test_the_queue_is_bounded_and_what_it_drops_is_counted(tmp_path: Path) -> None:
    counts: list[tuple[int, int]] = []
    writer = CassetteWriter(tmp_path, max_pending_bytes=3000, on_count=lambda w, d: counts.append((w, d)))
    big = rec(body=b"x" * 10_000)
    assert writer.put(big) is False
    assert writer.put(rec()) is True
    writer.close()
    assert writer.put(rec()) is False  # closed: counted, never blocks
    assert writer.written == 1 and writer.dropped == 2
    assert sum(w for w, _ in counts) == 1 and sum(d for _, d in counts) == 2


def test_the_queue_counts_what_holding_many_tiny_events_costs(tmp_path: Path) -> None:
    writer = CassetteWriter(tmp_path, max_pending_bytes=20_000)
    tiny = rec(events=[Event(0.0, b"x\n\n") for _ in range(500)])  # 1.5 KB of bytes, about 50 KB held
    assert tiny.body_size == 1500 and tiny.held_bytes > 500 * EVENT_OVERHEAD
    assert writer.put(tiny) is False
    writer.close()
    assert writer.dropped == 1


def test_many_sessions_stay_correct_past_the_open_file_limit(tmp_path: Path) -> None:
    writer = CassetteWriter(tmp_path)
    for round_ in range(2):
        for i in range(70):
            writer.put(rec(session=f"s{i}", body=str(round_).encode()))
    writer.close()
    cassettes = {c.session: c for c in read_dir(tmp_path)}
    assert len(cassettes) == 70
    assert all([r.request_body for r in c.exchanges] == [b"0", b"1"] for c in cassettes.values())
