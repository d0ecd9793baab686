"""Export cassettes as HAR 1.2, through mitmproxy's own HAR writer, for tools that read HAR.

HAR has one body per response and no per-event timing: a streamed answer becomes its whole body. A
WebSocket session (a realtime one) is its 101 entry with every message, both ways and timed, in
`_webSocketMessages`, as Chrome's DevTools writes them and HAR viewers read them.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable
from typing import IO, Any
from urllib.parse import urlsplit

from mitmproxy import connection, http, websocket
from mitmproxy.addons.savehar import SaveHar

from brownout.proxy.record.capture import mitm_headers
from brownout.proxy.record.cassette import CassetteFile

__all__ = ["write_har"]

_TEXT, _BINARY = 1, 2  # WebSocket opcodes (RFC 6455), as mitmproxy's messages take them


def _flow(rec: Any) -> http.HTTPFlow:
    url = urlsplit(rec.url)
    port = url.port or (443 if url.scheme == "https" else 80)
    start = rec.recorded_at
    client = connection.Client(peername=("127.0.0.1", 0), sockname=("127.0.0.1", 0), timestamp_start=start)
    server = connection.Server(address=(url.hostname or "", port))
    flow = http.HTTPFlow(client, server)
    flow.request = http.Request.make(rec.method, rec.url, rec.request_body, mitm_headers(rec.request_headers))
    flow.request.timestamp_start = flow.request.timestamp_end = start
    if rec.status is not None:
        body = b"".join(e.data for e in rec.events) if rec.events is not None else rec.body or b""
        flow.response = http.Response.make(rec.status, body, mitm_headers(rec.response_headers))
        flow.response.reason = rec.reason
        flow.response.timestamp_start = start + rec.headers_s
        flow.response.timestamp_end = start + rec.end_s
    if rec.messages is not None:
        flow.websocket = websocket.WebSocketData(
            messages=[
                websocket.WebSocketMessage(_BINARY if m.binary else _TEXT, m.from_client, m.data, start + m.t)
                for m in rec.messages
            ]
        )
    return flow


def write_har(cassettes: Iterable[CassetteFile], out: IO[str]) -> int:
    """One HAR log holding every exchange of the cassettes, in recorded order per session, written to
    `out` an entry at a time (a large cassette is never held whole); returns how many entries. CassetteError for an exchange that cannot be read."""
    har = SaveHar()
    log = har.make_har([])
    head, _, tail = json.dumps(log, indent=1).partition('"entries": []')
    out.write(head + '"entries": [')
    servers: set[Any] = set()
    n = 0
    for cassette in cassettes:
        for rec in cassette.exchanges():
            out.write(("," if n else "") + "\n" + json.dumps(har.flow_entry(_flow(rec), servers), indent=1))
            n += 1
            # Building a mitmproxy response leaves a reference cycle (a caught type-check error) holding
            # the body: collected now, not a few large bodies later.
            gc.collect(0)
    out.write("\n]" + tail)
    return n
