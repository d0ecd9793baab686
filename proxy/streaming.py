"""The stream callable: passes a streamed body through chunk by chunk, parsing a copy.

With no fault editing the stream, every chunk is returned as it came (boundaries and
timing preserved) and the wire parser reads events from a framed copy. With an editor,
bytes are released per complete event so the editor can change, drop or end them, and the
parser reads the edited bytes: the exchange records what the agent received (a corrupted
tool call, a stream cut before its terminal event), which is what invariants judge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import StreamEvent, StreamParser, WireFormat
from brownout.core.wire.framing import Framer
from brownout.faults.base import CLOSE, RESET, StreamEditor, StreamTiming

__all__ = ["StreamTap"]

log = logging.getLogger(__name__)


class StreamTap:
    """A `flow.response.stream` callable that records what streamed and applies stream faults."""

    def __init__(
        self,
        exchange: Exchange,
        wire: WireFormat,
        framer: Framer | None,
        editor: StreamEditor | None,
        timing: StreamTiming | None,
        guard: Guard,
        *,
        on_reset: Callable[[bool], None],
        decoder: Callable[[bytes], bytes] | None = None,
        keep_copy: int = 0,
    ) -> None:
        self.ex = exchange
        # A content-encoded stream is passed through as it came and parsed from a decoded copy;
        # editors never see it (edited plaintext inside a gzip stream would corrupt it).
        self.decoder = decoder
        if decoder is not None:
            editor = None
        self.wire = wire
        self.framer = framer
        self.editor = editor
        self.guard = guard
        self.on_reset = on_reset
        self.reset_after = timing.reset_after_bytes if timing is not None else None
        self.parser: StreamParser | None = None
        if framer is not None:
            self.parser = guard.call("wire", wire.stream_parser, exchange, context=f"{wire.provider} stream")
        # When a fault may change or cut what the client gets, parse the bytes handed to the
        # client (re-framed) rather than upstream's events.
        self._out_framer: Framer | None = None
        if framer is not None and decoder is None and (editor is not None or self.reset_after is not None):
            self._out_framer = type(framer)()
        self._finished = False
        self.sent = 0
        self.ended = False  # a fault ended the stream: drop everything after
        self._reset_pending = False
        # Plain (non-event) bodies streamed for size: keep a bounded copy to parse at the end.
        self._copy: bytearray | None = bytearray() if keep_copy and framer is None else None
        self._copy_max = keep_copy

    def __call__(self, data: bytes) -> bytes | list[bytes]:
        ex = self.ex
        if data:
            ex.response_bytes += len(data)
        if self._reset_pending:
            # The bytes kept before the reset were written when that call returned; the
            # connection must die now, before mitmproxy can end the body cleanly.
            self._reset_pending = False
            self.on_reset(True)
        if self.ended:
            return []
        if not data:
            return self._at_end()
        if self._copy is not None:
            self._keep(data)
        events = self.framer.feed(self._decoded(data)) if self.framer is not None else None
        if events and self._out_framer is None:
            self._parse(events)
        if self.editor is None:
            out: list[bytes] = [data]
        elif events is None:
            out = self._edit([StreamEvent(raw=data, data="")])
        else:
            out = self._edit(events)
        return self._emit(out)

    def _decoded(self, data: bytes) -> bytes:
        if self.decoder is None:
            return data
        try:
            return self.decoder(data)
        except Exception as e:  # noqa: BLE001 - a corrupt body: stop parsing it, keep passing it through
            self.ex.parse_error = self.ex.parse_error or f"content decoding: {e}"
            self.decoder, self.framer, self.parser = None, None, None
            return b""

    def _at_end(self) -> bytes | list[bytes]:
        tail: list[StreamEvent] = self.framer.flush() if self.framer is not None else []
        if tail and self._out_framer is None:
            self._parse(tail)
        out: list[bytes] = []
        if self.editor is not None:
            out = self._edit(tail) if tail else []
            if not self.ended:
                out += self.guard.call("fault", self.editor.on_end, default=[]) or []
        elif tail:
            pass  # already passed through as raw chunks
        emitted = self._emit(out)
        if self._out_framer is not None and not self.ended:
            self._parse(self._out_framer.flush())
        self._finish()
        return emitted

    def _keep(self, data: bytes) -> None:
        assert self._copy is not None
        if len(self._copy) + len(data) > self._copy_max:
            self._copy = None  # too large to parse: pass it through, record that it went unparsed
            self.ex.parse_error = self.ex.parse_error or "body larger than proxy.capture_max_bytes: not parsed"
            return
        self._copy += data

    def _finish(self) -> None:
        """Materialise what the parser reassembled (text, tool calls) onto the exchange, once."""
        if self._finished:
            return
        if self.parser is not None:
            self._finished = True
            self.guard.call("wire", self.parser.finish, context="stream end")
        elif self._copy is not None:
            self._finished = True
            body = self._decoded(bytes(self._copy)) if self.decoder is not None else bytes(self._copy)
            self._copy = None
            self.guard.call("wire", self.wire.parse_response, self.ex, body, context=f"{self.wire.provider} response")

    def _parse(self, events: list[StreamEvent]) -> None:
        if self.parser is None:
            return
        for ev in events:
            try:
                self.parser.feed(ev)  # counts events and spots the terminal one
            except Exception as e:  # noqa: BLE001 - contained through the guard; one bad parser stops parsing, never the stream
                self.guard.failed("wire", e, f"{self.wire.provider} stream event")
                self.parser = None
                return

    def _edit(self, events: list[StreamEvent]) -> list[bytes]:
        out: list[bytes] = []
        for ev in events:
            if self.editor is None:
                out.append(ev.raw)
                continue
            try:
                result = self.editor.on_event(ev)
            except Exception as e:  # noqa: BLE001 - contained through the guard; a broken editor drops out
                self.guard.failed("fault", e, "stream editor")
                self.editor = None
                out.append(ev.raw)
                continue
            if result in (CLOSE, RESET):
                self.ended = True
                if result == RESET:
                    self._reset()
                break
            out.extend(result)  # type: ignore[arg-type]
        if self.editor is None and self.framer is not None and not self.ended:
            out.append(self.framer.pending())  # editor gone: flush what it was holding back
            self.framer = None
        return out

    def _emit(self, out: list[bytes]) -> bytes | list[bytes]:
        if out and self.ex.timings.first_client_byte is None and any(out):
            self.ex.timings.first_client_byte = time.time()
        if self.reset_after is None:
            self._parse_sent(out)
            return out
        # reset mid-body: pass bytes up to the limit, then drop the connection with an RST
        kept: list[bytes] = []
        for chunk in out:
            room = self.reset_after - self.sent
            if len(chunk) >= room:
                kept.append(chunk[:room])
                self.sent += room
                self.ended = True
                self._reset()
                break
            kept.append(chunk)
            self.sent += len(chunk)
        self._parse_sent(kept)
        return kept

    def _parse_sent(self, chunks: list[bytes]) -> None:
        if self._out_framer is not None and chunks:
            self._parse(self._out_framer.feed(b"".join(chunks)))

    def _reset(self) -> None:
        self._reset_pending = True
        self.on_reset(False)  # soon, for a stream whose next bytes are slow to come

    def close(self) -> None:
        """The exchange finished: materialise what was parsed (a stream a fault ended or a reset cut
        never reaches its end-of-body call), then release parser state."""
        self._finish()
        self.parser = None
        self.framer = None
        self._out_framer = None
