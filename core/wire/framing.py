"""Incremental framing of streamed bodies into SSE events, NDJSON lines or AWS event-stream messages.

Framers only split bytes; they never change them: the concatenation of every event's
`raw` plus `pending()` is exactly what was fed.

Work is linear in the bytes fed: one buffer, a search that resumes where the last one
stopped, and one trim per `feed`. Memory is bounded: once more than `max_pending` bytes
arrive without an event boundary, the framer sets `overflowed`; the caller then stops
framing that body (it passes through untouched) instead of buffering it whole.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from brownout.core.wire.base import StreamEvent
from brownout.core.wire.eventstream import PRELUDE_LENGTH, EventStreamEvent, FrameError, event_of, frame_length
from brownout.core.wire.eventstream import Decoder as _MessageDecoder

__all__ = ["DEFAULT_MAX_PENDING", "EventStreamFramer", "Framer", "NDJSONFramer", "SSEFramer", "framer_for"]

EVENTSTREAM = "application/vnd.amazon.eventstream"

DEFAULT_MAX_PENDING = 4 << 20  # bytes of one unfinished event; real events are far smaller

_SSE_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class Framer(ABC):
    """Splits a byte stream into events; subclasses define the boundary."""

    # How far back a boundary can start in bytes already searched (it may straddle two chunks).
    _lookback: int = 0

    def __init__(self, max_pending: int | None = DEFAULT_MAX_PENDING) -> None:
        self._buf = bytearray()
        self._scan = 0  # the next boundary search starts here
        self.max_pending = max_pending
        self.overflowed = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Complete events found so far; an incomplete tail waits for the next chunk."""
        buf = self._buf
        buf += chunk
        out: list[StreamEvent] = []
        start = 0
        pos = self._scan
        while (end := self._boundary(buf, pos)) >= 0:
            raw = bytes(buf[start:end])
            if raw.strip():
                out.append(self._event(raw))
            elif out:
                out[-1].raw += raw  # stray blank lines stay attached, so bytes are conserved
            else:
                out.append(StreamEvent(raw=raw, data="", event=None))
            start = pos = end
        if start:
            del buf[:start]
        self._scan = max(0, len(buf) - self._lookback)
        if self.max_pending is not None and len(buf) > self.max_pending:
            self.overflowed = True
        return out

    @abstractmethod
    def _boundary(self, buf: bytearray, pos: int) -> int:
        """The end offset of the first event boundary at or after `pos`, or -1."""

    @property
    def pending_size(self) -> int:
        """How many bytes wait for an event boundary."""
        return len(self._buf)

    def pending(self) -> bytes:
        """Bytes fed but not yet part of a complete event."""
        return bytes(self._buf)

    def take_pending(self) -> bytes:
        """The pending bytes, handed over and forgotten (a caller that stops framing flushes them)."""
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = 0
        return rest

    def flush(self) -> list[StreamEvent]:
        """End of stream: whatever is left becomes a final (unterminated) event."""
        rest = self.take_pending()
        if not rest.strip():
            return []
        return [self._event(rest)]

    @abstractmethod
    def _event(self, raw: bytes) -> StreamEvent:
        """One event from its exact bytes."""


class SSEFramer(Framer):
    """Server-sent events: blocks separated by a blank line."""

    _lookback = 3  # the longest boundary, \r\n\r\n, minus one

    def _boundary(self, buf: bytearray, pos: int) -> int:
        m = _SSE_BOUNDARY.search(buf, pos)
        return -1 if m is None else m.end()

    def _event(self, raw: bytes) -> StreamEvent:
        text = raw.decode("utf-8", "replace")
        data: list[str] = []
        event: str | None = None
        for line in text.splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
        return StreamEvent(raw=raw, data="\n".join(data), event=event)


class NDJSONFramer(Framer):
    """Newline-delimited JSON (Ollama)."""

    def _boundary(self, buf: bytearray, pos: int) -> int:
        i = buf.find(b"\n", pos)
        return -1 if i < 0 else i + 1

    def _event(self, raw: bytes) -> StreamEvent:
        return StreamEvent(raw=raw, data=raw.decode("utf-8", "replace").strip())


class EventStreamFramer(Framer):
    """AWS event streams: binary messages whose prelude gives their length (see core.wire.eventstream).

    Bytes that are no valid message (a bad CRC, an impossible length) cannot be framed past: they and
    everything after them pass on as raw events without data, each marked with the `problem`.
    """

    def __init__(self, max_pending: int | None = DEFAULT_MAX_PENDING) -> None:
        super().__init__(max_pending)
        self._broken: str | None = None

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        buf = self._buf
        buf += chunk
        if self._broken is not None:
            return [self._raw_event(self.take_pending())] if buf else []
        out: list[StreamEvent] = []
        start = 0
        while True:
            try:
                end = self._boundary(buf, start)
                if end < 0:
                    break
                out.append(self._event(bytes(buf[start:end])))
            except FrameError as e:
                self._broken = str(e)
                del buf[:start]
                out.append(self._raw_event(self.take_pending()))
                return out
            start = end
        if start:
            del buf[:start]
        if self.max_pending is not None and len(buf) > self.max_pending:
            self.overflowed = True
        return out

    def flush(self) -> list[StreamEvent]:
        rest = self.take_pending()
        if not rest:
            return []
        # An unfinished message: the bytes go on (a client that reads them drops them, as botocore does).
        return [EventStreamEvent(raw=rest, data="", problem=self._broken or "message cut short")]

    def _raw_event(self, raw: bytes) -> EventStreamEvent:
        return EventStreamEvent(raw=raw, data="", problem=self._broken)

    def _boundary(self, buf: bytearray, pos: int) -> int:
        """The end of the message starting at `pos` (its prelude gives the length), or -1 until it is whole.

        Raises FrameError on an impossible prelude, which `feed` turns into the stream's `problem`."""
        if len(buf) - pos < PRELUDE_LENGTH:
            return -1
        end = pos + frame_length(bytes(buf[pos : pos + PRELUDE_LENGTH]))
        return end if len(buf) >= end else -1

    def _event(self, raw: bytes) -> StreamEvent:
        try:
            (message,) = _MessageDecoder().feed(raw)
        except FrameError as e:  # a message CRC or header problem: this message alone is bad
            return EventStreamEvent(raw=raw, data="", problem=str(e))
        return event_of(message)


def framer_for(content_type: str, max_pending: int | None = DEFAULT_MAX_PENDING) -> Framer | None:
    """The framer for a streaming content type, or None for bodies that are not event streams."""
    ct = content_type.split(";", 1)[0].strip().lower()
    if ct == "text/event-stream":
        return SSEFramer(max_pending)
    if ct in ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/json-seq"):
        return NDJSONFramer(max_pending)
    if ct == EVENTSTREAM:
        return EventStreamFramer(max_pending)
    return None
