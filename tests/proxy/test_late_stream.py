"""A body brownout buffers for a fault that turns out larger than the cap while it is read.

A chunked response has no length to decide on: brownout buffers it for a body fault, and mitmproxy
switches it to streaming once it outgrows `proxy.buffer_max_bytes`. From then on the faults act on
the real bytes as stream faults (a byte cut cuts); those that cannot act on a stream of unknown
length are skipped, with their reason, and not counted as fired. A recording holds the body upstream
sent, whole, or nothing at all: never the empty body the `response` hook is left with.
"""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy import lateswitch
from tests.record.support import load, player, recorder
from tests.reliability.badinput import Collector, internal_errors
from tests.reliability.rawupstream import RawRequest, RawUpstream, chunked

BODY = b'{"items": [' + b",".join(b'{"id": %d, "text": "a line of text"}' % i for i in range(60_000)) + b"]}"
CAP = "1m"


def config(fault: str) -> str:
    return (
        f"version: 1\nseed: 1\nproxy: {{buffer_max_bytes: {CAP}, announce_faults: true}}\n"
        f"rules:\n  - name: bad\n    match: {{path: /api/*}}\n    fault: {fault}\n    schedule: {{}}\n"
    )


def chunked_upstream(body: bytes, encoding: str | None = None) -> RawUpstream:
    """Answers with `body` in 64 KB chunks, chunked transfer-coding, no content-length."""

    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        extra = f"content-encoding: {encoding}\r\n".encode() if encoding else b""
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%stransfer-encoding: chunked\r\n\r\n" % extra
        )
        for i in range(0, len(body), 64 << 10):
            writer.write(chunked(body[i : i + (64 << 10)], end=False))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return False

    return RawUpstream(handle)


def fetch(proxy: Any, url: str) -> httpx.Response:
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=20) as client:
        return client.get(url)


def recorded(proxy: Any, cassettes: Path) -> list[Any]:
    writer = proxy.addon.tape.writer
    assert writer.flush(10)
    return [x for c in load(cassettes) for x in c.exchanges] if cassettes.exists() else []


def decisions(proxy: Any) -> list[tuple[str, str]]:
    return [(d.outcome, d.reason) for d in proxy.addon.engine.decisions.recent()]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_a_byte_cut_cuts_the_real_bytes_and_nothing_is_recorded(brownout_proxy, tmp_path, encoding):
    seen = Collector()
    proxy = recorder(brownout_proxy, tmp_path / "c", config("{type: truncate, at_bytes: 1000}"), on_exchange=seen)
    # Compressed, the body is cut in its decoded bytes and the cut gzip stream ends properly, even
    # once more than the cap has been decoded (the cut cannot be dropped half done).
    up = chunked_upstream(BODY if encoding is None else gzip.compress(BODY * 8, mtime=0), encoding)
    with up.running():
        r = fetch(proxy, up.url + "/api/export")
    assert r.status_code == 200 and r.content == BODY[:1000]  # httpx decodes a gzip body
    assert r.headers["x-brownout-fault"] == "bad:truncate"
    ex = seen.wait(1)[0]
    assert ex.streamed and [f.fault for f in ex.faults] == ["truncate"] and ex.faults_skipped == []
    assert decisions(proxy) == [("fired", "always")]
    # What reached the client is brownout's cut, never recorded as upstream's answer. On a loaded machine
    # upstream's whole answer may have been read before the cut took effect: then that whole answer is recorded.
    recs = recorded(proxy, tmp_path / "c")
    if recs:
        [rec] = recs
        whole = BODY if encoding is None else BODY * 8
        assert rec.events is not None and not rec.truncated and b"".join(e.data for e in rec.events) == whole
    else:
        assert proxy.addon.tape.not_recorded == 1
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("fault", "encoding", "reason"),
    [
        ("{type: truncate, at_fraction: 0.5}", None, "at_fraction of a streamed body needs its content-length"),
        ("{type: malformed_json}", None, "the body streamed (too large to buffer) and is not an event stream"),
        # Its first slice already decodes to more than the cap: not edited, as any such stream.
        ("{type: truncate, at_bytes: 1000}", "gzip", "decodes to over 524288 bytes (proxy.buffer_max_bytes)"),
    ],
    ids=["truncate-fraction", "malformed-json", "gzip-byte-cut"],
)
def test_a_fault_that_cannot_act_on_the_stream_is_skipped_and_the_body_recorded_whole(
    brownout_proxy, tmp_path, fault, encoding, reason
):
    seen = Collector()
    cassettes = tmp_path / "c"
    proxy = recorder(
        brownout_proxy, cassettes, config(fault).replace(CAP, "512k" if encoding else CAP), on_exchange=seen
    )
    wire = BODY if encoding is None else gzip.compress(BODY * 8, mtime=0)  # past the cap compressed too
    up = chunked_upstream(wire, encoding)
    with up.running():
        r = fetch(proxy, up.url + "/api/export")
        body = BODY if encoding is None else BODY * 8
        assert r.status_code == 200 and r.content == body
        ex = seen.wait(1)[0]
        assert ex.streamed and ex.faults == [] and [f.params["skipped"] for f in ex.faults_skipped] == [reason]
        assert decisions(proxy) == [("fired", "always"), ("skipped_not_applicable", reason)]
        [rec] = recorded(proxy, cassettes)
    assert rec.status == 200 and rec.events is not None and not rec.truncated
    assert b"".join(e.data for e in rec.events) == body  # every byte upstream sent (decoded), none invented
    # Replayed (upstream gone), it is upstream's answer again, whole.
    again = fetch(player(brownout_proxy, cassettes, "version: 1\nseed: 1\n"), up.url + "/api/export")
    assert again.status_code == 200 and again.content == body
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_a_body_that_streamed_by_unread_skips_its_faults_and_is_not_recorded(brownout_proxy, tmp_path, monkeypatch):
    """Should brownout not take the switched stream over (a mitmproxy that switches differently), the
    body went by unread: the fault is skipped, not counted as fired, and no empty body is recorded."""
    monkeypatch.setattr(lateswitch, "on_switch", lambda response, callback: None)
    seen = Collector()
    proxy = recorder(brownout_proxy, tmp_path / "c", config("{type: truncate, at_bytes: 1000}"), on_exchange=seen)
    up = chunked_upstream(BODY)
    with up.running():
        r = fetch(proxy, up.url + "/api/export")
    assert r.status_code == 200 and r.content == BODY
    ex = seen.wait(1)[0]
    assert ex.faults == [] and [f.fault for f in ex.faults_skipped] == ["truncate"]
    reason = ex.faults_skipped[0].params["skipped"]
    assert "outgrew proxy.buffer_max_bytes" in reason
    assert decisions(proxy) == [("fired", "always"), ("skipped_not_applicable", reason)]
    assert recorded(proxy, tmp_path / "c") == [] and proxy.addon.tape.not_recorded == 1
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_a_chunked_body_under_the_cap_is_still_edited_whole(brownout_proxy, tmp_path):
    seen = Collector()
    small = BODY[:20_000].rsplit(b",", 1)[0] + b"]}"
    proxy = brownout_proxy(config("{type: truncate, at_fraction: 0.5}"), on_exchange=seen)
    up = chunked_upstream(small)
    with up.running():
        r = fetch(proxy, up.url + "/api/export")
    assert r.content == small[: len(small) // 2]
    ex = seen.wait(1)[0]
    assert not ex.streamed and [f.fault for f in ex.faults] == ["truncate"]
    assert internal_errors(proxy) == {}
