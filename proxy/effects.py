"""What faults do to a mitmproxy flow: reset it, hold it, re-route it to the relay, edit the request or headers.

The fault engine decides in mitmproxy-free terms (Respond, Reset, Hang, StreamTiming); these
functions turn the decisions into flow operations. Every call into mitmproxy internals goes
through `proxy.connkill`, which tests pin.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from mitmproxy import http

from brownout.core.guard import Guard
from brownout.core.secret_paths import redact_url
from brownout.faults.base import StreamTiming
from brownout.faults.plan import Plan
from brownout.proxy import bodies
from brownout.proxy.connkill import close_upstream, drop_client, end_http1_body, is_multiplexed, stream_cancelled
from brownout.proxy.relay import RELAY_HEADER, Relay, RelayTarget

__all__ = [
    "RelayUnsupported",
    "can_relay",
    "drop",
    "edit_request",
    "end_read",
    "hang",
    "reframe",
    "reset",
    "route_to_relay",
    "sync_headers",
]


def reset(flow: http.HTTPFlow, guard: Guard) -> None:
    """The client sees its connection reset (HTTP/2: its stream); upstream is never contacted."""
    if not is_multiplexed(flow):
        guard.call("reset", drop_client, flow)
    # Killing the flow resets its HTTP/2 stream (RST_STREAM) and leaves the other streams alone.
    if flow.killable:
        flow.kill()


async def hang(flow: http.HTTPFlow, duration_s: float | None, guard: Guard) -> None:
    """Hold the request (None: until the client gives up), then reset; other flows never wait."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    # Poll rather than one long sleep: a client that gives up must free this task at once.
    while not _gave_up(flow, guard) and (deadline is None or time.monotonic() < deadline):
        await asyncio.sleep(0.05)
    reset(flow, guard)


def _gave_up(flow: http.HTTPFlow, guard: Guard) -> bool:
    # An HTTP/2 client that times out cancels only its stream, keeping the connection: that ends a hang too.
    return bool(guard.call("hang", stream_cancelled, flow, default=not flow.client_conn.connected))


def drop(flow: http.HTTPFlow, guard: Guard, *, now: bool) -> None:
    """Reset a streaming response's client connection, now or just after the bytes handed over."""
    if now:
        guard.call("reset", drop_client, flow)
    else:
        # Let the bytes handed to mitmproxy just now reach the socket before the RST.
        asyncio.get_running_loop().call_soon(lambda: guard.call("reset", drop_client, flow))


def end_read(flow: http.HTTPFlow, guard: Guard) -> None:
    """After a clean cut: end the client's read just after the bytes handed over, whatever the
    body's size or framing, instead of leaving it waiting for bytes that will never come."""

    def end() -> None:
        if not is_multiplexed(flow):
            guard.call("reset", end_http1_body, flow)
        elif flow.response is not None and flow.response.http_version.startswith("HTTP/1"):
            # HTTP/2 client: mitmproxy cannot end one stream early, so close the HTTP/1 upstream
            # connection that serves this flow alone; mitmproxy then resets just this stream.
            # An HTTP/2 upstream connection is shared: such a stream ends when upstream ends it.
            guard.call("reset", close_upstream, flow)

    asyncio.get_running_loop().call_soon(end)


def reframe(flow: http.HTTPFlow) -> None:
    """A fault is about to edit a streamed body: its size may change and a cut may end it early.

    `content-length` goes (an HTTP/1.1 client gets chunked framing instead), and an HTTP/1 client
    is told `connection: close`: after a cut the connection is closed (see `end_read`), and a
    client that knows it in advance never tries to reuse it."""
    resp = flow.response
    if resp is None or resp.status_code < 200 or resp.status_code in (204, 304) or flow.request.method == "HEAD":
        return  # no body to edit: framing headers stay as they are (a 101 keeps its upgrade)
    multiplexed = is_multiplexed(flow)
    if "content-length" in resp.headers:
        del resp.headers["content-length"]
        chunked = "chunked" in resp.headers.get("transfer-encoding", "").lower()
        if flow.request.http_version == "HTTP/1.1" and not multiplexed and not chunked:
            resp.headers["transfer-encoding"] = "chunked"
    if not multiplexed:
        resp.headers["connection"] = "close"


class RelayUnsupported(RuntimeError):
    """The flow's proxy mode has no route to the relay; it goes on unpaced."""


def can_relay(flow: http.HTTPFlow) -> bool:
    """Only regular and reverse mode: in upstream mode mitmproxy would send the relayed request
    through the upstream proxy, which cannot reach brownout's loopback relay (and the relay does
    not speak to upstream proxies)."""
    mode = getattr(flow.client_conn.proxy_mode, "type_name", "")
    return mode in ("regular", "reverse") and flow.server_conn.via is None


def route_to_relay(
    flow: http.HTTPFlow,
    relay: Relay,
    timing: StreamTiming,
    guard: Guard,
    *,
    on_upstream: Callable[[bytes], None] | None = None,
    inbox: asyncio.Queue[bytes] | None = None,
) -> str | None:
    """Send the request through the pacing relay; the relay token to discard later, or None.

    A flow the relay cannot take (see `can_relay`) is not paced: it is counted and logged as a
    "relay" failure and continues through mitmproxy as usual. `on_upstream`, `inbox`: see `RelayTarget`.
    """
    if not can_relay(flow):
        mode = getattr(flow.client_conn.proxy_mode, "type_name", "")
        err = RelayUnsupported(f"stall/throttle need regular or reverse mode, not {mode or 'unknown'}; not paced")
        guard.failed("relay", err, redact_url(flow.request.pretty_url), level=logging.WARNING)
        return None
    token = relay.register(RelayTarget(url=flow.request.url, timing=timing, on_upstream=on_upstream, inbox=inbox))
    host_header = flow.request.host_header
    flow.request.scheme, flow.request.host, flow.request.port = "http", "127.0.0.1", relay.port
    flow.request.host_header = host_header  # the upstream still sees its own Host
    flow.request.headers[RELAY_HEADER] = token
    return token


async def edit_request(flow: http.HTTPFlow, plan: Plan, body: bytes) -> bytes:
    """Request faults (mutate) rewrite the decoded body, re-encoded with its content-encoding.

    `body` is the request body as the proxy decoded it, under its cap (never decoded again here).
    A large body is edited and re-encoded in a worker thread: the plan and the exchange it re-reads
    are this flow's alone until it ends. Returns the decoded body the request now carries."""
    req = flow.request
    if req.stream:  # over proxy.buffer_max_bytes: it streams through unread
        return body
    before = {k.lower(): v for k, v in req.headers.items()}
    headers = dict(before)
    if bodies.off_loop(body):
        edited = await asyncio.to_thread(plan.edit_request, body, headers)
    else:
        edited = plan.edit_request(body, headers)
    if edited != body:
        await bodies.set_content(req, edited)
    sync_headers(req, before, headers)
    return edited


def sync_headers(resp: http.Message, before: dict[str, str], after: dict[str, str]) -> None:
    """Apply a fault's edits of a lower-cased header dict back onto the response (or request)."""
    for k in before.keys() - after.keys():
        resp.headers.pop(k, None)
    for k, v in after.items():
        if before.get(k) != v:
            resp.headers[k] = v
