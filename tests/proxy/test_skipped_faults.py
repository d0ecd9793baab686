"""A fault that fires but cannot act is skipped in the open: not announced, not counted as injected.

Through the real proxy: the body passes through unchanged, the exchange carries the fault under
`faults_skipped` with the reason, the decision log says `skipped_not_applicable`, and nothing
counts as an internal error.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from tests.reliability.badinput import JSON_CT, Collector, internal_errors
from tests.reliability.rawupstream import RawRequest, RawUpstream, fixed, http_response

MB = 1 << 20
BIG_JSON = b'{"items": [' + b",".join(b'{"id": %d, "text": "a line of text"}' % i for i in range(160_000)) + b"]}"


def config(fault: str) -> str:
    return (
        "version: 1\nseed: 1\nproxy: {buffer_max_bytes: 2m, announce_faults: true}\n"
        f"rules:\n  - name: bad\n    match: {{}}\n    fault: {fault}\n    schedule: {{}}\n"
    )


async def big_json(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(BIG_JSON))
    for i in range(0, len(BIG_JSON), 256 << 10):
        writer.write(BIG_JSON[i : i + (256 << 10)])
        await writer.drain()
    return False


def fetch(proxy: object, url: str) -> httpx.Response:
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=20) as client:  # type: ignore[attr-defined]
        r = client.get(url)
        r.read()
        return r


@pytest.mark.timeout(60)
def test_malformed_json_on_a_body_too_large_to_buffer_is_skipped(brownout_proxy):
    assert len(BIG_JSON) > 4 * MB
    seen = Collector()
    proxy = brownout_proxy(config("{type: malformed_json}"), on_exchange=seen)
    up = RawUpstream(big_json)
    with up.running():
        r = fetch(proxy, up.url + "/api/export")
    assert r.content == BIG_JSON and "x-brownout-fault" not in r.headers
    ex = seen.wait(1)[0]
    assert ex.streamed and ex.faults == []
    [skipped] = ex.faults_skipped
    assert skipped.fault == "malformed_json" and "too large to buffer" in skipped.params["skipped"]
    decisions = [(d.outcome, d.reason) for d in proxy.addon.engine.decisions.recent()]
    assert decisions == [("fired", "always"), ("skipped_not_applicable", skipped.params["skipped"])]
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["body", "tool_arguments"])
def test_malformed_json_on_deeply_nested_json_degrades_cleanly(brownout_proxy, target):
    seen = Collector()
    proxy = brownout_proxy(config(f"{{type: malformed_json, target: {target}}}"), on_exchange=seen)
    deep = b"[" * 50_000 + b"]" * 50_000
    up = RawUpstream(fixed(http_response(200, JSON_CT, deep)))
    with up.running():
        r = fetch(proxy, up.url + "/v1/chat/completions")
    assert r.content == deep and "x-brownout-fault" not in r.headers
    ex = seen.wait(1)[0]
    assert ex.faults == [] and ex.faults_skipped[0].params["skipped"] == "JSON nested too deeply to edit"
    assert internal_errors(proxy) == {}  # no traceback, no internal error: the fault just did not apply


@pytest.mark.parametrize(
    ("fault", "changed"),
    [
        ("{type: truncate, at_bytes: 100000}", False),  # the stream ends before the cut
        ("{type: truncate, at_bytes: 40}", True),
    ],
    ids=["cut-never-reached", "cut"],
)
def test_a_stream_fault_that_changed_nothing_did_not_fire(upstream, brownout_proxy, openai_client, fault, changed):
    """A stream fault fires when its rule matches, but whether it acted shows only at the end of the
    stream: one that let every byte through as upstream sent it is recorded as skipped, not injected."""
    seen = Collector()
    proxy = brownout_proxy(config(fault), on_exchange=seen, upstream=upstream)
    client = openai_client(proxy, upstream)
    with contextlib.suppress(Exception):  # a cut stream may end without its terminal event
        for _ in client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            pass
    ex = seen.wait(1)[0]
    assert ex.streamed and ex.stream_complete is (not changed)
    if changed:
        assert [f.fault for f in ex.faults] == ["truncate"] and ex.faults_skipped == []
    else:
        assert ex.faults == [] and [f.fault for f in ex.faults_skipped] == ["truncate"]
        assert "nothing the fault could change" in ex.faults_skipped[0].params["skipped"]
        outcomes = [d.outcome for d in proxy.addon.engine.decisions.recent()]
        assert outcomes == ["fired", "skipped_not_applicable"]
    assert internal_errors(proxy) == {}
