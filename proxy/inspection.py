"""Parsing a copy of a streamed body into the exchange, with bounded memory and bounded work per call.

Events are framed and fed to the wire parser as they arrive; other bodies keep a copy of at
most `copy_max` bytes, parsed whole at the end. A compressed copy is decoded in slices: at
most `SLICE_BUDGET_S` of work at a time, the rest continued after as long a pause
(`call_later`), so a highly compressed body never takes more than half the event loop from
other flows. Limits stop inspection (the body
passes through untouched and the exchange records why): an event longer than the framer's
`max_pending`, more than `decoded_max` decoded bytes, corrupt compressed bytes, or a compressed
backlog past `BACKLOG_MAX` (parsing fell behind the wire).

With `later`, a plain event stream is not parsed as it goes by: its chunks are kept (up to
`LATER_MAX` bytes, then parsed at once to bound memory) and parsed when the inspector closes, which
the proxy does at the loop's next idle moment after the answer (proxy/idlework.py). The proxy asks
for it only when nothing reads the parsed answer before then (no fault plan, no recording, a wire
format whose parser need not see events live): the parse then costs the client nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import StreamEvent, StreamParser, WireFormat
from brownout.core.wire.decoding import DecodeError, Decoder
from brownout.core.wire.framing import Framer

__all__ = ["BACKLOG_MAX", "LATER_MAX", "SLICE_BUDGET_S", "StreamInspector"]

log = logging.getLogger(__name__)

SLICE = 4 << 10  # decoded bytes framed and parsed at a time: about 1 ms even when events are tiny
SLICE_BUDGET_S = 0.005  # then other flows get the loop: parsing cost depends on event sizes, not bytes
BACKLOG_MAX = 8 << 20  # compressed bytes waiting to be parsed before inspection gives up
LATER_MAX = 64 << 10  # bytes of a stream kept to parse at close (`later`); past it they are parsed at once


class StreamInspector:
    """Feeds a copy of a streamed body to the wire parser (or keeps a bounded copy of a non-event body)."""

    def __init__(
        self,
        exchange: Exchange,
        wire: WireFormat,
        guard: Guard,
        framer: Framer | None,
        *,
        decoder: Decoder | None = None,
        decoded_max: int,
        copy_max: int = 0,
        later: bool = False,
    ) -> None:
        self.ex = exchange
        self.wire = wire
        self.guard = guard
        self.framer = framer
        self.decoder = decoder
        self.decoded_max = decoded_max
        self.decoded = 0
        self.parser: StreamParser | None = None
        if framer is not None:
            self.parser = guard.call("wire", wire.stream_parser, exchange, context=f"{wire.provider} stream")
        self._copy: bytearray | None = bytearray() if copy_max and framer is None else None
        self._copy_max = copy_max
        self._tail_wanted = False  # the body ended: its unterminated last event still counts
        self._scheduled = False
        self._then: Callable[[], None] | None = None
        self._done = False
        self.stopped = False  # a limit stopped inspection before the end of the body
        # Chunks kept to frame and parse at close (see the module doc); None: parsed as they come.
        self._later: list[bytes] | None = [] if later and framer is not None and decoder is None else None
        self._later_size = 0

    @property
    def parses_later(self) -> bool:
        """The stream's copy is parsed when the inspector closes, not as it goes by."""
        return self._later is not None

    # --- input -------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes as they went by (still encoded when a decoder was given)."""
        if self._copy is not None:
            self._keep(data)
        elif self.framer is None:
            return
        elif self.decoder is None:
            self._frame(data)
        else:
            self.decoder.feed(data)
            if self.decoder.queued > BACKLOG_MAX:
                self.stop("fell_behind", f"over {BACKLOG_MAX} compressed bytes waiting to be parsed")
                return
            if not self._scheduled:  # else the continuation already waiting takes this too
                self._pump()

    def feed_sent(self, sent: Sequence[bytes | StreamEvent]) -> None:
        """What an editor handed on: an event it let through unchanged is parsed as it is, without
        framing its bytes again (unless the framer holds part of an event: then bytes go in order)."""
        if self.framer is None or self.decoder is not None:
            self.feed(b"".join(x.raw if isinstance(x, StreamEvent) else x for x in sent))
            return
        for item in sent:
            if self.framer is None:
                return
            if isinstance(item, StreamEvent):
                if self.framer.pending_size == 0:
                    self._parse([item])
                    continue
                item = item.raw
            if item:
                self._frame(item)

    def parse_pending(self) -> None:
        """Parse now what was kept for later (a reader needs the parsed answer before the exchange completes)."""
        if self._later:
            self._catch_up()

    def end(self, *, tail: bool = True) -> None:
        """The body is complete; with `tail`, an unterminated last event is parsed too."""
        self._tail_wanted = tail

    def stop(self, reason: str, detail: str) -> None:
        """Stop inspecting: what was parsed so far stays, the rest passes by unread."""
        self.ex.mark_uninspected(reason, detail)
        self.stopped = True
        log.info("brownout: %s not inspected further: %s", self.ex.id, detail)
        self.framer = None
        self.decoder = None
        self._copy = None
        if self._later is not None:
            self._later = []

    def close(self, then: Callable[[], None] | None = None, *, wait: bool = True) -> None:
        """Materialise what was parsed, then call `then`: when queued decoding is done, or at once
        (without `wait`, what is still queued goes unparsed)."""
        self._then = then
        if not self._scheduled or not wait:
            self._complete()

    # --- work ----------------------------------------------------------------------------

    def _frame(self, data: bytes) -> None:
        if self._later is not None:
            self._later.append(data)
            self._later_size += len(data)
            if self._later_size > LATER_MAX:
                self._catch_up()
            return
        self._frame_now(data)

    def _catch_up(self) -> None:
        """Frame and parse the chunks kept for later, in order (some may be left unread if a limit stops it)."""
        assert self._later is not None
        kept, self._later, self._later_size = self._later, [], 0
        for chunk in kept:
            if self.framer is None:
                return
            self._frame_now(chunk)

    def _frame_now(self, data: bytes) -> None:
        assert self.framer is not None
        events = self.framer.feed(data)
        if events:
            self._parse(events)
        if self.framer.overflowed:
            size = self.framer.pending_size
            self.stop("event_too_large", f"no event boundary in {size} bytes (proxy.event_max_bytes)")

    def _pump(self) -> None:
        while self._pump_slice():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (driven synchronously): do all the work now
                continue
            if not self._scheduled:
                self._scheduled = True  # more to decode: continue after other flows had their turn
                loop.call_later(SLICE_BUDGET_S, self._resume)
            return

    def _pump_slice(self) -> bool:
        """Decode, frame and parse for up to SLICE_BUDGET_S; True when more may be waiting."""
        deadline = time.perf_counter() + SLICE_BUDGET_S
        while time.perf_counter() < deadline:
            if self.framer is None or self.decoder is None:
                return False
            try:
                plain = self.decoder.read(SLICE)
            except DecodeError as e:
                self.ex.note_parse_error("undecodable", f"content decoding: {e}")
                self.stop("undecodable", f"content decoding: {e}")
                return False
            if not plain:
                return False
            self.decoded += len(plain)
            if self.decoded > self.decoded_max:
                self.stop("decoded_too_large", f"decodes to over {self.decoded_max} bytes (proxy.buffer_max_bytes)")
                return False
            self._frame(plain)
        return True

    def _resume(self) -> None:
        self._scheduled = False
        self.guard.call("wire", self._pump, context=f"{self.wire.provider} stream decoding")
        if not self._scheduled and self._then is not None:
            self._complete()

    def _parse(self, events: list[StreamEvent]) -> None:
        if self.parser is None:
            return
        for ev in events:
            try:
                self.parser.feed(ev)  # counts events and spots the terminal one
            except Exception as e:  # noqa: BLE001 - one bad parser stops parsing, never the stream
                self.guard.failed("wire", e, f"{self.wire.provider} stream event")
                self.parser = None
                return

    def _keep(self, data: bytes) -> None:
        assert self._copy is not None
        if len(self._copy) + len(data) > self._copy_max:
            self._copy = None  # too large to parse: pass it through, record that it went unparsed
            self.ex.note_parse_error("too_large", "body larger than proxy.capture_max_bytes: not parsed")
            return
        self._copy += data

    def _complete(self) -> None:
        if self._done:
            return
        self._done = True
        if self._later is not None:
            self._catch_up()
            self._later = None
        if self._tail_wanted and self.framer is not None:
            self._parse(self.framer.flush())
        if self.parser is not None:
            self.guard.call("wire", self.parser.finish, context="stream end")
            if self.stopped:
                self.ex.stream_complete = None  # unknown: the end was never read, so it is no cut
        elif self._copy is not None:
            body = self._decoded_copy(bytes(self._copy))
            if body is not None:
                self.guard.call(
                    "wire", self.wire.parse_response, self.ex, body, context=f"{self.wire.provider} response"
                )
        self.parser, self.framer, self.decoder, self._copy = None, None, None, None
        then, self._then = self._then, None
        if then is not None:
            then()

    def _decoded_copy(self, raw: bytes) -> bytes | None:
        if self.decoder is None:
            return raw
        self.decoder.feed(raw)
        out = bytearray()
        try:
            while piece := self.decoder.read(self._copy_max + 1 - len(out)):
                out += piece
                if len(out) > self._copy_max:
                    self.ex.note_parse_error("too_large", "body larger than proxy.capture_max_bytes: not parsed")
                    return None
        except DecodeError as e:
            self.ex.note_parse_error("undecodable", f"content decoding: {e}")
            return None
        return bytes(out)
