"""Shared fixtures for fault tests: a fake wire format, a recording sleep, a context factory."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser, WireFormat
from brownout.core.wire.framing import NDJSONFramer, SSEFramer
from brownout.faults.base import FaultContext


class FakeWire(WireFormat):
    """A wire format with recognisable fault bytes, so tests see what the fault asked for."""

    provider = "fake"

    def recognise(self, req: RequestInfo) -> str | None:
        return None

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        pass

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        raise NotImplementedError

    def is_terminal(self, event: StreamEvent) -> bool:
        data = event.json()
        return event.data == "[DONE]" or (
            isinstance(data, dict) and (data.get("type") == "message_stop" or data.get("done") is True)
        )

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        body = {"status": status, "type": error_type, "message": message, "retry_after_s": retry_after_s}
        return status, {"content-type": "application/json"}, json.dumps(body).encode()

    def stream_error_event(
        self, error_type: str | None = None, message: str | None = None, exchange: Exchange | None = None
    ) -> bytes:
        return f"event: error\ndata: {json.dumps({'type': error_type, 'message': message})}\n\n".encode()

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        return {"content-type": "application/json"}, b'{"empty": true}'


class Sleeps:
    """A fake asyncio.sleep that records the requested delays."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make_ctx(sleeps: Sleeps) -> Callable[..., FaultContext]:
    def make(wire: WireFormat | None = None, seed: int = 1, **exchange: Any) -> FaultContext:
        # Stream editors act on event streams: an SSE response unless the test says otherwise.
        exchange.setdefault("content_type", "text/event-stream")
        ex = Exchange(id="ex-1", session="s-1", **exchange)
        return FaultContext(exchange=ex, wire=wire or FakeWire(), rng=random.Random(seed), sleep=sleeps)

    return make


def sse(*payloads: Any, done: bool = True) -> list[StreamEvent]:
    """SSE events for the payloads (dicts become JSON), optionally ending with [DONE]."""
    raw = b"".join(
        (
            f"event: {p[0]}\ndata: {json.dumps(p[1])}\n\n" if isinstance(p, tuple) else f"data: {json.dumps(p)}\n\n"
        ).encode()
        for p in payloads
    )
    if done:
        raw += b"data: [DONE]\n\n"
    return SSEFramer().feed(raw)


def ndjson(*payloads: Any) -> list[StreamEvent]:
    return NDJSONFramer().feed(b"".join(json.dumps(p).encode() + b"\n" for p in payloads))


def run_editor(editor: Any, events: list[StreamEvent]) -> tuple[bytes, str | None]:
    """Drive a StreamEditor like the proxy: returns (bytes sent, CLOSE/RESET or None)."""
    out = b""
    for ev in events:
        res = editor.on_event(ev)
        if isinstance(res, str):
            return out, res
        out += b"".join(res)
    return out + b"".join(editor.on_end()), None
