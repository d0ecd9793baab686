"""A recording made under chaos holds what the upstream sent, before any fault: the whole body and every
event as upstream sent them, at upstream's pace (no first-byte delay, stall or throttle in the times). An
answer a stream fault cut is not recorded at all, so a replay never passes the cut off as upstream's."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import httpx
import pytest

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.embed import ProxyHandle
from brownout.proxy.record.cassette import Recorded
from tests.proxy.test_relay import serving
from tests.record.support import load, player, recorder, wait_recorded

EVENTS = 6  # streamed events before [DONE]
GAPS_S = [0.05, 0.12, 0.03, 0.2, 0.06, 0.15]  # upstream's wait before each event (timed upstreams)
HOLD_S = 0.4  # every wait a fault adds: far beyond the tolerance
TOLERANCE_S = 0.1
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


def upstream_pacing(gaps_s: list[float]):  # type: ignore[no-untyped-def]
    async def upstream(req: Request, resp: Responder) -> None:
        if not json.loads(req.body).get("stream"):
            resp.send(200, json.dumps(ANSWER).encode())
            return
        await resp.start_stream(200, "text/event-stream")
        for i in range(EVENTS):
            await asyncio.sleep(gaps_s[i])
            await resp.chunk(event(i))
        await resp.chunk(b"data: [DONE]\n\n")

    return upstream


upstream = upstream_pacing([0.01] * EVENTS)


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


HELD = f"""
seed: 5
rules:
  - name: slow-first-byte
    match: {{provider: openai}}
    fault: {{type: latency, delay_ms: {HOLD_S * 1000:.0f}, phase: first_byte}}
  - name: stall
    match: {{provider: openai, stream: true}}
    fault: {{type: stall, after_events: 2, pause_ms: {HOLD_S * 1000:.0f}}}
"""
THROTTLED = """
seed: 5
rules:
  - name: drip
    match: {provider: openai, stream: true}
    fault: {type: throttle, bytes_per_s: 1000}
"""


def assert_upstream_timing(stream: Recorded) -> None:
    times = [e.t for e in stream.events or [] if e.data.startswith(b"data: {")]
    assert len(times) == EVENTS and stream.headers_s < TOLERANCE_S, (stream.headers_s, times)
    assert abs(times[0] - GAPS_S[0]) < TOLERANCE_S, f"first event at {times[0]:.3f} s, upstream sent it at {GAPS_S[0]}"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(abs(a - b) < TOLERANCE_S for a, b in zip(gaps, GAPS_S[1:], strict=True)), (gaps, GAPS_S[1:])
    assert stream.end_s < sum(GAPS_S) + TOLERANCE_S


@pytest.mark.parametrize("config", [HELD, THROTTLED], ids=["first-byte-and-stall", "throttle"])
def test_a_recording_keeps_upstreams_timing_not_the_waits_faults_add(
    brownout_proxy, tmp_path: Path, config: str
) -> None:
    cassettes = tmp_path / "cassettes"
    with serving(upstream_pacing(GAPS_S)) as url:
        rec = recorder(brownout_proxy, cassettes, config)
        live = ask(rec, url)[:2]
        wait_recorded(rec, 3)
    assert live == [(200, json.dumps(ANSWER).encode()), (200, STREAM)]  # these faults change no byte
    fired = {d.rule for d in rec.addon.engine.decisions.recent() if d.outcome == "fired"}
    assert fired == ({"slow-first-byte", "stall"} if config is HELD else {"drip"})
    [[buffered, stream, _]] = [c.exchanges for c in load(cassettes)]
    assert buffered.body == json.dumps(ANSWER).encode() and buffered.end_s < TOLERANCE_S
    assert b"".join(e.data for e in stream.events or []) == STREAM
    assert_upstream_timing(stream)


DUPLICATE = """
seed: 5
rules:
  - name: stutter
    match: {provider: openai}
    fault: {type: mutate, kind: duplicate, roles: [user]}
"""


def test_a_mutated_request_is_recorded_as_sent_upstream_with_its_answer(brownout_proxy, tmp_path: Path) -> None:
    """The answer is to the mutated request, so the cassette pairs it with that request: a replay under the
    same config finds it, one without the mutation does not."""
    cassettes = tmp_path / "cassettes"
    first, answer, second = (
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Where?"},
        {"role": "user", "content": "Paris"},
    )
    body = {"model": "gpt-4o-mini", "messages": [first, answer, second]}
    with serving(upstream) as url:
        rec = recorder(brownout_proxy, cassettes, DUPLICATE)
        with httpx.Client(proxy=rec.proxy_url("m"), timeout=10) as client:
            assert client.post(f"{url}/v1/chat/completions", json=body).status_code == 200
        wait_recorded(rec, 1)
    [[exchange]] = [c.exchanges for c in load(cassettes)]
    assert json.loads(exchange.request_body)["messages"] == [first, first, answer, second]  # the earlier turn twice
    for config, status in ((DUPLICATE, 200), ("seed: 5\n", 404)):
        play = player(brownout_proxy, cassettes, config)
        with httpx.Client(proxy=play.proxy_url("m"), timeout=10) as client:
            assert client.post(f"{url}/v1/chat/completions", json=body).status_code == status
