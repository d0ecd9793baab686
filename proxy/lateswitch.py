"""Noticing mitmproxy's switch to streaming in the middle of reading a body.

A body of unknown length (chunked, or delimited by the connection's close) that brownout buffers,
because a fault needs it whole, turns out larger than `stream_large_bodies` only while it is read.
mitmproxy then sets `response.stream = True` and passes what it had buffered and everything after
it through unread; no hook runs at that moment, and the `response` hook later finds no body.

`on_switch(response, callback)` makes that assignment call `callback` first, so brownout can put
its own stream callable in place before the first byte goes out: stream faults then act on the
real bytes and the recorder sees them. It swaps the response's class for a subclass whose
`stream` is a property: mitmproxy-internal behaviour (the one `stream = True` in
`proxy/layers/http/__init__.py`, `check_body_size`), pinned by the mitmproxy version and
exercised by tests/proxy/test_late_stream.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mitmproxy import http

__all__ = ["forget", "on_switch"]

_STREAM = "_brownout_stream"
_HOOK = "_brownout_on_switch"


class _Watched(http.Response):
    """A response whose `stream = True` (mitmproxy giving up buffering) calls brownout's callback once."""

    @property
    def stream(self) -> Any:
        return self.__dict__.get(_STREAM, False)

    @stream.setter
    def stream(self, value: Any) -> None:
        self.__dict__[_STREAM] = value
        hook = self.__dict__.pop(_HOOK, None) if value is True else None
        if hook is not None:
            hook()  # may set `stream` to a callable (this setter again, with the hook gone)


def on_switch(response: http.Response, callback: Callable[[], None]) -> None:
    """Call `callback` (once) when mitmproxy switches `response` to streaming mid-read. It must not raise."""
    if type(response) is http.Response:
        stream = response.__dict__.pop("stream", False)
        response.__class__ = _Watched
        response.__dict__[_STREAM] = stream
    response.__dict__[_HOOK] = callback


def forget(response: http.Response) -> None:
    """Drop a callback `on_switch` left that never ran (the body ended before it outgrew the buffer)."""
    response.__dict__.pop(_HOOK, None)
