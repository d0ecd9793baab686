"""The event loop never waits on slow work: a large body's edit.

Each case runs through the real proxy while another client (tests/reliability/probes.py) sends
small requests on its own connection and keeps the slowest answer. The slow parts are made slow
by sleeping (a test plugin), not by burning CPU, so the other client's
wait measures whether the loop was held, not how busy this machine is.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.reliability import slow_plugin
from tests.reliability.badinput import JSON_CT, Collector, internal_errors
from tests.reliability.probes import OtherClient
from tests.reliability.rawupstream import RawRequest, RawUpstream, fixed, http_response, routes

PONG = http_response(200, JSON_CT, b'{"pong": true}')
PLUGIN = "tests.reliability.slow_plugin"
# What one slow step may cost the other client at most: half of what each step sleeps (2 s), so a
# loaded machine has room and a loop held for the step does not.
HELD_S = 1.0


async def _pong(req: RawRequest, reader: Any, writer: Any) -> bool:
    writer.write(PONG)
    await writer.drain()
    return True


def upstream(body: bytes = b"{}") -> RawUpstream:
    return RawUpstream(routes({"/ping": _pong, "/v1/chat/completions": fixed(http_response(200, JSON_CT, body))}))


def big_answer() -> bytes:
    """A chat completion of about 2 MB: above the size whose edits and parsing leave the loop."""
    content = "word " * 400_000
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    return json.dumps(doc).encode()


@pytest.mark.timeout(60)
def test_a_slow_edit_of_a_large_body_holds_up_no_other_exchange(brownout_proxy):
    seen = Collector()
    config = f"""version: 1
seed: 1
plugins: ['{PLUGIN}:slow_edit_plugin']
rules:
  - {{name: slow, match: {{path: /v1/chat/completions}}, fault: {{type: slow_edit, seconds: 2.0}}}}
"""
    proxy = brownout_proxy(config, on_exchange=seen)
    body = big_answer()
    slow_plugin.EDIT_THREADS.clear()
    up = upstream(body)
    with (
        up.running(),
        OtherClient(proxy, up.url + "/ping") as other,
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client,
    ):
        t0 = time.monotonic()
        r = client.post(up.url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": []})
        took = time.monotonic() - t0
    assert r.status_code == 200 and r.content == body and took >= 2.0
    assert other.answered > 5 and not other.failures, other.failures
    assert other.worst_s < HELD_S, f"another client waited {other.worst_s:.2f} s while a body was edited"
    assert slow_plugin.EDIT_THREADS and threading.main_thread().name not in slow_plugin.EDIT_THREADS
    ex = next(e for e in seen.wait(1) if e.path == "/v1/chat/completions")
    assert [f.fault for f in ex.faults] == ["slow_edit"] and ex.response_model == "gpt-4o-mini"
    assert internal_errors(proxy) == {}
