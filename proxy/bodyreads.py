"""One body event per read: the chunks of a chunked HTTP/1 body that arrive together travel together.

mitmproxy's HTTP/1 layer turns every chunk of a `transfer-encoding: chunked` body into its own
`ResponseData` (or `RequestData`) event. An LLM stream is chunked one event per chunk, so a
streamed answer of 10 events that arrives in one read becomes 10 trips through the layer stack, 10
calls of the stream callable and 10 writes to the client, where a buffered answer costs one. On
brownout's connections the chunks decoded from one read become one event instead: the same bytes,
in the same order, at the same moment (nothing waits for a later read), with the chunk boundaries
re-drawn, which HTTP lets any intermediary do. Faults that count events frame the body themselves
(faults/streams), so they never relied on chunk boundaries.

`install()` replaces `Http1Connection.read_body` once, when a brownout master starts (never at
import). Connections of a master without brownout's options keep mitmproxy's own reading, so a
host program that also runs plain mitmproxy sees no change. The replaced method is mitmproxy
12.2's (`proxy/layers/http/_http1.py`), pinned by the `mitmproxy<12.3` bound and exercised by
tests/proxy/test_bodyreads.py.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import h11
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers.http import _http1
from mitmproxy.proxy.layers.http._base import ReceiveHttp

__all__ = ["OPTION", "install", "joins_reads"]

OPTION = "brownout_config"  # an option every brownout master has, and plain mitmproxy does not
_ORIGINAL = _http1.Http1Connection.read_body


def joins_reads(connection: _http1.Http1Connection) -> bool:
    """This connection belongs to a brownout master."""
    return OPTION in connection.context.options


def _read_body(self: _http1.Http1Connection, event: events.Event) -> Generator[Any, Any, None]:
    if not isinstance(event, events.DataReceived) or not joins_reads(self):
        yield from _ORIGINAL(self, event)
        return
    assert self.stream_id is not None
    parts: list[bytes] = []
    while True:
        problem: str | None = None
        try:
            h11_event = self.body_reader(self.buf)
        except h11.ProtocolError as e:
            h11_event, problem = None, str(e)
        if isinstance(h11_event, h11.Data):
            if h11_event.data:
                parts.append(bytes(h11_event.data))
            continue
        if parts:
            yield ReceiveHttp(self.ReceiveData(self.stream_id, parts[0] if len(parts) == 1 else b"".join(parts)))
        if isinstance(h11_event, h11.EndOfMessage) and h11_event.headers:
            # mitmproxy 12.2 raises NotImplementedError here; the message fails as a protocol error instead.
            problem = "trailers after a chunked body are not supported"
        if problem is not None:
            yield commands.CloseConnection(self.conn)
            error = self.ReceiveProtocolError
            yield ReceiveHttp(error(self.stream_id, f"HTTP/1 protocol error: {problem}", code=error.code))
            return
        if h11_event is None:
            return  # the rest of the body is still on its way
        assert isinstance(h11_event, h11.EndOfMessage) and self.request is not None
        if self.request.data.method.upper() != b"CONNECT":
            yield ReceiveHttp(self.ReceiveEndOfMessage(self.stream_id))
        is_request = isinstance(self, _http1.Http1Server)
        yield from self.mark_done(request=is_request, response=not is_request)
        return


def install() -> None:
    """Idempotent; called by each brownout master as it is built."""
    _http1.Http1Connection.read_body = _read_body  # type: ignore[method-assign]
