"""Shared stream-editing helpers: event counting and rewriting one event's data in place."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from brownout.core.wire.base import StreamEvent, WireFormat
from brownout.core.wire.eventstream import EventStreamEvent
from brownout.core.wire.framing import framer_for
from brownout.faults.base import StreamEditor

__all__ = [
    "AfterEventsEditor",
    "ByteCutEditor",
    "JsonEventEditor",
    "counts",
    "edit_events_in_body",
    "is_sse",
    "with_data",
]


def counts(event: StreamEvent) -> bool:
    """Events that carry data count; comments and stray blank lines (keep-alives) do not."""
    return bool(event.data.strip())


def is_sse(event: StreamEvent) -> bool:
    """True for an SSE event, False for an NDJSON line."""
    head = event.raw.lstrip()[:6]
    return head.startswith((b"data:", b"event:", b"id:", b"retry:", b":"))


def with_data(event: StreamEvent, data: str) -> bytes:
    """The event's wire bytes with its data replaced; other fields and line endings kept (a binary
    event-stream message is re-encoded with its headers kept and its CRCs recomputed)."""
    if isinstance(event, EventStreamEvent):
        return event.with_data(data)
    if not is_sse(event):
        body = event.raw.rstrip(b"\r\n")
        return data.encode() + event.raw[len(body) :]
    out: list[bytes] = []
    done = False
    for line in event.raw.splitlines(keepends=True):
        if line.startswith(b"data:"):
            if not done:
                # Multi-line data collapses into one line: editors never put newlines in `data`.
                end = line[len(line.rstrip(b"\r\n")) :] or b"\n"
                out.append(b"data: " + data.encode() + end)
                done = True
            continue
        out.append(line)
    return b"".join(out)


class AfterEventsEditor(StreamEditor):
    """Passes `after_events` data events through, then fires once.

    It also fires on the provider's terminal event if that comes first, so a short stream
    still shows the fault and never completes cleanly; `on_end` fires when the stream ends
    with neither.
    """

    def __init__(self, wire: WireFormat, after_events: int) -> None:
        self.wire = wire
        self.after_events = after_events
        self.seen = 0
        self.fired = False

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        if self.fired:
            return self.after_fire(event)
        if not counts(event):
            return [event.raw]
        if self.seen >= self.after_events or self.wire.is_terminal(event):
            self.fired = True
            return self.fire(event)
        self.seen += 1
        return [event.raw]

    def on_end(self) -> list[bytes]:
        if self.fired:
            return []
        self.fired = True
        return self.fire_at_end()

    def fire(self, event: StreamEvent) -> list[bytes] | str:
        """Replace the event that hit the threshold."""
        raise NotImplementedError  # pragma: no cover - abstract

    def after_fire(self, event: StreamEvent) -> list[bytes] | str:
        """Every event after the one that fired."""
        return [event.raw]

    def fire_at_end(self) -> list[bytes]:
        """The stream ended before the threshold."""
        return []


def edit_events_in_body(editor: StreamEditor, body: bytes, content_type: str) -> bytes | None:
    """Run a stream editor over a whole buffered SSE/NDJSON body; None when it is no event stream.

    A buffered body cannot be reset half-way, so CLOSE and RESET both just end it there.
    """
    framer = framer_for(content_type)
    if framer is None:
        return None
    out: list[bytes] = []
    for event in framer.feed(body) + framer.flush():
        res = editor.on_event(event)
        if isinstance(res, str):
            return b"".join(out)
        out.extend(res)
    return b"".join(out + editor.on_end())


class ByteCutEditor(StreamEditor):
    """Delivers exactly `limit` body bytes (cutting inside an event), then ends with `how`."""

    def __init__(self, limit: int, how: str) -> None:
        self.left = limit
        self.how = how

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        if self.left <= 0:
            return self.how
        if len(event.raw) < self.left:
            self.left -= len(event.raw)
            return [event.raw]
        # The cut falls inside this event: send its head now, end on the next event (an
        # editor cannot both send bytes and end in one call).
        part, self.left = event.raw[: self.left], 0
        return [part]


class JsonEventEditor(StreamEditor):
    """Applies an in-place JSON edit to every data event; re-serialises only the events it changed."""

    def __init__(self, edit: Callable[[Any], bool]) -> None:
        self.edit = edit

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        if not counts(event):
            return [event.raw]
        doc = event.json()
        if doc is None or not self.edit(doc):
            return [event.raw]
        return [with_data(event, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))]
