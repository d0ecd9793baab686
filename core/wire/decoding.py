"""Incremental decoding of content-encoded streams, so a compressed SSE/NDJSON body can be parsed
from a decoded copy while the client receives the original compressed bytes untouched."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable

__all__ = ["stream_decoder"]

log = logging.getLogger(__name__)


def _zlib() -> Callable[[bytes], bytes]:
    # wbits 47 = 32 + 15: accept a gzip or zlib header, which covers what servers send as
    # `gzip` and as `deflate`.
    return zlib.decompressobj(47).decompress


def _brotli() -> Callable[[bytes], bytes]:
    import brotli

    return brotli.Decompressor().process


def _zstd() -> Callable[[bytes], bytes]:
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj().decompress


_DECODERS: dict[str, Callable[[], Callable[[bytes], bytes]]] = {
    "gzip": _zlib,
    "x-gzip": _zlib,
    "deflate": _zlib,
    "br": _brotli,
    "zstd": _zstd,
}


def stream_decoder(content_encoding: str) -> Callable[[bytes], bytes] | None:
    """A chunk -> decoded-bytes function for a single known encoding, else None (identity: none needed)."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
    if len(codings) != 1 or codings[0] not in _DECODERS:
        return None  # stacked or unknown encodings: not parsed, still passed through
    return _DECODERS[codings[0]]()
