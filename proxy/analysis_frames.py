"""The frames between the proxy and its analysis process: a length, a kind byte, then the message.

Both ends are the same brownout on the same Python (the proxy starts the process with its own
interpreter). A finished exchange, sent once per exchange, goes as the values of its fields in
`marshal`'s format (kind "M"); everything else, and an exchange whose notes marshal cannot write, is
a pickled tuple whose first item says what it is (kind "P"; see proxy/analysis.py and
proxy/analysis_worker.py). An exchange arrives as the message ("x", exchange) either way.

Why marshal, written by hand rather than pickle: the exchange is encoded on the proxy's event loop,
while the agent waits for its next answer. For a 6 KB streamed tool-call exchange pickle took 21 us
to write and 34 us to read back; its field values through marshal take 9 and 16 us (timeit, side by
side, 2-core VM). marshal's format is only read back by the same Python, which is the case here.
"""

from __future__ import annotations

import dataclasses
import marshal
import operator
import pickle
import struct
from collections.abc import Callable
from typing import Any

from brownout.core import exchange as model
from brownout.core.exchange import Exchange

__all__ = ["Frames", "exchange_frame", "frame", "portable"]

_HEAD = struct.Struct("!Ic")  # payload length, kind
MAX_FRAME = 1 << 30  # a frame claiming more is a broken stream, not a message

_FIELDS = [f.name for f in dataclasses.fields(Exchange)]
# The exchange's fields that hold the model's own dataclasses: one of them, or a list of them.
_ONE = {"usage": model.Usage, "cost": model.Cost, "timings": model.Timings, "realtime": model.RealtimeInfo}
_MANY = {
    "tools_declared": model.ToolSpec,
    "tool_results": model.ToolResult,
    "messages": model.Message,
    "tool_calls": model.ToolCall,
    "faults": model.FaultRecord,
    "faults_skipped": model.FaultRecord,
}


def _values(cls: type[Any]) -> Callable[[Any], tuple[Any, ...]]:
    if not all(f.init for f in dataclasses.fields(cls)):
        raise TypeError(f"{cls.__name__} has a field its __init__ does not take")
    return operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))


_EXCHANGE = _values(Exchange)
_ONE_AT = [(_FIELDS.index(name), cls, _values(cls)) for name, cls in _ONE.items()]
_MANY_AT = [(_FIELDS.index(name), cls, _values(cls)) for name, cls in _MANY.items()]


def frame(message: tuple[Any, ...]) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(payload), b"P") + payload


def exchange_frame(exchange: Exchange) -> bytes:
    """The message ("x", exchange); ValueError when a value (a note, a fault's parameter) is not one
    marshal writes: send `frame(("x", portable(exchange)))` then."""
    values = list(_EXCHANGE(exchange))
    for at, _, get in _ONE_AT:
        if values[at] is not None:
            values[at] = get(values[at])
    for at, _, get in _MANY_AT:
        if values[at]:
            values[at] = [get(item) for item in values[at]]
    payload = marshal.dumps(values)
    return _HEAD.pack(len(payload), b"M") + payload


def _exchange(payload: bytes) -> Exchange:
    values = marshal.loads(payload)
    for at, cls, _ in _ONE_AT:
        if values[at] is not None:
            values[at] = cls(*values[at])
    for at, cls, _ in _MANY_AT:
        if values[at]:
            values[at] = [cls(*item) for item in values[at]]
    return Exchange(*values)


class Frames:
    """Reassembles messages from a byte stream read in arbitrary pieces."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        buf = self._buf
        buf += data
        out: list[tuple[Any, ...]] = []
        at = 0
        while len(buf) - at >= _HEAD.size:
            size, kind = _HEAD.unpack_from(buf, at)
            if size > MAX_FRAME or kind not in (b"M", b"P"):
                raise ValueError(f"a frame of kind {kind!r} and {size} bytes: the stream is broken")
            end = at + _HEAD.size + size
            if end > len(buf):
                break
            payload = bytes(buf[at + _HEAD.size : end])
            out.append(("x", _exchange(payload)) if kind == b"M" else pickle.loads(payload))
            at = end
        if at:
            del buf[:at]
        return out


def portable(exchange: Exchange) -> Exchange:
    """The exchange with only its plain notes (text, numbers, lists, dicts of them): the only kind the
    span builder and invariants read; a component may keep a live object in a note."""
    notes = {}
    for key, value in exchange.notes.items():
        try:
            marshal.dumps(value)
        except ValueError:
            continue
        notes[key] = value
    return dataclasses.replace(exchange, notes=notes)
