"""Replayed streams keep their recorded inter-event timing (scaled by the replay speed), through the real
proxy and the official openai SDK, with the upstream gone."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
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


def closest(replay: Callable[[], list[float]], expected: list[float], attempts: int = 3) -> list[float]:
    """How far each replayed gap is from `expected`, in the closest of a few replays.

    A busy machine can only delay an event, stretching one gap and squeezing the next; a replay that
    ignores the recorded timing (even spacing, no pauses) is off by far more than the tolerance in
    every attempt, so the best attempt still tells the two apart.
    """
    best: list[float] | None = None
    for _ in range(attempts):
        got = gaps(replay())
        off = [round(abs(a - b), 4) for a, b in zip(got, expected, strict=True)]
        if best is None or max(off) < max(best):
            best = off
        if max(best) <= TOLERANCE_S:
            break
    assert best is not None
    return best


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

    def replay(speed: float = 1.0) -> list[float]:  # a fresh player each time: one recording, one answer
        return arrivals(openai_client(player(brownout_proxy, cassettes, speed=speed), url, session="timing"))[1]

    text, times = arrivals(openai_client(player(brownout_proxy, cassettes), url, session="timing"))
    assert text == live_text and len(gaps(times)) == len(recorded_gaps)
    off = closest(replay, recorded_gaps)
    assert max(off) <= TOLERANCE_S, f"replayed gaps off by {off} from recorded {recorded_gaps}"
    off = closest(lambda: replay(2.0), [g / 2 for g in recorded_gaps])
    assert max(off) <= TOLERANCE_S, f"at speed 2: gaps off by {off} from half of {recorded_gaps}"

    instant = player(brownout_proxy, cassettes, speed=0)
    _, times = arrivals(openai_client(instant, url, session="timing"))
    assert times[-1] - times[0] < sum(DELAYS[1:]) / 4, times
