"""Recording and replay under compression bombs and huge streams: bounded memory, nobody else waits.

The recorder and the replay matcher read the bodies the proxy already decoded under
`proxy.buffer_max_bytes`; a body past that cap is kept in the cassette as it was sent (still
compressed, its content-encoding kept), never inflated. A recorded stream holds at most what the
cassette keeps (`record.max_body_bytes`), whatever its event boundaries.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.record.support import load, player, recorder
from tests.reliability.badinput import JSON_CT, SSE_CT, internal_errors
from tests.reliability.probes import OtherClient, RssPeak
from tests.reliability.rawupstream import RawRequest, RawUpstream, fixed, gzip_bytes, http_response
from tests.reliability.test_bombs import assert_nobody_suffered, bomb, run, upstream

MB = 1 << 20
CONFIG = "version: 1\nseed: 1\nproxy: {buffer_max_bytes: 4m}\nrecord: {max_body_bytes: 1048576}\nrules: []\n"
CHAT = "/v1/chat/completions"


def the_case(proxy: Any, cassettes: Path) -> Any:
    """The recorded exchange of the case, once written (the other client's pings are recorded too)."""
    writer = proxy.addon.tape.writer
    deadline = time.monotonic() + 30
    while True:
        assert writer.flush()
        recorded = [x for c in load(cassettes) for x in c.exchanges if x.url.endswith(CHAT)]
        if recorded or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(recorded) == 1, recorded
    return recorded[0]


@pytest.mark.timeout(120)
def test_recording_a_response_bomb_keeps_it_as_sent(brownout_proxy, tmp_path):
    cassettes = tmp_path / "cassettes"
    proxy = recorder(brownout_proxy, cassettes, CONFIG)
    wire = bomb()
    up = upstream(fixed(http_response(200, [*JSON_CT, ("content-encoding", "gzip")], wire)))
    with up.running():
        r, raw, rss, other, quiet_s = run(proxy, up, json={"model": "gpt-4o-mini", "messages": []})
    assert r.status_code == 200 and raw == wire
    assert_nobody_suffered(rss, other, quiet_s)
    rec = the_case(proxy, cassettes)
    assert rec.body == wire and not rec.truncated and rec.decoded is None
    assert ("content-encoding", "gzip") in rec.response_headers
    assert internal_errors(proxy) == {}
    # Replayed as it was sent: the same compressed bytes, still labelled gzip (the upstream is gone).
    replayer = player(brownout_proxy, cassettes, CONFIG)
    with (
        httpx.Client(proxy=replayer.proxy_url(), trust_env=False, timeout=30) as client,
        client.stream("POST", up.url + CHAT, json={"model": "gpt-4o-mini", "messages": []}) as again,
    ):
        assert b"".join(again.iter_raw()) == wire and again.headers["content-encoding"] == "gzip"
    assert replayer.addon.tape.counts["hit"] == 1 and internal_errors(replayer) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("corrupt", [False, True])
def test_bodies_under_the_cap_are_recorded_decoded_and_corrupt_ones_as_sent(brownout_proxy, tmp_path, corrupt):
    cassettes = tmp_path / "cassettes"
    proxy = recorder(brownout_proxy, cassettes, CONFIG)
    answer = b'{"id": "chatcmpl-1", "choices": []}'
    wire = b"\x1f\x8b not gzip at all" if corrupt else gzip_bytes(answer)
    up = upstream(fixed(http_response(200, [*JSON_CT, ("content-encoding", "gzip")], wire)))
    sent = b'{"model": "gpt-4o-mini", "messages": []}'
    with up.running():
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        run(proxy, up, content=gzip_bytes(sent), headers=headers)
        rec = the_case(proxy, cassettes)
    assert rec.request_body == sent and "content-encoding" not in dict(rec.request_headers)
    if corrupt:
        assert rec.body == wire and rec.decoded is None and ("content-encoding", "gzip") in rec.response_headers
    else:
        assert rec.body == answer and rec.decoded == "gzip" and "content-encoding" not in dict(rec.response_headers)
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("side", ["record", "replay"])
def test_a_request_bomb_is_recorded_and_matched_as_sent(brownout_proxy, tmp_path, side):
    cassettes = tmp_path / "cassettes"
    if side == "record":
        proxy = recorder(brownout_proxy, cassettes, CONFIG)
    else:  # an empty cassette directory: every request misses and is forwarded
        cassettes.mkdir()
        proxy = player(brownout_proxy, cassettes, CONFIG, miss="passthrough")
    wire = bomb()
    up = upstream(fixed(http_response(200, JSON_CT, b"{}")))
    with up.running():
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        r, _, rss, other, quiet_s = run(proxy, up, content=wire, headers=headers)
        received = next(q for q in up.requests if q.path == CHAT)
    assert r.status_code == 200 and received.body == wire
    assert_nobody_suffered(rss, other, quiet_s)
    if side == "record":
        rec = the_case(proxy, cassettes)
        assert rec.request_body == wire and ("content-encoding", "gzip") in rec.request_headers
    else:
        assert proxy.addon.tape.counts["passthrough"] >= 1
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(120)
def test_recording_a_streamed_bomb_stops_inflating_at_what_is_kept(brownout_proxy, tmp_path):
    cassettes = tmp_path / "cassettes"
    proxy = recorder(brownout_proxy, cassettes, CONFIG)
    wire = bomb(b"data: {}\n\n")
    up = upstream(fixed(http_response(200, [*SSE_CT, ("content-encoding", "gzip")], wire, length=False)))
    with up.running():
        _, raw, rss, other, quiet_s = run(proxy, up, json={"model": "gpt-4o-mini", "messages": [], "stream": True})
    assert raw == wire
    assert_nobody_suffered(rss, other, quiet_s)
    rec = the_case(proxy, cassettes)
    assert rec.truncated and rec.decoded == "gzip" and rec.held_bytes <= MB
    assert internal_errors(proxy) == {}


async def endless_event(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """96 MB of one SSE event that never ends, sent in 64 KB chunks (never held whole here)."""
    if req.path == "/ping":
        writer.write(http_response(200, JSON_CT, b'{"pong": true}'))
        await writer.drain()
        return True
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    piece = b"x" * (64 << 10)
    writer.write(b"%x\r\ndata: \r\n" % 6)
    for _ in range(96 * 16):
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return False


@pytest.mark.timeout(120)
def test_recording_a_stream_without_event_boundaries_buffers_no_more_than_it_keeps(brownout_proxy, tmp_path):
    cassettes = tmp_path / "cassettes"
    proxy = recorder(brownout_proxy, cassettes, CONFIG)
    up = RawUpstream(endless_event)
    with (
        up.running(),
        OtherClient(proxy, up.url + "/ping") as other,
        RssPeak() as rss,
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=60) as client,
        client.stream("POST", up.url + CHAT, json={"model": "gpt-4o-mini", "messages": [], "stream": True}) as r,
    ):
        received = sum(len(piece) for piece in r.iter_raw())  # counted, not kept
    assert received == 6 + 96 * MB
    assert rss.growth < 48 * MB, f"RSS grew {rss.growth / MB:.0f} MB"
    assert other.answered > 0 and not other.failures, other.failures
    rec = the_case(proxy, cassettes)
    assert rec.truncated and rec.events == []
    assert internal_errors(proxy) == {}
