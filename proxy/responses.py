"""The addon's response side: stream or buffer, apply response faults, parse, announce, errors."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mitmproxy import http

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.secrets import SecretHeaders
from brownout.core.wire.framing import Framer, framer_for
from brownout.core.wire.mcp_messages import SUBSCRIPTION_STREAMS
from brownout.faults.engine import FaultEngine
from brownout.proxy import bodies, effects, flowmodel, lateswitch
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.connkill import drop_client, is_multiplexed
from brownout.proxy.flowstate import FlowState
from brownout.proxy.ignore import IGNORED
from brownout.proxy.realtime import Realtime
from brownout.proxy.record.tape import Tape
from brownout.proxy.streaming import StreamTap

__all__ = ["ResponseHooks"]


class ResponseHooks:
    """Mixed into the addon: responseheaders, response and error, from upstream bytes to the client."""

    config: BrownoutConfig
    guard: Guard
    tape: Tape
    _states: dict[str, FlowState]
    _stream_above: int
    _buffer_max: int
    _secret_headers: SecretHeaders
    engine: FaultEngine
    _close: Callable[..., None]  # the addon's (proxy/addon.py): `_close(state, *, defer=True)` ends a flow's exchange
    realtime: Realtime

    async def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self._states.get(flow.id)
        if state is None or flow.response is None:
            if flow.response is not None and flow.metadata.get(IGNORED):
                flow.response.stream = True
            return
        await _decided(state)
        ex = state.exchange
        resp = flow.response
        ex.status = resp.status_code
        ex.timings.first_upstream_byte = resp.timestamp_start or time.time()
        ex.response_headers = flowmodel.response_headers(flow, self._secret_headers)
        ex.content_type = resp.headers.get("content-type", "")
        self.tape.on_response_headers(flow, state)  # what upstream sent, before header faults
        if state.plan is not None:
            headers = dict(ex.response_headers)
            await self.guard.acall("engine", state.plan.on_response_headers, ex.status, headers)
            effects.sync_headers(resp, ex.response_headers, headers)
        framer = framer_for(ex.content_type, self.config.proxy.event_max_bytes)
        wants_body = state.plan is not None and bool(self.guard.call("engine", state.plan.wants_body))
        # Bodies of unknown size (chunked, close-delimited) count as large: they may be any size.
        length = resp.headers.get("content-length", "")
        large = not length.isdigit() or int(length) > self._stream_above
        # Event streams always stream, compressed or not, edited or not (a compressed one under a
        # body fault is transcoded chunk by chunk); other bodies buffer when small or a fault needs them.
        if state.timing is not None or resp.stream or framer is not None or (large and not wants_body):
            self._stream(flow, state, framer)
        elif not length.isdigit():
            # Buffered for a fault, yet of unknown size: should it outgrow proxy.buffer_max_bytes, mitmproxy
            # streams it from then on, and the faults act on it as they would on any stream that large.
            lateswitch.on_switch(resp, lambda: self.guard.call("engine", self._stream, flow, state, None))

    def _stream(self, flow: http.HTTPFlow, state: FlowState, framer: Framer | None) -> None:
        ex, resp, plan = state.exchange, flow.response, state.plan
        assert resp is not None
        editor = self.guard.call("engine", plan.stream_editor) if plan is not None else None
        state.tap = StreamTap(
            ex,
            state.wire,
            framer,
            editor,
            state.timing,
            self.guard,
            on_reset=lambda now: effects.drop(flow, self.guard, now=now),
            on_cut=lambda: effects.end_read(flow, self.guard),
            on_skip=lambda reason: self.guard.call("engine", plan.skip_body_faults, reason) if plan else None,
            content_encoding=resp.headers.get("content-encoding", ""),
            decoded_max=self._buffer_max,
            keep_copy=self.config.proxy.capture_max_bytes,
            # Nothing reads the parsed answer before the exchange completes at an idle moment: parse it then.
            parse_later=plan is None and not state.wire.parses_live and not self.tape.records(state),
        )
        if state.tap.editor is not None:
            effects.reframe(flow)  # edits change the size: content-length no longer holds
        resp.stream = self.tape.wrap_stream(state, state.tap, ex.content_type)
        ex.streamed = True
        self._announce(resp, ex)

    async def response(self, flow: http.HTTPFlow) -> None:
        state = self._states.pop(flow.id, None)
        if state is None or flow.response is None:
            return
        await _decided(state)  # answered in `request` (a cassette) before the store did
        ex = state.exchange
        resp = flow.response
        if ex.status is None:  # answered in `request` (injected) or by mitmproxy itself
            ex.status = resp.status_code
            ex.response_headers = flowmodel.response_headers(flow, self._secret_headers)
            ex.content_type = resp.headers.get("content-type", "")
        if resp.status_code == 101 and self.realtime.adopt(flow, state):
            ex.timings.first_client_byte = time.time()
            return  # a realtime session: its exchange ends with the socket (proxy/realtime.py)
        if not ex.streamed and resp.stream:
            # mitmproxy streamed the body past the cap, and brownout could not take it over (see
            # responseheaders): nothing was read, so no body fault acted and there is nothing to record.
            reason = "the body outgrew proxy.buffer_max_bytes while buffered and streamed through unread"
            if state.plan is not None:
                self.guard.call("engine", state.plan.skip_body_faults, reason)
            self.tape.on_unread(state, reason)
        elif not ex.streamed:
            body = await self.guard.acall("wire", bodies.decoded, resp, self._buffer_max)
            self.tape.on_response(flow, state, body)  # the body as upstream sent it, before body faults
            await self._finish_buffered(flow, state, body)
        ex.timings.end = resp.timestamp_end or time.time()
        _unhook(resp)
        self._close(state)

    async def _finish_buffered(
        self, flow: http.HTTPFlow, state: FlowState, body: bytes | bodies.Uninspected | None
    ) -> None:
        """`body`: the response body decoded under the cap, or why it was not."""
        ex, resp = state.exchange, flow.response
        assert resp is not None
        if isinstance(body, bodies.Uninspected):
            e = body  # too large once decoded, or undecodable: the body passes through untouched, unread
            ex.response_bytes = len(resp.raw_content or b"")
            ex.mark_uninspected(e.reason, e.detail)
            if e.reason == "undecodable":
                ex.note_parse_error("undecodable", e.detail)
            if state.plan is not None:
                self.guard.call("engine", state.plan.skip_body_faults, e.detail)
            self._announce(resp, ex)
            ex.timings.first_client_byte = time.time()
            return
        body = body or b""
        ex.response_bytes = len(body)
        # 1xx (a 101 hands the connection to WebSocket), 204, 304 and HEAD answers carry no body by
        # definition: giving them one (inject on an empty body) would corrupt the connection.
        bodiless = resp.status_code < 200 or resp.status_code in (204, 304) or flow.request.method == "HEAD"
        if state.plan is not None and not bodiless and self.guard.call("engine", state.plan.wants_body):
            headers = dict(ex.response_headers)
            if state.plan.deferred and self.engine.shared:  # tool rules a fleet's store decides: awaited here
                plan, whole, large = state.plan, body, bodies.off_loop(body)
                await self.guard.acall("engine", lambda: plan.settle_deferred(whole, off_loop=large))
            if bodies.off_loop(body):
                edited = await self.guard.acall("engine", state.plan.edit_body_off_loop, body, headers, default=body)
            else:
                edited = self.guard.call("engine", state.plan.edit_body, body, headers, default=body)
            if (
                edited is not None
                and edited != body
                and await self.guard.acall("wire", bodies.set_content, resp, edited)
            ):
                body = edited
            effects.sync_headers(resp, ex.response_headers, headers)
        await bodies.parse_whole(state.wire, ex, body, self.guard)
        self._announce(resp, ex)
        ex.timings.first_client_byte = time.time()

    def _announce(self, resp: http.Response, ex: Exchange) -> None:
        if ex.faults and self.config.proxy.announce_faults:
            resp.headers["x-brownout-fault"] = ", ".join(f"{f.rule}:{f.fault}" for f in ex.faults)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self._states.pop(flow.id, None)
        if state is None:
            if flow.metadata.get(IGNORED) and flow.response is None and flow.client_conn.connected and flow.killable:
                self._no_response(flow, None)  # an ignored host fails the way every other host does
            return
        ex = state.exchange
        self.tape.on_error(flow, state)
        cut = state.tap is not None and state.tap.cut  # a clean truncation ended the read: no error
        # The stream's answer was complete (an LLM's terminal event, every JSON-RPC request of an MCP reply
        # answered): a client may hang up once it has it, before the server ends the stream. Nothing failed.
        if state.tap is not None:  # its copy may be waiting to be parsed after the answer
            self.guard.call("wire", state.tap.parse_pending, context=f"{ex.provider} stream")
        answered = ex.stream_complete is True
        # A client ends an MCP subscription stream (the GET stream, a subscriptions/listen) by closing it.
        unsubscribed = ex.operation in SUBSCRIPTION_STREAMS and ex.provider == "mcp" and not flow.client_conn.connected
        if ex.error_type is None and not cut and not answered and not unsubscribed:
            ex.error_type = "connection"
            ex.error_message = flow.error.msg if flow.error else None
        if flow.response is None and flow.client_conn.connected and flow.killable:
            self._no_response(flow, ex)
        elif flow.response is not None and not ex.streamed and flow.client_conn.connected:
            # The upstream died mid-body while mitmproxy buffered it. mitmproxy would now answer
            # its own 502 page; without brownout the client would see the connection drop, so
            # drop it (FIN, nothing written): a 200 cut short must not turn into a 502.
            if is_multiplexed(flow):  # HTTP/2: reset this stream only, never its neighbours
                self.guard.call("reset", flow.kill)
            else:
                self.guard.call("reset", lambda: drop_client(flow, rst=False))
        ex.timings.end = time.time()
        if flow.response is not None:
            _unhook(flow.response)
        self._close(state)

    def _no_response(self, flow: http.HTTPFlow, ex: Exchange | None) -> None:
        """Upstream gave no response at all; mitmproxy would now answer its own 502 page, which SDKs
        retry as a server error. Without brownout the client's connection would fail instead."""
        if self.config.proxy.upstream_error == "502":
            if ex is not None:
                ex.status, ex.error_type, ex.content_type = 502, None, "text/html"  # what the client will get
        elif flow.server_conn.timestamp_tcp_setup is None:
            effects.reset(flow, self.guard)  # never connected (refused, DNS, TLS): a refusal is a reset
        else:
            self.guard.call("reset", flow.kill)  # upstream hung up unanswered: so does brownout (HTTP/2: the stream)


def _unhook(resp: http.Response) -> None:
    """The response hook or the error hook ran: mitmproxy calls no stream callable after it. The response
    lets go of brownout's callable (the tap and, through it, the exchange) and of a pending late-switch
    callback. Held by the flow, they would be freed with the flow's own reference cycles, only by the
    cyclic collector, and mostly by its slowest (full) passes, which exchanges in flight at a young
    generation's pass reach (proxy/heap.py); let go of here, they are freed as the exchange completes."""
    lateswitch.forget(resp)
    if callable(resp.stream):
        resp.stream = True  # still says "streamed" to whatever reads it later


async def _decided(state: FlowState) -> None:
    """The plan's rules that a fleet's store decided while the request travelled are in: the response phases
    may run. Shielded: a hook cancelled with its connection leaves the decision to finish (the exchange ends
    once it has, see the addon's `_close`)."""
    if state.deciding is not None:
        await asyncio.shield(state.deciding)
