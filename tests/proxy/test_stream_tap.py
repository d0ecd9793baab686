"""The stream callable on its own: what reaches the client and what the exchange records, at the edges."""

from __future__ import annotations

import gzip
import zlib

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire import by_provider
from brownout.core.wire.base import StreamEvent
from brownout.core.wire.framing import SSEFramer
from brownout.faults.base import CLOSE, StreamEditor
from brownout.proxy.streaming import StreamTap

EVENTS = [b'data: {"n": %d}\n\n' % i for i in range(5)]


class Upper(StreamEditor):
    """Upper-cases event 1; ends the stream after `stop` events."""

    def __init__(self, stop: int | None = None) -> None:
        self.n, self.stop = 0, stop

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        self.n += 1
        if self.stop is not None and self.n > self.stop:
            return CLOSE
        return [event.raw.upper()] if self.n == 2 else [event.raw]


class Recorder:
    def __init__(self) -> None:
        self.skipped: list[str] = []
        self.cuts = 0


def tap(editor: StreamEditor | None, encoding: str = "", **kw: object) -> tuple[StreamTap, Exchange, Recorder]:
    ex = Exchange(id="1", session="s", provider="openai", content_type="text/event-stream", stream=True)
    rec = Recorder()
    t = StreamTap(
        ex,
        by_provider("openai"),
        SSEFramer(),
        editor,
        None,
        Guard(),
        on_reset=lambda now: None,
        on_cut=lambda: setattr(rec, "cuts", rec.cuts + 1),
        on_skip=rec.skipped.append,
        content_encoding=encoding,
        **kw,  # type: ignore[arg-type]
    )
    return t, ex, rec


def run(t: StreamTap, chunks: list[bytes]) -> bytes:
    out = b"".join(b"".join([r] if isinstance(r, bytes) else r) for r in (t(c) for c in [*chunks, b""]))
    t.close()
    return out


def test_gzip_stream_is_transcoded_with_the_edit_and_a_proper_end() -> None:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    chunks = [z.compress(e) + z.flush(zlib.Z_SYNC_FLUSH) for e in EVENTS] + [z.flush()]
    t, ex, rec = tap(Upper(), "gzip")
    body = gzip.decompress(run(t, chunks))
    assert body == EVENTS[0] + EVENTS[1].upper() + b"".join(EVENTS[2:])
    assert ex.stream_events == 5 and rec.skipped == [] and rec.cuts == 0


def test_a_cut_finishes_the_gzip_stream_and_ends_the_read_once() -> None:
    t, ex, rec = tap(Upper(stop=3), "gzip")
    out = run(t, [gzip.compress(b"".join(EVENTS), mtime=0)])
    assert gzip.decompress(out) == EVENTS[0] + EVENTS[1].upper() + EVENTS[2]
    assert rec.cuts == 1 and ex.stream_events == 3 and ex.stream_complete is False


def test_corrupt_gzip_under_an_editor_passes_through_byte_for_byte() -> None:
    good = gzip.compress(b"".join(EVENTS), mtime=0)
    bad = good[:10] + bytes(b ^ 0x5A for b in good[10:])
    t, ex, rec = tap(Upper(), "gzip")
    assert run(t, [bad[:7], bad[7:30], bad[30:]]) == bad
    assert ex.uninspected == "undecodable" and ex.parse_error and rec.skipped  # the fault did nothing


def test_an_empty_compressed_body_stays_empty() -> None:
    t, _, _ = tap(Upper(), "gzip")
    assert run(t, []) == b""


def test_past_the_decoded_cap_the_editor_gives_up_and_bytes_stay_whole() -> None:
    plain = b"".join(EVENTS) * 2000
    t, ex, rec = tap(Upper(stop=None), "gzip", decoded_max=1000)
    out = gzip.decompress(run(t, [gzip.compress(plain, mtime=0)]))
    assert out == plain  # the cap came before the editor changed anything: content untouched
    assert ex.uninspected == "decoded_too_large" and len(rec.skipped) == 1 and ex.stream_complete is None


def test_an_event_too_large_stops_editing_and_flushes_what_was_held() -> None:
    big = b"data: " + b"x" * 5000
    framer = SSEFramer(max_pending=1000)
    ex = Exchange(id="1", session="s", provider="openai", content_type="text/event-stream", stream=True)
    skipped: list[str] = []
    t = StreamTap(
        ex, by_provider("openai"), framer, Upper(), None, Guard(), on_reset=lambda now: None, on_skip=skipped.append
    )
    out = run(t, [EVENTS[0], big[:3000], big[3000:], b"\n\n" + EVENTS[1]])
    assert out == EVENTS[0] + big + b"\n\n" + EVENTS[1]
    assert ex.uninspected == "event_too_large" and len(skipped) == 1
