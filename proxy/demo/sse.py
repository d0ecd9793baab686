"""Emitting streamed bodies (SSE events, NDJSON lines) with real per-chunk timing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from brownout.proxy.demo.httpserver import Responder
from brownout.proxy.demo.mockdata import Knobs, dumps

__all__ = ["ndjson_line", "send_stream", "sse_data", "sse_event"]


def sse_data(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else dumps(obj)) + b"\n\n"


def sse_event(event: str, obj: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + dumps(obj) + b"\n\n"


def ndjson_line(obj: Any) -> bytes:
    return dumps(obj) + b"\n"


async def send_stream(
    resp: Responder,
    frames: Iterable[bytes],
    knobs: Knobs,
    content_type: str = "text/event-stream",
    headers: dict[str, str] | None = None,
) -> None:
    """Stream `frames`, one chunk each, sleeping `knobs.chunk_delay_s` between them."""
    await resp.start_stream(200, content_type, headers)
    delay = knobs.chunk_delay_s
    for i, frame in enumerate(frames):
        if i and delay:
            await asyncio.sleep(delay)
        await resp.chunk(frame)
