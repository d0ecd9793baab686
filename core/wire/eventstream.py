"""AWS event streams (`application/vnd.amazon.eventstream`): a sans-I/O codec of their binary messages.

One message on the wire::

    total length (u32 BE) | headers length (u32 BE) | prelude CRC32 (of the 8 bytes before it)
    headers: name length (u8), name (UTF-8), value type (u8), value
    payload
    message CRC32 (of every byte before it)

Header value types: 0 true, 1 false (no value), 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes and
7 string (each with a u16 length), 8 timestamp (int64 milliseconds), 9 UUID (16 bytes).

`Decoder` is fed chunks of any size and hands out whole messages, keeping a partial one until the
rest arrives (botocore's `EventStreamBuffer` works the same way); `encode` writes a message with both
CRCs, and `replace_payload` re-encodes one with a new payload and its header bytes untouched. Small
and hand-written rather than botocore's: brownout's runtime does not depend on botocore, and the
tests check every message against botocore's own decoder, both ways.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brownout.core.wire.base import StreamEvent

__all__ = [
    "MAX_HEADERS_LENGTH",
    "MAX_PAYLOAD_LENGTH",
    "PRELUDE_LENGTH",
    "Decoder",
    "EventStreamEvent",
    "FrameError",
    "HeaderValue",
    "Message",
    "decode_headers",
    "encode",
    "encode_headers",
    "event_of",
    "frame_length",
    "replace_payload",
]

PRELUDE_LENGTH = 12
MAX_HEADERS_LENGTH = 128 * 1024  # botocore's limits: a larger message is refused, never buffered
MAX_PAYLOAD_LENGTH = 24 * 1024 * 1024
_MIN_LENGTH = PRELUDE_LENGTH + 4

HeaderValue = bool | int | bytes | str

_U32 = struct.Struct(">I")
_PRELUDE = struct.Struct(">II")
_INTS: dict[int, struct.Struct] = {2: struct.Struct(">b"), 3: struct.Struct(">h"), 4: struct.Struct(">i"),
                                   5: struct.Struct(">q"), 8: struct.Struct(">q")}  # fmt: skip


_PAYLOAD_PART = re.compile(rb'\s*\{\s*"bytes"\s*:')


class FrameError(ValueError):
    """Bytes that are no event-stream message: a bad CRC, an impossible length, a bad header."""


@dataclass(slots=True, frozen=True)
class Message:
    """One decoded message and the exact bytes it occupied."""

    headers: dict[str, HeaderValue]
    payload: bytes
    raw: bytes


def _crc(data: bytes | memoryview, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def frame_length(prelude: bytes | bytearray | memoryview) -> int:
    """The total length of the message whose 12-byte prelude this is; FrameError when it is invalid."""
    total, headers_len = _PRELUDE.unpack_from(prelude)
    (crc,) = _U32.unpack_from(prelude, 8)
    if _crc(memoryview(prelude)[:8]) != crc:
        raise FrameError("prelude CRC mismatch")
    if total < _MIN_LENGTH or headers_len > total - _MIN_LENGTH:
        raise FrameError(f"impossible lengths: total {total}, headers {headers_len}")
    if headers_len > MAX_HEADERS_LENGTH or total - headers_len - _MIN_LENGTH > MAX_PAYLOAD_LENGTH:
        raise FrameError(f"message of {total} bytes exceeds the event-stream limits")
    return total


def _encode_value(value: HeaderValue) -> bytes:
    if isinstance(value, bool):
        return bytes([0 if value else 1])
    if isinstance(value, int):
        kind = 4 if -(2**31) <= value < 2**31 else 5
        return bytes([kind]) + _INTS[kind].pack(value)
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(data) > 0xFFFF:
        raise ValueError(f"header value of {len(data)} bytes is longer than 65535")
    return bytes([7 if isinstance(value, str) else 6]) + struct.pack(">H", len(data)) + data


def encode_headers(headers: Mapping[str, HeaderValue]) -> bytes:
    """The header block: str as string (7), bytes as byte array (6), bool, int as int32 or int64."""
    out = bytearray()
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        if not 0 < len(raw_name) < 256:
            raise ValueError(f"header name {name!r} must be 1 to 255 bytes")
        out += bytes([len(raw_name)]) + raw_name + _encode_value(value)
    return bytes(out)


def _frame(header_block: bytes, payload: bytes) -> bytes:
    total = _MIN_LENGTH + len(header_block) + len(payload)
    prelude = _PRELUDE.pack(total, len(header_block))
    head = prelude + _U32.pack(_crc(prelude)) + header_block + payload
    return head + _U32.pack(_crc(head))


def encode(headers: Mapping[str, HeaderValue], payload: bytes) -> bytes:
    """One message, both CRCs written."""
    return _frame(encode_headers(headers), payload)


def replace_payload(raw: bytes, payload: bytes) -> bytes:
    """The message `raw` with another payload: its header bytes kept as they were, the CRCs recomputed."""
    (headers_len,) = _U32.unpack_from(raw, 4)
    return _frame(raw[PRELUDE_LENGTH : PRELUDE_LENGTH + headers_len], payload)


def decode_headers(block: bytes | memoryview) -> dict[str, HeaderValue]:
    """The headers of a header block; FrameError for a malformed one."""
    data = memoryview(block)
    out: dict[str, HeaderValue] = {}
    i = 0
    try:
        while i < len(data):
            n = data[i]
            name = bytes(data[i + 1 : i + 1 + n]).decode("utf-8")
            i += 1 + n
            kind = data[i]
            i += 1
            value: HeaderValue
            if kind in (0, 1):
                value = kind == 0
            elif kind in _INTS:
                (value,) = _INTS[kind].unpack_from(data, i)
                i += _INTS[kind].size
            elif kind in (6, 7):
                (size,) = struct.unpack_from(">H", data, i)
                chunk = bytes(data[i + 2 : i + 2 + size])
                if len(chunk) != size:
                    raise FrameError("header value runs past the header block")
                value = chunk.decode("utf-8") if kind == 7 else chunk
                i += 2 + size
            elif kind == 9:
                value = bytes(data[i : i + 16])
                i += 16
            else:
                raise FrameError(f"unknown header value type {kind}")
            if name in out:
                raise FrameError(f"duplicate header {name!r}")
            out[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise FrameError(f"malformed headers: {e}") from e
    if i != len(data):
        raise FrameError("header value runs past the header block")
    return out


def _decode_frame(raw: bytes) -> Message:
    (headers_len,) = _U32.unpack_from(raw, 4)
    (crc,) = _U32.unpack_from(raw, len(raw) - 4)
    if _crc(memoryview(raw)[:-4]) != crc:
        raise FrameError("message CRC mismatch")
    end = PRELUDE_LENGTH + headers_len
    return Message(decode_headers(memoryview(raw)[PRELUDE_LENGTH:end]), raw[end:-4], raw)


class Decoder:
    """Fed bytes in chunks of any size, hands out whole messages in order; a partial one waits."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need = 0  # total length of the message at the head of the buffer, once its prelude is in

    @property
    def pending(self) -> int:
        """Bytes of an unfinished message."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Message]:
        """The messages completed by `data`; FrameError for bytes that are no message (the decoder is
        then unusable: an event stream has no way to find the next message after a corrupt one)."""
        self._buf += data
        out: list[Message] = []
        start = 0
        buf = self._buf
        while True:
            if not self._need:
                if len(buf) - start < PRELUDE_LENGTH:
                    break
                self._need = frame_length(bytes(buf[start : start + PRELUDE_LENGTH]))
            if len(buf) - start < self._need:
                break
            out.append(_decode_frame(bytes(buf[start : start + self._need])))
            start += self._need
            self._need = 0
        if start:
            del buf[:start]
        return out


@dataclass(slots=True)
class EventStreamEvent(StreamEvent):
    """One event-stream message as the stream tap sees it: `data` is the JSON document it carries.

    That is its payload, except for a payload part (`{"bytes": <base64>, ...}`, as Bedrock's
    InvokeModelWithResponseStream sends the model's own events): then `data` is the decoded `bytes`
    and `envelope` the outer document, so an edit of `data` is wrapped the same way again. `event` is
    the `:event-type` (`:exception-type` of an exception, `:error-code` of an error). `problem` says
    why bytes are no valid message (they pass on as they are, carrying no data).
    """

    headers: dict[str, HeaderValue] = field(default_factory=dict)
    envelope: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def message_type(self) -> str | None:
        """`event`, `exception` or `error`; None for bytes that are no message."""
        kind = self.headers.get(":message-type")
        return kind if isinstance(kind, str) else None

    def with_data(self, data: str) -> bytes:
        """This message's bytes carrying `data` instead: headers kept, wrapped as before, CRCs recomputed."""
        payload = data.encode("utf-8")
        if self.envelope is not None:
            outer = dict(self.envelope)
            outer["bytes"] = base64.b64encode(payload).decode("ascii")
            payload = json.dumps(outer, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return replace_payload(self.raw, payload)


def event_of(message: Message) -> EventStreamEvent:
    """The tap's view of a decoded message (see EventStreamEvent)."""
    headers = message.headers
    kind = headers.get(":message-type")
    name = headers.get(
        ":exception-type" if kind == "exception" else ":error-code" if kind == "error" else ":event-type"
    )
    text = message.payload.decode("utf-8", "replace")
    envelope = None
    if _PAYLOAD_PART.match(message.payload):
        try:
            outer = json.loads(text)
            inner = base64.b64decode(outer["bytes"], validate=True).decode("utf-8")
        except (ValueError, TypeError, KeyError, RecursionError):
            pass  # not a payload part after all: its data is the payload itself
        else:
            if isinstance(outer, dict):
                text, envelope = inner, outer
    if kind == "error" and not text:
        # An error message carries its code and text in headers, usually with no payload.
        text = json.dumps({"message": headers.get(":error-message", "")})
    return EventStreamEvent(
        raw=message.raw, data=text, event=name if isinstance(name, str) else None, headers=headers, envelope=envelope
    )
