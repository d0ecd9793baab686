"""Compression bombs, from upstream and from a client: bounded memory, and nobody else waits.

A 256 KB gzip body inflating to 256 MB stands in for the 1 GB one of `bench/bodies.py`: the
mechanism is the same, with `proxy.buffer_max_bytes` lowered to 4m so the cap is reached early.
Past the cap a body is not inspected: it passes through byte for byte, the exchange says why,
and a body fault that needed it is recorded as skipped. Meanwhile another client on the same
proxy keeps getting answers, each within a second.
"""

from __future__ import annotations

import time
import zlib
from functools import cache
from typing import Any

import httpx
import pytest

from tests.reliability.badinput import JSON_CT, SSE_CT, Collector, internal_errors, rule, wait_until
from tests.reliability.probes import OtherClient, RssPeak
from tests.reliability.rawupstream import RawRequest, RawUpstream, fixed, http_response, routes

MB = 1 << 20
CONFIG = "version: 1\nseed: 1\nproxy: {buffer_max_bytes: 4m, announce_faults: true}\nrules:\n"
PONG = http_response(200, JSON_CT, b'{"pong": true}')


@cache
def bomb(plain_piece: bytes = b"\0", size: int = 256 * MB) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = plain_piece * (MB // len(plain_piece))
    return b"".join(c.compress(block) for _ in range(size // len(block))) + c.flush()


def upstream(answer: Any) -> RawUpstream:
    async def ping(req: RawRequest, reader: Any, writer: Any) -> bool:
        writer.write(PONG)
        await writer.drain()
        return True

    return RawUpstream(routes({"/ping": ping, "/v1/chat/completions": answer}))


def run(proxy: Any, up: RawUpstream, **request: Any) -> tuple[httpx.Response, bytes, RssPeak, OtherClient, float]:
    """The response, its raw body (still compressed: this client never inflates the bomb), the probes,
    and the other client's worst wait over a quiet second before the case (this machine's baseline)."""
    with OtherClient(proxy, up.url + "/ping") as quiet:
        time.sleep(1.0)
    with (
        OtherClient(proxy, up.url + "/ping") as other,
        RssPeak() as rss,
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client,
        client.stream("POST", up.url + "/v1/chat/completions", **request) as r,
    ):
        raw = b"".join(r.iter_raw())
    return r, raw, rss, other, quiet.worst_s


def recorded(seen: Collector) -> Any:
    """The exchange of the case (the other client's pings are recorded too)."""
    assert wait_until(lambda: any(e.path == "/v1/chat/completions" for e in seen.seen), timeout_s=30)
    return next(e for e in seen.seen if e.path == "/v1/chat/completions")


def assert_nobody_suffered(rss: RssPeak, other: OtherClient, quiet_s: float) -> None:
    assert rss.growth < 64 * MB, f"RSS grew {rss.growth / MB:.0f} MB"
    assert other.answered > 0 and not other.failures, other.failures
    # Within a second, or a few times what a quiet second showed on a machine too loaded for that.
    bound = max(1.0, 4 * quiet_s)
    assert other.worst_s < bound, f"another client waited {other.worst_s:.2f} s (quiet: {quiet_s:.2f} s)"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", [None, "{type: malformed_json}", "{type: inject, text: EVIL}"])
def test_a_response_bomb_passes_untouched_and_uninspected(brownout_proxy, fault):
    seen = Collector()
    config = CONFIG + (rule("body", fault) if fault else "  []\n")
    proxy = brownout_proxy(config, on_exchange=seen)
    wire = bomb()
    up = upstream(fixed(http_response(200, [*JSON_CT, ("content-encoding", "gzip")], wire)))
    with up.running():
        r, raw, rss, other, quiet_s = run(proxy, up, json={"model": "gpt-4o-mini", "messages": []})
        ex = recorded(seen)
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    assert raw == wire  # byte for byte
    assert_nobody_suffered(rss, other, quiet_s)
    assert ex.uninspected == "decoded_too_large" and "buffer_max_bytes" in ex.notes["uninspected"]
    assert ex.faults == [] and "x-brownout-fault" not in r.headers
    if fault:
        assert [f.params["skipped"] for f in ex.faults_skipped] == [ex.notes["uninspected"]]
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", [None, "{type: mutate, kind: typos}"])
def test_a_request_bomb_from_a_client_is_forwarded_untouched(brownout_proxy, fault):
    seen = Collector()
    proxy = brownout_proxy(CONFIG + (rule("edit", fault) if fault else "  []\n"), on_exchange=seen)
    wire = bomb()
    up = upstream(fixed(http_response(200, JSON_CT, b"{}")))
    with up.running():
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        r, _, rss, other, quiet_s = run(proxy, up, content=wire, headers=headers)
        ex = recorded(seen)
        received = next(q for q in up.requests if q.path == "/v1/chat/completions")
    assert r.status_code == 200 and received.body == wire
    assert_nobody_suffered(rss, other, quiet_s)
    assert ex.uninspected == "decoded_too_large" and ex.notes["uninspected"].startswith("request")
    assert ex.request_bytes == len(wire) and ex.faults == []
    if fault:  # a request edit needs the decoded body: it did not apply
        assert [f.fault for f in ex.faults_skipped] == ["mutate"]
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(120)
def test_a_streamed_bomb_is_parsed_up_to_the_cap_only(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(CONFIG + "  []\n", on_exchange=seen)
    wire = bomb(b"data: {}\n\n")
    up = upstream(fixed(http_response(200, [*SSE_CT, ("content-encoding", "gzip")], wire, length=False)))
    with up.running():
        _, raw, rss, other, quiet_s = run(proxy, up, json={"model": "gpt-4o-mini", "messages": [], "stream": True})
        ex = recorded(seen)
    assert raw == wire
    assert_nobody_suffered(rss, other, quiet_s)
    assert ex.uninspected == "decoded_too_large" and ex.stream_complete is None
    assert 0 < ex.stream_events <= 4 * MB // len(b"data: {}\n\n") + 1
    assert internal_errors(proxy) == {}
