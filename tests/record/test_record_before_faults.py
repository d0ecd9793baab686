"""A recording made under chaos holds what the upstream sent, before any fault: the whole body and every
event as upstream sent them. An answer a stream fault cut is not recorded at all, so a replay never passes
the cut off as upstream's."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.embed import ProxyHandle
from tests.proxy.test_relay import serving
from tests.record.support import load, player, recorder, wait_recorded

EVENTS = 6  # streamed events before [DONE], 10 ms apart
ANSWER = {
    "id": "chatcmpl-whole",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "18 C"}, "finish_reason": "stop"}],
}

CHAOS = """
seed: 5
rules:
  - name: broken-body
    match: {provider: openai, stream: false}
    fault: {type: malformed_json}
  - name: broken-event
    match: {provider: openai, stream: true, model: gpt-4o-mini}
    fault: {type: malformed_json, target: sse_event}
  - name: cut
    match: {provider: openai, stream: true, model: gpt-4o}
    fault: {type: truncate, after_events: 2}
"""


def event(i: int) -> bytes:
    last = i == EVENTS - 1
    delta = {} if last else {"content": f"t{i} "}
    body = {
        "id": "chatcmpl-paced",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if last else None}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


STREAM = b"".join(event(i) for i in range(EVENTS)) + b"data: [DONE]\n\n"


async def upstream(req: Request, resp: Responder) -> None:
    if not json.loads(req.body).get("stream"):
        resp.send(200, json.dumps(ANSWER).encode())
        return
    await resp.start_stream(200, "text/event-stream")
    for i in range(EVENTS):
        await asyncio.sleep(0.01)
        await resp.chunk(event(i))
    await resp.chunk(b"data: [DONE]\n\n")
    await resp.end()


def ask(proxy: ProxyHandle, base: str) -> list[tuple[int, bytes]]:
    """A buffered chat, a streamed one, and a streamed one of another model: (status, body) as the client got them."""
    messages = [{"role": "user", "content": "weather?"}]
    bodies = [
        {"model": "gpt-4o-mini", "messages": messages},
        {"model": "gpt-4o-mini", "messages": messages, "stream": True},
        {"model": "gpt-4o", "messages": messages, "stream": True},
    ]
    with httpx.Client(proxy=proxy.proxy_url("chaos"), timeout=20) as client:
        return [
            (r.status_code, r.content)
            for r in (client.post(f"{base}/v1/chat/completions", json=body) for body in bodies)
        ]


def test_a_recording_under_chaos_holds_what_upstream_sent(brownout_proxy, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with serving(upstream) as url:
        rec = recorder(brownout_proxy, cassettes, CHAOS)
        live = ask(rec, url)
        wait_exchanges_done(rec, 3)
        wait_recorded(rec, 2)  # after every exchange is done: a third line would be written by now
    # The client got the faults ...
    [(_, whole), (_, broken), (_, cut)] = live
    assert whole != json.dumps(ANSWER).encode() and broken != STREAM and b"[DONE]" in broken
    assert b"[DONE]" not in cut
    fired = {d.rule for d in rec.addon.engine.decisions.recent() if d.outcome == "fired"}
    assert fired == {"broken-body", "broken-event", "cut"}
    # ... the cassette what upstream sent, and nothing of the answer the fault cut.
    [[buffered, stream]] = [c.exchanges for c in load(cassettes)]
    assert json.loads(buffered.body or b"") == ANSWER and buffered.error is None
    assert b"".join(e.data for e in stream.events or []) == STREAM and stream.error is None
    assert json.loads(stream.request_body)["model"] == "gpt-4o-mini"
    assert rec.addon.tape.not_recorded == 1 and rec.addon.tape.writer.written == 2

    play = player(brownout_proxy, cassettes, speed=0)
    replayed = ask(play, url)
    assert replayed[:2] == [(200, json.dumps(ANSWER).encode()), (200, STREAM)]
    assert replayed[2][0] == 404 and b"no recorded answer" in replayed[2][1]


def wait_exchanges_done(proxy: ProxyHandle, n: int, timeout_s: float = 10.0) -> None:
    """Until `n` exchanges have finished (a cut one is finished when its connection is gone)."""
    deadline = time.monotonic() + timeout_s
    while len(proxy.addon.pipeline.exporters.recent_exchanges()) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(proxy.addon.pipeline.exporters.recent_exchanges()) >= n
