"""Incremental framing of streamed bodies into SSE events or NDJSON lines.

Framers only split bytes; they never change them: the concatenation of every event's
`raw` plus `pending()` is exactly what was fed.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from brownout.core.wire.base import StreamEvent

__all__ = ["Framer", "NDJSONFramer", "SSEFramer", "framer_for"]

_SSE_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class Framer(ABC):
    """Splits a byte stream into events; subclasses define the boundary."""

    def __init__(self) -> None:
        self._buf = b""

    @abstractmethod
    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Complete events found so far; an incomplete tail waits for the next chunk."""

    def pending(self) -> bytes:
        """Bytes fed but not yet part of a complete event."""
        return self._buf

    def flush(self) -> list[StreamEvent]:
        """End of stream: whatever is left becomes a final (unterminated) event."""
        if not self._buf.strip():
            self._buf = b""
            return []
        rest, self._buf = self._buf, b""
        return [self._event(rest)]

    @abstractmethod
    def _event(self, raw: bytes) -> StreamEvent:
        """One event from its exact bytes."""


class SSEFramer(Framer):
    """Server-sent events: blocks separated by a blank line."""

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        self._buf += chunk
        out: list[StreamEvent] = []
        while True:
            m = _SSE_BOUNDARY.search(self._buf)
            if m is None:
                return out
            raw, self._buf = self._buf[: m.end()], self._buf[m.end() :]
            if raw.strip():
                out.append(self._event(raw))
            elif out:
                out[-1].raw += raw  # stray blank lines stay attached, so bytes are conserved
            else:
                out.append(StreamEvent(raw=raw, data="", event=None))

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

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        self._buf += chunk
        out: list[StreamEvent] = []
        while (i := self._buf.find(b"\n")) >= 0:
            raw, self._buf = self._buf[: i + 1], self._buf[i + 1 :]
            if raw.strip():
                out.append(self._event(raw))
            elif out:
                out[-1].raw += raw
            else:
                out.append(StreamEvent(raw=raw, data=""))
        return out

    def _event(self, raw: bytes) -> StreamEvent:
        return StreamEvent(raw=raw, data=raw.decode("utf-8", "replace").strip())


def framer_for(content_type: str) -> Framer | None:
    """The framer for a streaming content type, or None for bodies that are not event streams."""
    ct = content_type.split(";", 1)[0].strip().lower()
    if ct == "text/event-stream":
        return SSEFramer()
    if ct in ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/json-seq"):
        return NDJSONFramer()
    return None
