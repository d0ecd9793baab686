"""Driving a realtime codec by hand: a session exchange, and messages observed then delivered."""

from __future__ import annotations

import json
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.realtime import RealtimeCodec, RealtimeEvent, RealtimeFormat

__all__ = ["Clock", "feed", "session_for"]


class Clock:
    """A settable clock for codecs."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def session_for(fmt: RealtimeFormat, path: str, clock: Clock) -> tuple[Exchange, RealtimeCodec]:
    ex = Exchange(id="flow1", session="agent-1", host="api.example", port=443, scheme="https", path=path)
    ex.status = 101
    ex.timings.start = clock.now
    fmt.parse_request(ex, b"")
    return ex, fmt.codec(ex, clock)


def feed(codec: RealtimeCodec, direction: str, doc: Any, clock: Clock, *, binary: bool = False) -> RealtimeEvent:
    """One message both observed (arrived) and delivered, a millisecond after the previous one."""
    clock.now += 0.001
    content = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    event = codec.observe(direction, content, not binary)  # type: ignore[arg-type]
    codec.deliver(event, clock.now)
    return event
