"""Where a stall's pause falls in a response body (the relay does the waiting).

A stall pauses right after the Nth event that carries data, counted with the same rule
as truncate and http_error (`faults.streams.counts`): keep-alive comments and blank
blocks are passed on but never counted.

Content-encoded streams (gzip, deflate, br, zstd) are framed through a decoded copy: the
client always receives the upstream's original encoded bytes, and the pause falls after
the upstream chunk in which the Nth event ends (compressed bytes cannot be cut at an
event boundary). Servers that compress event streams flush per event, so that is usually
exactly after the Nth event. An encoding brownout cannot decode (an unknown or stacked
one, or bytes that fail to decode or decode to more than `_MAX_DECODED`) falls back to
counting upstream chunks as events.
"""

from __future__ import annotations

import logging

from brownout.core.wire.decoding import DecodeError, Decoder, decoder_for, single_coding
from brownout.core.wire.framing import Framer, framer_for
from brownout.faults.streams import counts

__all__ = ["StallPoint"]

log = logging.getLogger(__name__)

_MAX_PENDING = 1 << 20  # bytes of one unfinished event before giving up on framing
_MAX_DECODED = 64 << 20  # decoded bytes searched for the Nth event (a compression bomb stops here)
_SLICE = 1 << 20


class StallPoint:
    """Feeds a body chunk by chunk and says where the pause after `after_events` events goes.

    `after_events: 0` pauses before the first event, right after the response headers
    (`at_start`); nothing is framed then.
    """

    def __init__(self, after_events: int, content_type: str, content_encoding: str = "") -> None:
        self.after_events = after_events
        self.seen = 0
        self.done = False
        self._framer: Framer | None = framer_for(content_type, _MAX_PENDING)
        self._decode: Decoder | None = None
        self._decoded = 0
        self._by_chunk = False  # encoded and not decodable: count upstream chunks instead
        if single_coding(content_encoding) != "":
            # The same decoder the stream parser uses (brownout.core.wire.decoding).
            self._decode = decoder_for(content_encoding)
            self._by_chunk = self._decode is None
        # Only event streams are paused: other bodies have no events (a framer) to count.
        self.at_start = self._framer is not None and after_events <= 0
        if self.at_start:
            self.done, self._framer = True, None

    def feed(self, chunk: bytes) -> int | None:
        """Offset in `chunk` right after the Nth event (pause there), or None: no pause in it yet."""
        if self.done or self._framer is None or not chunk:
            return None
        if self._by_chunk:
            return self._reached(len(chunk), 1)
        if self._decode is not None:
            try:
                found = self._count_decoded(chunk)
            except DecodeError as e:  # corrupt or too large to search: count chunks from here on
                log.info("stall: cannot decode the event stream (%s); pausing after upstream chunks", e)
                self._decode, self._by_chunk = None, True
                return self._reached(len(chunk), 1)
            if found:
                return self._reached(len(chunk), found)
            self._check_pending()
            return None
        # Identity: cut exactly after the Nth event. Events start in bytes fed earlier (the
        # framer's pending part), so offsets into this chunk discount those.
        offset = -self._framer.pending_size
        for ev in self._framer.feed(chunk):
            offset += len(ev.raw)
            if counts(ev) and self._reached(offset, 1) is not None:
                return max(0, offset)
        self._check_pending()
        return None

    def _count_decoded(self, chunk: bytes) -> int:
        """Data events completed in this chunk, decoded in bounded slices."""
        assert self._decode is not None
        self._decode.feed(chunk)
        found = 0
        while self._framer is not None and (piece := self._decode.read(_SLICE)):
            self._decoded += len(piece)
            if self._decoded > _MAX_DECODED:
                raise DecodeError(f"decodes to over {_MAX_DECODED} bytes")
            found += sum(1 for ev in self._framer.feed(piece) if counts(ev))
            if self._framer.overflowed or self.seen + found >= self.after_events:
                break
        return found

    def _check_pending(self) -> None:
        # A body that never shows an event boundary would grow this copy without limit.
        if self._framer is not None and self._framer.overflowed:
            log.info("stall: no event boundary in %d bytes; not pausing this body", _MAX_PENDING)
            self.done, self._framer = True, None

    def _reached(self, offset: int, new_events: int) -> int | None:
        self.seen += new_events
        if self.seen < self.after_events:
            return None
        self.done = True
        self._framer = None  # nothing more to count: stop copying the body
        return offset
