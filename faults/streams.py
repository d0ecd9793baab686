"""Shared stream-editing helpers: event counting and rewriting one event's data in place."""

from __future__ import annotations

from faults.base import StreamEditor
from proxy.wire.base import StreamEvent, WireFormat

__all__ = ["AfterEventsEditor", "counts", "is_sse", "with_data"]


def counts(event: StreamEvent) -> bool:
    """Events that carry data count; comments and stray blank lines (keep-alives) do not."""
    return bool(event.data.strip())


def is_sse(event: StreamEvent) -> bool:
    """True for an SSE event, False for an NDJSON line."""
    head = event.raw.lstrip()[:6]
    return head.startswith((b"data:", b"event:", b"id:", b"retry:", b":"))


def with_data(event: StreamEvent, data: str) -> bytes:
    """The event's wire bytes with its data replaced; other fields and line endings kept."""
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
