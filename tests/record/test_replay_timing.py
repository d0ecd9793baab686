"""Replayed streams keep their recorded inter-event timing (scaled by the replay speed), through the real
proxy and the official openai SDK, with the upstream gone."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

from brownout.proxy.demo.httpserver import Request, Responder
from tests.proxy.test_relay import serving
from tests.record.support import load, player, recorder, wait_recorded

# Seconds before each event: uneven on purpose, so a replay that spaces events evenly fails.
DELAYS = [0.05, 0.12, 0.03, 0.2, 0.06, 0.15]
TOLERANCE_S = 0.020


def chunk(i: int, text: str | None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    body = {
        "id": "chatcmpl-timing",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


async def paced(req: Request, resp: Responder) -> None:
    await resp.start_stream(200, "text/event-stream", {"x-request-id": "req_timing"})
    for i, delay in enumerate(DELAYS):
        await asyncio.sleep(delay)
        last = i == len(DELAYS) - 1
        await resp.chunk(chunk(i, None if last else f"t{i} ", "stop" if last else None))
    await resp.chunk(b"data: [DONE]\n\n")


def arrivals(client: Any) -> tuple[str, list[float]]:
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "count"}], stream=True
    )
    text, times = [], []
    for c in stream:
        times.append(time.perf_counter() - t0)
        text.append(c.choices[0].delta.content or "")
    return "".join(text), times


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_replayed_sse_keeps_the_recorded_gaps_and_speed_scales_them(
    brownout_proxy, openai_client, tmp_path: Path
) -> None:
    cassettes = tmp_path / "cassettes"
    with serving(paced) as url:
        rec = recorder(brownout_proxy, cassettes)
        live_text, _ = arrivals(openai_client(rec, url, session="timing"))
        wait_recorded(rec, 1)
    [[recorded]] = [c.exchanges for c in load(cassettes)]
    events = [e for e in recorded.events or [] if e.data.startswith(b"data: {")]
    assert len(events) == len(DELAYS)
    recorded_gaps = gaps([e.t for e in events])
    for got, expected in zip(recorded_gaps, DELAYS[1:], strict=True):
        assert abs(got - expected) < 0.05, (recorded_gaps, DELAYS)  # the cassette holds upstream's timing

    play = player(brownout_proxy, cassettes)
    client = openai_client(play, url, session="timing")
    text, times = arrivals(client)
    assert text == live_text
    replay_gaps = gaps(times)
    assert len(replay_gaps) == len(recorded_gaps)
    off = [round(abs(a - b), 4) for a, b in zip(replay_gaps, recorded_gaps, strict=True)]
    assert max(off) <= TOLERANCE_S, f"replayed gaps {replay_gaps} vs recorded {recorded_gaps}"

    fast = player(brownout_proxy, cassettes, speed=2.0)
    _, times = arrivals(openai_client(fast, url, session="timing"))
    off = [round(abs(a - b / 2), 4) for a, b in zip(gaps(times), recorded_gaps, strict=True)]
    assert max(off) <= TOLERANCE_S, f"at speed 2: {gaps(times)} vs half of {recorded_gaps}"

    instant = player(brownout_proxy, cassettes, speed=0)
    _, times = arrivals(openai_client(instant, url, session="timing"))
    assert times[-1] - times[0] < sum(DELAYS[1:]) / 4, times
