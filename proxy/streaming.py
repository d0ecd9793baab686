"""The stream callable: passes a streamed body through chunk by chunk, parsing a copy.

With no fault editing the stream, every chunk is returned as it came (boundaries and
timing preserved) and a `StreamInspector` parses a copy. With an editor, bytes are released
per complete event so the editor can change, drop or end them, and the inspector parses the
edited bytes: the exchange records what the agent received (a corrupted tool call, a stream
cut before its terminal event), which is what invariants judge.

A compressed body under an editor is transcoded chunk by chunk: decoded, edited, and
re-compressed with the same content-coding, flushed after every chunk so events still
arrive one by one. A cut ends the compressed stream properly (a truncated gzip body is valid
gzip holding exactly the events kept). The proxy drops `content-length` before such a body
starts (its size changes) and ends the client's read right after a cut (`on_cut`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import StreamEvent, WireFormat
from brownout.core.wire.decoding import DecodeError, Decoder, Encoder, decoder_for, encoder_for, single_coding
from brownout.core.wire.framing import Framer
from brownout.faults.base import CLOSE, RESET, StreamEditor, StreamTiming
from brownout.proxy.inspection import StreamInspector

__all__ = ["StreamTap"]

log = logging.getLogger(__name__)

# What an editor hands on: bytes it produced, or an event it let through unchanged (which the
# inspector can parse as it is instead of framing its bytes again).
Sent = bytes | StreamEvent

TRANSCODE_SLICE = 1 << 20  # decoded bytes edited and re-compressed at a time: bounds the copy in memory
HELD_MAX = 1 << 20  # raw bytes kept until the first output, to pass a corrupt body through unchanged


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
        on_cut: Callable[[], None] = lambda: None,
        on_skip: Callable[[str], None] = lambda reason: None,
        content_encoding: str = "",
        decoded_max: int = 32 << 20,
        keep_copy: int = 0,
        parse_later: bool = False,
    ) -> None:
        self.ex = exchange
        self.wire = wire
        self.framer = framer
        self.editor = editor
        self.guard = guard
        self.on_reset = on_reset
        self.on_cut = on_cut
        self.on_skip = on_skip
        self.reset_after = timing.reset_after_bytes if timing is not None else None
        self.decoded_max = decoded_max
        self.sent = 0
        self.ended = False  # a fault ended the stream: drop everything after
        self.cut = False  # ... and it was a clean cut (not a reset)
        self.changed = False  # an editor has changed something
        self._cut_signalled = False
        self._reset_pending = False
        coding = single_coding(content_encoding)
        encoded = coding != ""
        self.decoder: Decoder | None = decoder_for(content_encoding) if encoded else None
        self._encoding = content_encoding
        self._encoder: Encoder | None = None
        self._raw = False  # transcoding gave up (corrupt input): pass upstream bytes as they are
        self._held: bytearray | None = None  # raw input not yet answered by any output
        if editor is not None and encoded and (self.decoder is None or encoder_for(content_encoding) is None):
            self._drop_editor(f"content-encoding {content_encoding!r} cannot be decoded and re-encoded")
        if self.editor is not None and self.decoder is not None:
            self._held = bytearray()
            copy_decoder = None  # the inspector gets the decoded, edited bytes
        else:
            copy_decoder, self.decoder = self.decoder, None
            if encoded and copy_decoder is None and framer is not None:
                exchange.mark_uninspected("undecodable", f"content-encoding {content_encoding!r}")
                framer = None
        # The inspector parses what the client gets: the edited bytes when an editor (or a reset
        # that cuts the body) may change them, else a copy of what upstream sent.
        out_framer = framer
        if framer is not None and (self.editor is not None or self.reset_after is not None):
            out_framer = type(framer)(framer.max_pending)
        # Nothing edits the bytes: the copy may be parsed after the answer (proxy/inspection.py).
        later = parse_later and self.editor is None and self.reset_after is None
        self.inspector = StreamInspector(
            exchange,
            wire,
            guard,
            out_framer,
            decoder=copy_decoder,
            decoded_max=decoded_max,
            copy_max=keep_copy,
            later=later,
        )
        if self.editor is None:
            self.framer = None

    # --- the callable ----------------------------------------------------------------------

    def __call__(self, data: bytes) -> bytes | list[bytes]:
        if data:
            self.ex.response_bytes += len(data)
        if self._reset_pending:
            # The bytes kept before the reset were written when that call returned; the
            # connection must die now, before mitmproxy can end the body cleanly.
            self._reset_pending = False
            self.on_reset(True)
        if self.ended:
            return []
        if not data:
            return self._at_end()
        if self._raw:
            return [data]
        if self.decoder is not None:
            return self._emit(self._transcode(data), parsed=True)
        if self.editor is None:
            return self._emit([data])
        return self._emit(self._edit_plain(data))

    def _at_end(self) -> list[bytes]:
        out: list[Sent] = []
        if self.framer is not None:
            tail = self.framer.flush()
            out = self._run_editor(tail) if tail else []
        if self.editor is not None and not self.ended:
            ending: list[bytes] = self.guard.call("fault", self.editor.on_end, default=None) or []
            self.changed = self.changed or bool(ending)
            out += ending
        if self.editor is not None and not self.changed:
            # The whole stream went by as upstream sent it (no tool call to break, no list item to
            # change, shorter than the cut): the stream faults did nothing, so they did not fire.
            self._drop_editor("the stream held nothing the fault could change")
        if self.decoder is not None:
            self.inspector.feed_sent(out)
            # An empty body stays empty; otherwise the compressed stream gets its proper end.
            last = self._encoder is not None or any(_raw(x) for x in out)
            emitted = self._emit(self._compressed(out, last=last), parsed=True)
        else:
            emitted = self._emit(out)
        self.inspector.end(tail=not self.ended)
        return emitted

    # --- editing -----------------------------------------------------------------------------

    def _edit_plain(self, data: bytes) -> list[Sent]:
        """Plain bytes in, plain bytes to send out (the editor may hold an unfinished event back)."""
        if self.editor is None:
            return [data]
        if self.framer is None:
            return self._run_editor([StreamEvent(raw=data, data="")])
        events = self.framer.feed(data)
        out = self._run_editor(events) if events else []
        if self.framer is not None and self.framer.overflowed and not self.ended:
            size = self.framer.pending_size
            out += self._give_up("event_too_large", f"no event boundary in {size} bytes (proxy.event_max_bytes)")
        return out

    def _run_editor(self, events: list[StreamEvent]) -> list[Sent]:
        out: list[Sent] = []
        for ev in events:
            if self.editor is None:
                out.append(ev)
                continue
            try:
                result = self.editor.on_event(ev)
            except Exception as e:  # noqa: BLE001 - a broken editor drops out; the stream goes on
                self.guard.failed("fault", e, "stream editor")
                self.editor = None
                out.append(ev)
                continue
            if result in (CLOSE, RESET):
                self.ended = self.changed = True
                if result == RESET:
                    self._reset()
                else:
                    self.cut = True
                break
            if len(result) == 1 and (result[0] is ev.raw or result[0] == ev.raw):
                out.append(ev)
                continue
            self.changed = True
            out.extend(result)  # type: ignore[arg-type]
        if self.editor is None and self.framer is not None and not self.ended:
            out.append(self.framer.take_pending())  # editor gone: flush what it was holding back
            self.framer = None
        return out

    def _give_up(self, reason: str, detail: str) -> list[Sent]:
        """Stop editing (the body is beyond what can be inspected): flush what was held, pass the rest."""
        pending = self.framer.take_pending() if self.framer is not None else b""
        self.framer = None
        self.inspector.stop(reason, detail)
        self._drop_editor(detail)
        return [pending] if pending else []

    def _drop_editor(self, reason: str) -> None:
        if self.editor is not None and not self.changed:
            self.guard.call("fault", self.on_skip, reason, context="skip stream faults")
        self.editor = None

    # --- transcoding (compressed bodies under an editor) ---------------------------------

    def _transcode(self, data: bytes) -> list[bytes]:
        assert self.decoder is not None
        if self._encoder is None:
            self._encoder = encoder_for(self._encoding, data[:2])
        if self._held is not None:
            self._held += data
            if len(self._held) > HELD_MAX:
                self._held = None  # no output for this long: stop keeping a way back
        self.decoder.feed(data)
        out: list[bytes] = []
        while not self.ended:
            try:
                piece = self.decoder.read(TRANSCODE_SLICE)
            except DecodeError as e:
                return self._undecodable(e, data, out)
            if not piece:
                break
            sent: list[Sent] = []
            self.inspector.decoded += len(piece)
            # Once the editor has changed the stream it sees it to the end: dropped then, it would let the
            # rest through unedited after its edit (a body cut short would go on after the cut).
            if self.editor is not None and not self.changed and self.inspector.decoded > self.decoded_max:
                detail = f"decodes to over {self.decoded_max} bytes (proxy.buffer_max_bytes)"
                sent += self._give_up("decoded_too_large", detail)
            sent += self._edit_plain(piece)
            self.inspector.feed_sent(sent)
            out += self._compressed(sent, last=False)
        if self.ended and self.cut:
            out += self._compressed([], last=True)
        return out

    def _compressed(self, plain: list[Sent], *, last: bool) -> list[bytes]:
        encoder = self._encoder or encoder_for(self._encoding)
        assert encoder is not None
        self._encoder = encoder
        out = encoder.encode(b"".join(_raw(x) for x in plain))
        if last:
            out += encoder.finish()  # a valid end of the compressed stream, cut or not
        if out:
            self._held = None
        return [out] if out else []

    def _undecodable(self, e: DecodeError, data: bytes, out: list[bytes]) -> list[bytes]:
        """Corrupt compressed input: the client gets upstream's bytes from here on, as it would directly."""
        self.ex.note_parse_error("undecodable", f"content decoding: {e}")
        self.inspector.stop("undecodable", f"content decoding: {e}")
        self._drop_editor(f"content decoding: {e}")
        self.framer, self.decoder, self._raw = None, None, True
        if self._held is not None:
            return [bytes(self._held)]  # nothing was sent yet: the body passes through byte for byte
        return [*out, data]

    # --- output ----------------------------------------------------------------------------

    def _emit(self, sent: Sequence[Sent], *, parsed: bool = False) -> list[bytes]:
        out = [_raw(x) for x in sent]
        if out and self.ex.timings.first_client_byte is None and any(out):
            self.ex.timings.first_client_byte = time.time()
        if self.reset_after is not None:
            out = self._until_reset(out)
            if not parsed and out:
                self.inspector.feed(b"".join(out))
        elif not parsed and sent:
            self.inspector.feed_sent(sent)
        if self.cut:
            self.cut_done()
        return out

    def _until_reset(self, out: list[bytes]) -> list[bytes]:
        # reset mid-body: pass bytes up to the limit, then drop the connection with an RST
        assert self.reset_after is not None
        kept: list[bytes] = []
        for chunk in out:
            room = self.reset_after - self.sent
            if len(chunk) >= room:
                kept.append(chunk[:room])
                self.sent += room
                self.ended = True
                self.cut = False
                self._reset()
                break
            kept.append(chunk)
            self.sent += len(chunk)
        return kept

    def cut_done(self) -> None:
        """A clean cut was handed to the client: end its read now (once)."""
        if self.cut and self.ended and not self._cut_signalled:
            self._cut_signalled = True
            self.on_cut()

    def _reset(self) -> None:
        self._reset_pending = True
        self.on_reset(False)  # soon, for a stream whose next bytes are slow to come

    @property
    def parses_later(self) -> bool:
        """The body's copy is parsed at close, not as it streams (`parse_later`, proxy/inspection.py)."""
        return self.inspector.parses_later

    def parse_pending(self) -> None:
        """Parse now what `parse_later` kept: the caller reads the parsed answer before the exchange completes."""
        self.inspector.parse_pending()

    def close(self, then: Callable[[], None] | None = None, *, wait: bool = True) -> None:
        """The exchange finished: materialise what was parsed (a stream a fault ended or a reset cut
        never reaches its end-of-body call), then call `then`: after any parsing still queued, or
        at once without `wait` (shutdown)."""
        self.framer = None
        self.editor = None
        self.inspector.close(then, wait=wait)


def _raw(item: Sent) -> bytes:
    return item.raw if isinstance(item, StreamEvent) else item
