"""mitmproxy's type check of every HTTP message, without the reference cycles it leaves behind.

With assertions on (`__debug__`), mitmproxy 12.2's `MessageData.__post_init__` checks each field of a
request's or response's data with `check_option_type`. That function builds a `TypeError` on every
call and raises it for each member of a union the value is not: `bytes | None` raises once for `None`,
and not for bytes. A raised exception refers to its frame, and the frame (through its local `e`) to
the exception: a reference cycle. Once a frame object outlives its call, CPython ties its caller's
frame to it too, so each cycle keeps the frames of the whole layer stack above it alive, with their
locals (events, generators, messages), until the cyclic collector runs. These cycles, a few per
message, made most of brownout's cyclic garbage, and with it most of the collector's passes, each a
pause for the requests in flight.

`install()` gives `MessageData` a check that accepts exactly what the original accepts without
raising anything, and hands any other value to the original, so a wrong type still fails with
mitmproxy's own `TypeError`. Fields whose type is not a class or a union of classes always go to the
original. The replaced method is mitmproxy 12.2's (`mitmproxy/http.py`), pinned by the `mitmproxy<12.3`
bound and exercised by tests/proxy/test_messagecheck.py; with assertions off (`python -O`) mitmproxy
defines no check, and neither does this.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from mitmproxy import http
from mitmproxy.utils.typecheck import check_option_type

__all__ = ["accepted_types", "install", "installed"]

_ORIGINAL = getattr(http.MessageData, "__post_init__", None)


def accepted_types(typeinfo: Any) -> tuple[type, ...] | None:
    """The classes `check_option_type` accepts instances of for `typeinfo`, or None when it checks more
    than instances (sequences, tuples, IO, Any)."""
    if typing.get_origin(typeinfo) in (typing.Union, types.UnionType):
        out: list[type] = []
        for member in typing.get_args(typeinfo):
            accepted = accepted_types(member)
            if accepted is None:
                return None
            out.extend(accepted)
        return tuple(dict.fromkeys(out))
    if not isinstance(typeinfo, type) or typing.get_origin(typeinfo) is not None:
        return None
    if typeinfo is typing.Any or typeinfo in (typing.TextIO, typing.BinaryIO):
        return None
    return (float, int) if typeinfo is float else (typeinfo,)  # it lets an int through as a float


@functools.cache  # per message class: its fields' names, accepted classes and declared types
def _plan(cls: type) -> tuple[tuple[str, tuple[type, ...] | None, Any], ...]:
    return tuple((f.name, accepted_types(f.type), f.type) for f in dataclasses.fields(cls))


def _post_init(self: http.MessageData) -> None:
    for name, accepted, typeinfo in _plan(type(self)):
        value = getattr(self, name)
        if accepted is None or not isinstance(value, accepted):
            check_option_type(name, value, typeinfo)  # mitmproxy's own check, and its own TypeError


def installed() -> bool:
    return _ORIGINAL is not None and http.MessageData.__post_init__ is _post_init


def install() -> None:
    """Idempotent; called by each brownout master as it is built. Nothing to replace under `python -O`."""
    if _ORIGINAL is not None:
        http.MessageData.__post_init__ = _post_init  # type: ignore[method-assign]
