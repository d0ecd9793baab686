"""Realtime sessions for fault tests: a codec per provider, events from documents, an engine for event rules."""

from __future__ import annotations

import json
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.gemini_live import GeminiLiveFormat
from brownout.core.wire.openai_realtime import OpenAIRealtimeFormat
from brownout.core.wire.realtime import RealtimeCodec, RealtimeEvent, RealtimeFormat
from brownout.faults.events import EventAction
from brownout.faults.plan import Fired

__all__ = ["GEMINI", "OPENAI", "act", "event", "session"]

OPENAI = OpenAIRealtimeFormat()
GEMINI = GeminiLiveFormat()
PATHS = {"openai_realtime": "/v1/realtime?model=gpt-realtime", "gemini_live": "/ws/x.BidiGenerateContent"}


def session(fmt: RealtimeFormat = OPENAI, name: str = "s1") -> RealtimeCodec:
    """A session's codec with a generation open (response resp_1 / turn 1)."""
    ex = Exchange(id=f"{name}-flow", session=name, host="api.example", path=PATHS[fmt.provider], status=101)
    fmt.parse_request(ex, b"")
    codec = fmt.codec(ex, lambda: 1000.0)
    first = {"type": "response.created", "response": {"id": "resp_1"}} if fmt is OPENAI else {
        "serverContent": {"modelTurn": {"parts": [{"text": "Hel"}]}}
    }  # fmt: skip
    codec.deliver(codec.observe("server", json.dumps(first).encode(), True))
    return codec


def event(codec: RealtimeCodec, doc: dict[str, Any], direction: str = "server") -> RealtimeEvent:
    return codec.observe(direction, json.dumps(doc).encode(), True)  # type: ignore[arg-type]


def act(fired: Fired, ev: RealtimeEvent) -> EventAction | None:
    return fired.fault.on_event(fired.ctx, ev)
