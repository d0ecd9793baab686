"""Bounded, incremental content decoding and per-chunk re-encoding (gzip, deflate, br, zstd)."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import brotli
import pytest
import zstandard

from brownout.core.wire.decoding import DecodeError, decode_body_capped, decoder_for, encoder_for, single_coding

PLAIN = b"".join(b'data: {"n": %d, "text": "some words"}\n\n' % i for i in range(5000))
ENCODE = {
    "gzip": lambda b: gzip.compress(b, mtime=0),
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}


def decode_all(coding: str, data: bytes, piece: int = 997, limit: int = 4096) -> bytes:
    decoder = decoder_for(coding)
    assert decoder is not None
    out = bytearray()
    for i in range(0, len(data), piece):
        decoder.feed(data[i : i + piece])
        while chunk := decoder.read(limit):
            out += chunk
    return bytes(out)


@pytest.mark.parametrize("coding", list(ENCODE))
def test_every_coding_decodes_in_any_pieces(coding: str) -> None:
    assert decode_all(coding, ENCODE[coding](PLAIN)) == PLAIN


def test_codings_a_decoder_exists_for() -> None:
    assert single_coding("") == "" and single_coding("identity") == ""
    assert single_coding("GZIP") == "gzip" and single_coding("gzip, br") is None
    assert decoder_for("") is None and decoder_for("gzip, br") is None and decoder_for("compress") is None


@pytest.mark.parametrize("coding", list(ENCODE))
def test_a_bomb_comes_out_in_bounded_slices(coding: str) -> None:
    bomb = ENCODE[coding](b"\0" * (64 << 20))
    decoder = decoder_for(coding)
    assert decoder is not None
    decoder.feed(bomb)
    first = decoder.read(1 << 20)
    assert 0 < len(first) <= 2 << 20  # about the limit, never the 64 MB the input holds


@pytest.mark.parametrize("coding", list(ENCODE))
def test_decode_body_capped_stops_at_the_cap(coding: str) -> None:
    bomb = ENCODE[coding](b"\0" * (64 << 20))
    assert asyncio.run(decode_body_capped(bomb, coding, 4 << 20)) is None
    assert asyncio.run(decode_body_capped(ENCODE[coding](PLAIN), coding, len(PLAIN))) == PLAIN


def test_corrupt_bytes_raise_decode_error() -> None:
    good = gzip.compress(PLAIN, mtime=0)
    bad = good[:12] + bytes(b ^ 0x5A for b in good[12:200])
    with pytest.raises(DecodeError):
        decode_all("gzip", bad)
    with pytest.raises(DecodeError):
        decode_all("gzip", good + b"junk after the end")
    with pytest.raises(ValueError):
        asyncio.run(decode_body_capped(good, "compress", 1 << 20))


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_body_cut_before_its_end_is_corrupt_not_decoded(coding: str) -> None:
    whole = ENCODE[coding](PLAIN)
    with pytest.raises(DecodeError, match="truncated"):
        asyncio.run(decode_body_capped(whole[: len(whole) - 8], coding, len(PLAIN)))
    assert asyncio.run(decode_body_capped(b"", coding, 10)) == b""  # a 204 or HEAD under the header


def test_gzip_members_zero_padding_and_raw_deflate() -> None:
    two = gzip.compress(b"one ", mtime=0) + gzip.compress(b"two", mtime=0)
    assert decode_all("gzip", two + b"\0" * 8) == b"one two"
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw_body = raw.compress(PLAIN) + raw.flush()
    assert decode_all("deflate", raw_body) == PLAIN
    assert asyncio.run(decode_body_capped(raw_body, "deflate", len(PLAIN))) == PLAIN  # ends, raw as it is
    assert asyncio.run(decode_body_capped(two + b"\0" * 8, "gzip", 100)) == b"one two"


@pytest.mark.parametrize("coding", list(ENCODE))
def test_reencoded_chunks_decode_as_they_arrive(coding: str) -> None:
    encoder = encoder_for(coding)
    decoder = decoder_for(coding)
    assert encoder is not None and decoder is not None
    for i in range(3):
        chunk = b"data: event %d\n\n" % i
        decoder.feed(encoder.encode(chunk))
        assert decoder.read(1 << 20) == chunk  # flushed: nothing waits for the next chunk
    decoder.feed(encoder.finish())
    assert decoder.read(1 << 20) == b"" and encoder.finish() == b""


@pytest.mark.parametrize("coding", list(ENCODE))
def test_a_finished_reencoded_stream_is_a_valid_body(coding: str) -> None:
    encoder = encoder_for(coding, ENCODE[coding](b"x")[:2])
    assert encoder is not None
    body = encoder.encode(PLAIN[:1000]) + encoder.encode(PLAIN[1000:2000]) + encoder.finish()
    decoded = {
        "gzip": gzip.decompress,
        "deflate": zlib.decompress,
        "br": brotli.decompress,
        "zstd": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b),
    }[coding](body)
    assert decoded == PLAIN[:2000]
