"""Whole (buffered) bodies: decoded under a cap without holding up the event loop, re-encoded off
it, and parsed the way their content type says (an event stream event by event, else as a document).

A compressed body is never decoded in one call: `decoded` inflates it in slices that yield to
the loop and stops at `limit` decoded bytes, so a small "compression bomb" costs at most the cap
in memory and a few milliseconds at a time. Past the cap, or for corrupt bytes and encodings
brownout cannot decode, the body is not inspected: it passes through untouched.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mitmproxy import http

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import StreamEvent, StreamParser, WireFormat
from brownout.core.wire.decoding import DecodeError, decode_body_capped, encoder_for, single_coding
from brownout.core.wire.framing import framer_for

__all__ = ["OFF_LOOP_ABOVE", "Uninspected", "decoded", "off_loop", "parse", "parse_whole", "set_content"]

# Parsing or editing a whole body costs about a millisecond per 100 KB of JSON, far more for some
# edits: past this size it runs in a worker thread, so other exchanges go on meanwhile.
OFF_LOOP_ABOVE = 256 << 10


@dataclass(frozen=True, slots=True)
class Uninspected:
    """Why a body cannot be inspected: `reason` is one of core.exchange.UNINSPECTED_REASONS."""

    reason: str
    detail: str


async def decoded(message: http.Message, limit: int) -> bytes | Uninspected:
    """The message body with its content-encoding undone, or why it cannot be."""
    raw = message.raw_content or b""
    encoding = message.headers.get("content-encoding", "")
    coding = single_coding(encoding)
    if not raw or coding == "":
        return raw
    try:
        body = await decode_body_capped(raw, encoding, limit)
    except DecodeError as e:
        return Uninspected("undecodable", f"content decoding: {e}")
    except ValueError:
        return Uninspected("undecodable", f"content-encoding {encoding!r} cannot be decoded")
    if body is None:
        return Uninspected("decoded_too_large", f"decodes to over {limit} bytes (proxy.buffer_max_bytes)")
    return body


async def set_content(message: http.Message, body: bytes) -> bool:
    """Replace the body, re-encoded with the message's content-encoding on a worker thread (it can
    take a while for a large body, and zlib, brotli and zstd compress without holding the GIL)."""
    encoding = message.headers.get("content-encoding", "")
    encoder = encoder_for(encoding, (message.raw_content or b"")[:2]) if single_coding(encoding) else None
    if encoder is None:
        message.content = body  # identity (or, as mitmproxy does, an encoding it then drops)
        return True
    raw = await asyncio.to_thread(lambda: encoder.encode(body) + encoder.finish())
    message.raw_content = raw
    if "transfer-encoding" not in message.headers:
        message.headers["content-length"] = str(len(raw))
    return True


def parse(wire: WireFormat, exchange: Exchange, body: bytes, guard: Guard) -> None:
    """Fill the exchange from a whole response body: an SSE/NDJSON body as the stream it is."""
    framer = framer_for(exchange.content_type, None)  # the body is in memory already: no cap needed
    if framer is None:
        guard.call("wire", wire.parse_response, exchange, body, context=f"{wire.provider} response")
        return
    streamed = exchange.streamed  # a stream parser marks the exchange streamed; this one was buffered
    parser = guard.call("wire", wire.stream_parser, exchange, context=f"{wire.provider} stream")
    if parser is None:
        return
    for event in framer.feed(body) + framer.flush():
        if not guard.call("wire", _fed, parser, event, default=False, context=f"{wire.provider} stream event"):
            break  # a parser that raised is done with this body
    guard.call("wire", parser.finish, context="stream end")
    exchange.streamed = streamed


def off_loop(body: bytes) -> bool:
    """Whether work over this whole body belongs in a worker thread rather than on the event loop."""
    return len(body) > OFF_LOOP_ABOVE


async def parse_whole(wire: WireFormat, exchange: Exchange, body: bytes, guard: Guard) -> None:
    """`parse`, in a worker thread when the body is large (the exchange is this flow's alone until it ends)."""
    if off_loop(body):
        await asyncio.to_thread(parse, wire, exchange, body, guard)
    else:
        parse(wire, exchange, body, guard)


def _fed(parser: StreamParser, event: StreamEvent) -> bool:
    parser.feed(event)
    return True
