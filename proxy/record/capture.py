"""Capture one exchange for a cassette, hook by hook, from what the upstream sent, before any fault acts.

The request is taken in the `request` hook (before a relay re-routes it), the response head at the start
of `responseheaders` (before header faults), a buffered body at the start of `response` (before body
faults), and a streamed body chunk by chunk in front of the stream tap (before stream faults).
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable

from mitmproxy import http

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.secret_paths import redact_url
from brownout.core.secrets import SecretHeaders
from brownout.core.wire.decoding import DecodeError, Decoder, decoder_for
from brownout.core.wire.framing import Framer, framer_for
from brownout.proxy.record.cassette import EVENT_OVERHEAD, Event, Recorded, WsClose, WsMessage

__all__ = ["Capture", "RecordingTap", "mitm_headers"]

log = logging.getLogger(__name__)

# Never written: brownout's own routing headers (and credentials: the proxy's SecretHeaders).
_DROPPED = frozenset({"x-brownout-relay", "x-brownout-replay"})
# Framing headers describe the bytes on the wire, not the body kept; replay frames its own.
_FRAMING = frozenset({"content-length", "transfer-encoding", "content-encoding"})
_FRAME_SLICE = 1 << 16  # decoded bytes framed at a time: a chunk of tiny events never becomes a huge list
# Dropped from a body kept as sent (not decoded): its content-encoding still describes it.
_WIRE_FRAMING = frozenset({"content-length", "transfer-encoding"})


def mitm_headers(pairs: list[tuple[str, str]]) -> http.Headers:
    """Recorded header pairs as mitmproxy headers (order and repeats kept)."""
    return http.Headers([(k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in pairs])


def _headers(headers: http.Headers, drop: frozenset[str], secret: SecretHeaders) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items(multi=True) if k.lower() not in drop and k not in secret]


class Capture:
    """One exchange being recorded; `recorded()` gives the cassette line once it is done."""

    def __init__(
        self, flow: http.HTTPFlow, session: str, max_body_bytes: int, body: bytes | None, secret: SecretHeaders
    ) -> None:
        """`body`: the request body the proxy decoded under its cap; None when it did not (too large
        once decoded, or undecodable), and then the bytes are kept as sent, with their content-encoding.
        `secret`: the header names never written (both ways)."""
        req = flow.request
        self.secret = secret
        self.max_body = max_body_bytes
        self.t0 = time.time()
        if body is not None:
            drop = _DROPPED | _FRAMING
        else:
            body, drop = req.raw_content or b"", _DROPPED | _WIRE_FRAMING
        self.rec = Recorded(
            session=session,
            seq=0,
            method=req.method,
            url=redact_url(req.pretty_url),
            request_headers=_headers(req.headers, drop, secret),
            request_body=body[:max_body_bytes],
            recorded_at=self.t0,
        )
        self.rec.truncated = len(body) > max_body_bytes
        self._size = 0
        self._framer: Framer | None = None
        self._decode: Decoder | None = None
        self._raw_chunks = False
        self._sent_headers: list[tuple[str, str]] = []
        self.ended = False  # the streamed body reached its end as upstream sent it
        self.unrecordable: str | None = None  # why this exchange must not be written (its body is not upstream's)
        # Upstream's own clock, when the relay reports it (a fault holds the answer back on its way to
        # the client): the body bytes delivered so far and when, and when upstream ended the body.
        self._upstream_bytes: list[int] = []
        self._upstream_at: list[float] = []
        self._upstream_end: float | None = None
        self._seen = 0  # body bytes this capture was fed

    def response_head(self, flow: http.HTTPFlow) -> None:
        resp = flow.response
        assert resp is not None
        rec = self.rec
        rec.status, rec.reason, rec.http_version = resp.status_code, resp.reason, resp.http_version
        rec.headers_s = max(0.0, (resp.timestamp_start or time.time()) - self.t0)
        encoding = resp.headers.get("content-encoding", "").strip().lower()
        if encoding and encoding != "identity":
            # Kept decoded (readable, diffable); a body brownout cannot decode is kept as sent.
            self._decode = decoder_for(encoding)
            self._raw_chunks = self._decode is None
        # Both ways: a buffered body the proxy did not decode is kept as sent, with its content-encoding.
        self._sent_headers = _headers(resp.headers, _DROPPED | _WIRE_FRAMING, self.secret)
        rec.response_headers = (
            self._sent_headers if self._raw_chunks else _headers(resp.headers, _DROPPED | _FRAMING, self.secret)
        )
        if encoding and not self._raw_chunks:
            rec.decoded = encoding

    def start_stream(self, content_type: str) -> None:
        self.rec.events = []
        self._framer = None if self._raw_chunks else framer_for(content_type)

    def upstream(self, data: bytes) -> None:
        """The relay's word that upstream just delivered `data` (b"": the end of the body)."""
        now = time.time()
        if not data:
            self._upstream_end = now
            return
        total = (self._upstream_bytes[-1] if self._upstream_bytes else 0) + len(data)
        self._upstream_bytes.append(total)
        self._upstream_at.append(now)

    def _arrived(self, n: int) -> float:
        """When the next `n` body bytes fed here left upstream: by upstream's clock when the relay keeps
        one (pacing and first-byte delays are brownout's, not upstream's), else now."""
        self._seen += n
        if n == 0 and self._upstream_end is not None:
            return self._upstream_end
        return self._left_upstream(self._seen)

    def _left_upstream(self, offset: int) -> float:
        """When upstream delivered the body's byte at `offset` (counted from 1), or now without its clock."""
        i = bisect_left(self._upstream_bytes, offset)
        return self._upstream_at[i] if i < len(self._upstream_at) else time.time()

    def feed(self, data: bytes) -> None:
        """A streamed chunk as upstream sent it; b"" ends the body."""
        events = self.rec.events
        assert events is not None
        if not data:
            self.ended = True
        if self.rec.truncated:  # nothing more is kept: neither decoded nor framed
            self._decode = self._framer = None
            return
        before = self._seen
        t = self._arrived(len(data)) - self.t0
        if not data:
            if self._framer is not None and (tail := self._framer.pending()):
                self._add(events, t, tail)  # the raw tail, whitespace included: kept byte for byte
            return
        if self._decode is not None:
            try:
                data = self._decoded(data)
            except DecodeError as e:  # a corrupt body: record what decoded and say so
                self.rec.error = self.rec.error or f"content decoding: {e}"
                self._decode, self._framer = None, None
                self.rec.truncated = True
                return
            if not data:
                return
            if self._framer is not None and len(data) > _FRAME_SLICE:
                # A chunk that inflates this far (a bomb, or a burst) would be framed event by event
                # in this one call, holding up every other flow: from here on the stream is kept as
                # decoded chunks (same bytes, same timing; `cassette inspect` frames them again).
                data, self._framer = self._framer.take_pending() + data, None
        if self._framer is None:
            self._add(events, t, data)
            return
        # Undecoded, each event is timed by its own last byte: one chunk may hold events upstream sent
        # apart (the relay holds them, and the proxy passes what one read brings as one chunk).
        end = None if self._decode is not None or not self._upstream_at else before - self._framer.pending_size
        for i in range(0, len(data), _FRAME_SLICE):  # a bounded list of events at a time
            for ev in self._framer.feed(data[i : i + _FRAME_SLICE]):
                if end is not None:
                    end += len(ev.raw)
                    t = self._left_upstream(end) - self.t0
                self._add(events, t, ev.raw)
            if self.rec.truncated or self._framer.pending_size > self.max_body - self._size:
                # Kept cut; an event longer than what is left to keep is never buffered whole.
                self.rec.truncated = True
                self._decode = self._framer = None
                return

    def _decoded(self, data: bytes) -> bytes:
        """A chunk decoded in bounded slices, never past what the cassette keeps (a bomb stops there)."""
        assert self._decode is not None
        self._decode.feed(data)
        out = bytearray()
        while piece := self._decode.read(1 << 20):
            out += piece
            if self._size + len(out) > self.max_body:
                self._decode = self._framer = None  # the rest is not kept: no need to inflate it
                break
        return bytes(out)

    def _add(self, events: list[Event], t: float, data: bytes) -> None:
        if self.rec.truncated:
            return
        cost = len(data) + EVENT_OVERHEAD  # many tiny events cost far more than their bytes
        if self._size + cost > self.max_body:
            self.rec.truncated = True
            return
        self._size += cost
        events.append(Event(t, data))

    def body(self, flow: http.HTTPFlow, decoded: bytes | None) -> None:
        """A buffered response body as the proxy decoded it under its cap; None when it did not (too
        large once decoded, or undecodable): then it is kept as sent, with its content-encoding."""
        resp = flow.response
        assert resp is not None
        body = decoded
        if body is None:
            body = resp.raw_content or b""
            self.rec.response_headers, self.rec.decoded = self._sent_headers, None
        self.rec.truncated = self.rec.truncated or len(body) > self.max_body
        self.rec.body = body[: self.max_body]

    def ws_message(self, from_client: bool, content: bytes, is_text: bool) -> None:
        """One message of a WebSocket session as its sender sent it (before any fault)."""
        messages = self.rec.messages
        if messages is None:
            messages = self.rec.messages = []
        cost = len(content) + EVENT_OVERHEAD
        if self.rec.truncated or self._size + cost > self.max_body:
            self.rec.truncated = True  # kept cut: replay then ends where the recording does
            return
        self._size += cost
        messages.append(WsMessage(time.time() - self.t0, from_client, content, binary=not is_text))

    def ws_close(self, code: int | None, reason: str, by: str | None) -> None:
        if self.rec.messages is None:
            self.rec.messages = []
        self.rec.close = WsClose(code, reason[:123], by)

    def failed(self, message: str) -> None:
        self.rec.error = self.rec.error or message

    def recorded(self, exchange: Exchange, end: float | None) -> Recorded:
        rec = self.rec
        if self._upstream_end is not None:
            end = self._upstream_end
        rec.end_s = max(rec.headers_s, (end or time.time()) - self.t0)
        rec.provider, rec.operation, rec.model = exchange.provider, exchange.operation, exchange.model
        if rec.status is not None and rec.events is None and rec.body is None:
            rec.body = b""
        return rec


class RecordingTap:
    """Sits in front of a stream callable: records each chunk as upstream sent it, then hands it on."""

    def __init__(self, capture: Capture, inner: Callable[[bytes], bytes | list[bytes]], guard: Guard) -> None:
        self.capture = capture
        self.inner = inner
        self.guard = guard
        self.failed = False

    def __call__(self, data: bytes) -> bytes | list[bytes]:
        if not self.failed:
            # A recording bug must never cost the agent its stream: contained, and the recording marked cut.
            self.failed = not self.guard.call("record", self._feed, data, default=False, context="stream")
            if self.failed:
                self.capture.rec.truncated = True
        return self.inner(data)

    def _feed(self, data: bytes) -> bool:
        self.capture.feed(data)
        return True
