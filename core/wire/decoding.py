"""Incremental, bounded content decoding (and re-encoding) of bodies.

A compressed body can inflate a thousandfold (a 1 MB gzip "bomb" holds 1 GB), so nothing here
decodes a body in one call: decoders take input with `feed` and hand out output with
`read(limit)` in slices of at most about `limit` bytes, so a caller can stop at a cap and
spread the work over the event loop. Encoders re-compress an edited stream chunk by chunk,
flushing after each chunk so events keep arriving one by one.

Supported: gzip (and x-gzip), deflate (zlib-wrapped or raw), br, zstd, each alone. Stacked or
unknown encodings get no decoder: such bodies pass through uninspected.
"""

from __future__ import annotations

import asyncio
import zlib
from abc import ABC, abstractmethod
from typing import Any

__all__ = [
    "DecodeError",
    "Decoder",
    "Encoder",
    "decode_body_capped",
    "decoder_for",
    "encoder_for",
    "single_coding",
]

SLICE = 1 << 20  # decoded bytes per slice of whole-body decoding: about 2 ms of inflate


class DecodeError(ValueError):
    """The encoded bytes are corrupt or truncated."""


def single_coding(content_encoding: str) -> str | None:
    """The one content-coding of a header ("" for none or identity); None when stacked."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return ""
    return codings[0] if len(codings) == 1 else None


class Decoder(ABC):
    """Incremental decoder of one content-coding whose output comes in bounded slices."""

    @abstractmethod
    def feed(self, data: bytes) -> None:
        """Queue encoded input."""

    @abstractmethod
    def read(self, limit: int) -> bytes:
        """Up to about `limit` decoded bytes; b"" once everything fed so far is decoded."""

    @property
    @abstractmethod
    def queued(self) -> int:
        """Encoded bytes fed but not decoded yet."""

    @property
    def ended(self) -> bool:
        """The compressed data reached its end marker (a gzip trailer, brotli's last block); a coding
        that cannot tell says True."""
        return True


class _Zlib(Decoder):
    # wbits 47 = 32 + 15: a gzip or a zlib header, which covers what servers send as `gzip`
    # and as `deflate`; a `deflate` body with no header at all (raw deflate) is retried as such.
    def __init__(self, raw_fallback: bool) -> None:
        self._d = zlib.decompressobj(47)
        self._raw_fallback = raw_fallback
        self._started = False
        self._tail = b""
        self._full = False  # the last read stopped at its limit: more output may be waiting

    def feed(self, data: bytes) -> None:
        self._tail += data

    @property
    def queued(self) -> int:
        return len(self._tail)

    @property
    def ended(self) -> bool:
        return bool(self._d.eof)

    def read(self, limit: int) -> bytes:
        if not self._tail and not self._full:
            return b""
        try:
            out = self._d.decompress(self._tail, max(1, limit))
        except zlib.error as e:
            if self._raw_fallback and not self._started:
                self._raw_fallback = False
                self._d = zlib.decompressobj(-15)
                return self.read(limit)
            raise DecodeError(f"{e}") from e
        self._started = True
        self._tail = self._d.unconsumed_tail
        self._full = len(out) >= limit
        if self._d.eof and self._d.unused_data:
            # Concatenated gzip members are one valid body; anything else after the end is junk.
            rest = self._d.unused_data
            if not rest.strip(b"\0"):
                return out  # zero padding after the end, as some servers send: ignored
            if rest[:2] != b"\x1f\x8b":
                raise DecodeError(f"{len(rest)} bytes after the end of the compressed data")
            self._d = zlib.decompressobj(47)
            self._tail = rest + self._tail
        return out


class _Brotli(Decoder):
    def __init__(self) -> None:
        import brotli

        self._brotli = brotli
        self._d = brotli.Decompressor()
        self._in = bytearray()

    def feed(self, data: bytes) -> None:
        self._in += data

    @property
    def queued(self) -> int:
        return len(self._in)

    @property
    def ended(self) -> bool:
        return bool(self._d.is_finished())

    def read(self, limit: int) -> bytes:
        try:
            if self._in and self._d.can_accept_more_data():
                data = bytes(self._in)
                self._in.clear()
                return bytes(self._d.process(data, output_buffer_limit=max(1, limit)))
            if self._d.is_finished():
                if self._in:
                    raise DecodeError(f"{len(self._in)} bytes after the end of the brotli stream")
                return b""
            # Output can wait inside the decoder even when it would take input: drain it first.
            return bytes(self._d.process(b"", output_buffer_limit=max(1, limit)))
        except self._brotli.error as e:
            raise DecodeError(f"brotli: {e}") from e


class _Zstd(Decoder):
    # zstandard's decompressobj has no output limit: feeding it small input slices bounds the
    # output of each call instead (a 32-byte slice inflates to at most about 1 MB). Reading across
    # frames, it never says a frame ended: `ended` stays True (a truncated zstd body passes as decoded).
    _PIECE = 32

    def __init__(self) -> None:
        import zstandard

        self._zstd = zstandard
        self._d = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        self._in = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._in[: self._pos]
            self._pos = 0
        self._in += data

    @property
    def queued(self) -> int:
        return len(self._in) - self._pos

    def read(self, limit: int) -> bytes:
        out = bytearray()
        try:
            while self._pos < len(self._in) and len(out) < limit:
                piece = bytes(self._in[self._pos : self._pos + self._PIECE])
                self._pos += len(piece)
                out += self._d.decompress(piece)
        except self._zstd.ZstdError as e:
            raise DecodeError(f"zstd: {e}") from e
        return bytes(out)


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for a single known content-coding, else None (identity, stacked or unknown)."""
    coding = single_coding(content_encoding)
    if coding in ("gzip", "x-gzip"):
        return _Zlib(raw_fallback=False)
    if coding == "deflate":
        return _Zlib(raw_fallback=True)
    if coding == "br":
        return _Brotli()
    if coding == "zstd":
        return _Zstd()
    return None


async def decode_body_capped(data: bytes, content_encoding: str, limit: int) -> bytes | None:
    """A whole body decoded in slices that yield to the event loop; None when it decodes to more
    than `limit` bytes (decoding stops there). Raises DecodeError for corrupt bytes or a body cut
    before its end marker, and ValueError for an encoding without a decoder."""
    decoder = decoder_for(content_encoding)
    if decoder is None:
        raise ValueError(f"no decoder for content-encoding {content_encoding!r}")
    if not data:
        return b""  # an empty body under a content-encoding header (a 204, a HEAD): nothing to decode
    decoder.feed(data)
    out = bytearray()
    while piece := decoder.read(min(SLICE, limit + 1 - len(out))):
        out += piece
        if len(out) > limit:
            return None
        await asyncio.sleep(0)  # other flows run between slices
    if not decoder.ended:
        raise DecodeError(f"truncated: the {single_coding(content_encoding)} data ends before its end marker")
    return bytes(out)


class Encoder:
    """Re-compresses a stream chunk by chunk; every chunk is flushed so the client can decode it at once."""

    def __init__(self, compress: Any, flush: Any, finish: Any) -> None:
        self._compress = compress
        self._flush = flush
        self._finish = finish
        self.finished = False

    def encode(self, data: bytes) -> bytes:
        """`data` compressed and flushed (b"" for no data)."""
        if not data or self.finished:
            return b""
        return self._compress(data) + self._flush()

    def finish(self) -> bytes:
        """The end of the compressed stream (gzip trailer, last block); once."""
        if self.finished:
            return b""
        self.finished = True
        return self._finish()


def encoder_for(content_encoding: str, first_bytes: bytes = b"") -> Encoder | None:
    """An encoder producing the same content-coding; `first_bytes` of the original body tell
    the deflate variants apart (zlib-wrapped or raw)."""
    coding = single_coding(content_encoding)
    if coding in ("gzip", "x-gzip", "deflate"):
        raw_deflate = coding == "deflate" and first_bytes[:1] not in (b"", b"\x78")
        wbits = 31 if coding != "deflate" else (-15 if raw_deflate else 15)
        z = zlib.compressobj(6, zlib.DEFLATED, wbits)
        return Encoder(z.compress, lambda: z.flush(zlib.Z_SYNC_FLUSH), z.flush)
    if coding == "br":
        import brotli

        b = brotli.Compressor(quality=4)
        return Encoder(b.process, b.flush, b.finish)
    if coding == "zstd":
        import zstandard

        c = zstandard.ZstdCompressor(level=3).compressobj()
        return Encoder(
            c.compress,
            lambda: c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
            lambda: c.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH),
        )
    return None
