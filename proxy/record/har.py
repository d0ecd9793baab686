"""Export cassettes as HAR 1.2, through mitmproxy's own HAR writer, for tools that read HAR.

HAR has one body per response and no per-event timing: a streamed answer becomes its whole body.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import connection, http
from mitmproxy.addons.savehar import SaveHar

from brownout.proxy.record.capture import mitm_headers
from brownout.proxy.record.cassette import Cassette

__all__ = ["to_har"]


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
    return flow


def to_har(cassettes: Iterable[Cassette]) -> dict[str, Any]:
    """One HAR log holding every exchange of the cassettes, in recorded order per session."""
    flows = [_flow(rec) for cassette in cassettes for rec in cassette.exchanges]
    return SaveHar().make_har(flows)
