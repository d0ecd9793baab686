"""The stdio relay: an MCP client's pipe on one side, the server child's on the other.

An exchange is one JSON-RPC request and its response (a notification is an exchange with no
response). It goes through the same engine, Plan and pipeline as the HTTP proxy's, with the MCP
wire format parsing it and building fault bytes, so rules written for MCP over HTTP act here
unchanged. What a pipe can do for each fault action:

- `Respond` (http_error, empty): the answer is written to the client; the server never sees the
  request. A transport-level error becomes a JSON-RPC error for the request (a pipe has no status).
- `Reset`: the server is killed (SIGKILL) before it sees the request; mid-body (`reset_after_bytes`):
  after it answered, once that many bytes of the answer reached the client.
- `Hang`: the request is held, never forwarded; after `duration_s` the server is killed.
- body edits: the reply line is edited whole; a reply a fault turns into an SSE stream (list_changed)
  becomes one line per event. Stall and throttle delay the reply line.

Messages that are no request (the client's answers to server requests, server notifications and
requests) pass through in order; server notifications are remembered, with the time each reached the
client, on the next request's exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import WireFormat
from brownout.core.wire.mcp_eras import MODERN, SUBSCRIPTION_ID_KEY
from brownout.core.wire.mcp_messages import LISTEN, listen_notification
from brownout.faults.base import Hang, Reset, Respond, StreamTiming
from brownout.faults.engine import FaultEngine
from brownout.faults.plan import Plan
from brownout.proxy.mcpstdio.clientio import CLIENT_WRITE_TIMEOUT_S, ClientOut
from brownout.proxy.mcpstdio.messages import decode, key_of, remember, reply_lines, rule_of, with_id
from brownout.proxy.mcpstdio.pipes import Child, Frame, frames

__all__ = ["StdioRelay"]

log = logging.getLogger(__name__)

_NOTES_KEPT = 16
_JSON = {"content-type": "application/json"}


@dataclass(slots=True)
class _Open:
    """A request on its way: its exchange, plan, and the key of its JSON-RPC id."""

    exchange: Exchange
    plan: Plan | None
    key: str | None  # None: a notification, answered by nobody
    delay_s: float = 0.0  # a listen request's latency: each notification on it reaches the client this late


def _listens(state: _Open) -> list[str]:
    return list(state.exchange.notes.get("mcp_listen") or ())


class StdioRelay:
    """Relays newline-delimited JSON-RPC between a client and a server child, faults in between."""

    def __init__(
        self,
        *,
        child: Child,
        client_out: ClientOut,
        engine: FaultEngine,
        complete: Callable[[Exchange], None],
        wire: WireFormat,
        guard: Guard,
        session: str,
        capture_max_bytes: int,
        client_write_timeout_s: float = CLIENT_WRITE_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.child = child
        self.client_out = client_out
        self.engine = engine
        self.complete = complete
        self.wire = wire
        self.guard = guard
        self.session = session
        self.capture_max_bytes = capture_max_bytes
        self.client_write_timeout_s = client_write_timeout_s
        self.clock = clock
        self.mcp_session_id = uuid.uuid4().hex  # stdio has no session id: one per server process
        self.protocol_version: str | None = None
        self._open: dict[str, _Open] = {}
        # Server notifications since the client's last request, with the time each reached the client.
        self._server_notes: list[tuple[str, float]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.client_gone: str | None = None  # why the client can get no more replies

    # --- client -> server --------------------------------------------------------------

    async def from_client(self, reader: asyncio.StreamReader) -> None:
        """Relay the client's messages until it closes its end."""
        async for frame in frames(reader):
            # Fail open: whatever brownout's own bookkeeping does, the line reaches the server.
            state = self.guard.call("exchange", self._request, frame, context="stdio request")
            if state is None:
                self.child.send(frame.data + (b"\n" if frame.whole else b""))
            elif state.plan is None:
                self._forward(state, frame.data)
            else:
                self._spawn(self._faulted_request(state, frame.data))
            await self.child.drain()

    def _request(self, frame: Frame) -> _Open | None:
        """The exchange of a client request or notification; None for other lines (answers to server requests)."""
        msg = decode(frame.data) if frame.whole else None
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return None
        if msg["method"] == "notifications/cancelled":
            self._cancelled(msg.get("params"))
        return self._begin(frame.data, msg)

    def _begin(self, data: bytes, msg: dict[str, Any]) -> _Open:
        ex = Exchange(
            id=str(uuid.uuid4()),
            session=self.session,
            method="STDIO",
            scheme="stdio",
            host=self.child.label,
            path="",
            transport="stdio",
            capture_max_bytes=self.capture_max_bytes,
            request_bytes=len(data) + 1,
        )
        ex.timings.start = self.clock()
        ex.operation = msg["method"]
        if self.protocol_version:
            ex.notes["mcp_protocol_version"] = self.protocol_version  # the handshake's, unless the request says
        if self._server_notes:
            ex.notes["notifications_before"], self._server_notes = self._server_notes, []
        self.guard.call("wire", self.wire.parse_request, ex, data, context="mcp stdio request")
        if ex.mcp_era != MODERN:  # a 2026-07-28 request belongs to no session
            ex.notes["mcp_session_id"] = self.mcp_session_id
        if listening := self._listening():
            ex.notes["mcp_listening"] = listening
        plan = self.guard.call("engine", self.engine.plan, ex, self.wire, context=f"exchange {ex.id}")
        key = key_of(msg["id"]) if "id" in msg and msg["id"] is not None else None
        return _Open(ex, None if plan is None or plan.empty else plan, key)

    def _forward(self, state: _Open, data: bytes) -> None:
        if state.key is not None:
            self._open[state.key] = state
        if not self.child.send(data + b"\n"):
            self._fail(state, "connection", "the MCP server is gone")
        elif state.key is None:
            state.exchange.status = 202  # a notification is done once delivered (HTTP answers it 202)
            self._finish(state)

    async def _faulted_request(self, state: _Open, data: bytes) -> None:
        assert state.plan is not None
        action = await self.guard.acall("engine", state.plan.before_upstream)
        rule = rule_of(state.exchange, ("reset", "hang"))
        if isinstance(action, Respond):
            self._respond(state, action)
        elif isinstance(action, Reset):
            self._hold(state)
            self.child.kill(rule)
        elif isinstance(action, Hang):
            self._hold(state)
            if action.duration_s is not None:
                await asyncio.sleep(action.duration_s)
                if state.key is not None and self._open.get(state.key) is state:
                    self.child.kill(rule)
        else:
            for method in self.guard.call("engine", state.plan.announcements, default=None) or ():
                self._announce(method)
            if state.exchange.mcp_method == LISTEN:
                timing: StreamTiming | None = self.guard.call("engine", state.plan.stream_timing)
                state.delay_s = timing.event_delay_s or 0.0 if timing is not None else 0.0
            self._forward(state, data)
            await self.child.drain()

    def _listening(self) -> list[str]:
        """The lists the client's open subscriptions/listen requests hear of."""
        lists = {which for st in self._open.values() if st.exchange.mcp_method == LISTEN for which in _listens(st)}
        return sorted(lists)

    def _announce(self, method: str) -> None:
        """A 2026-07-28 announcement (a rug pull's list_changed) onto each open listen request that asked for it."""
        which = method.split("/")[1] if method.count("/") == 2 else ""
        for st in list(self._open.values()):
            if st.exchange.mcp_method == LISTEN and which in _listens(st):
                note = listen_notification(method, st.exchange.notes.get("jsonrpc_id"))
                self._write(json.dumps(note, separators=(",", ":")).encode() + b"\n")
                remember(self._server_notes, method, self.clock(), keep=_NOTES_KEPT)

    def _hold(self, state: _Open) -> None:
        """Keep a request open that the server never sees: the client's cancel or the server's end closes it."""
        if state.key is not None:
            self._open[state.key] = state
        else:
            self._finish(state)  # a held notification is simply lost

    def _respond(self, state: _Open, action: Respond) -> None:
        if state.key is None:
            self._finish(state)  # a notification gets no answer, so the injected one goes nowhere
            return
        lines = reply_lines(action.body, action.headers)
        request_id = state.exchange.notes.get("jsonrpc_id")
        # A pipe has no status line: a transport-level error answers the request itself.
        lines = [with_id(line, request_id) for line in lines]
        state.exchange.timings.first_upstream_byte = self.clock()
        self._deliver(state, lines)

    def _cancelled(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            return
        state = self._open.pop(key_of(params["requestId"]), None)
        if state is not None:
            self._fail(state, "cancelled", str(params.get("reason") or "cancelled by the client"))

    # --- server -> client --------------------------------------------------------------

    async def from_server(self) -> None:
        """Relay the server's messages until its stdout closes; then every open request fails."""
        async for frame in frames(self.child.stdout):
            if delay := self.guard.call("exchange", self._listen_delay, frame, default=0.0, context="stdio listen"):
                await asyncio.sleep(delay)  # a pipe keeps its order: what follows the notification waits too
            state = self.guard.call("exchange", self._reply_to, frame, context="stdio reply")
            if state is None:
                self._write(frame.data + (b"\n" if frame.whole else b""))
            elif state.plan is None:
                self._deliver(state, [frame.data])
            else:
                self._spawn(self._faulted_reply(state, frame.data))
            await self._drain_client()
            if self.client_gone:
                break  # nobody to relay to: the run ends, and the server with it
        if self.client_gone:
            reason = self.client_gone
        else:
            with contextlib.suppress(TimeoutError):  # a closed stdout usually means an exit: say which
                await asyncio.wait_for(self.child.proc.wait(), 1.0)
            reason = self.child.describe_exit() if not self.child.alive else "server closed stdout"
        for state in list(self._open.values()):
            self._fail(state, "connection", reason)
        self._open.clear()

    def _listen_delay(self, frame: Frame) -> float:
        """How late a notification on a delayed listen request reaches the client (latency phase events)."""
        delayed = [st for st in self._open.values() if st.delay_s]
        msg = decode(frame.data) if delayed and frame.whole else None
        params = msg.get("params") if isinstance(msg, dict) and isinstance(msg.get("method"), str) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(meta, dict) or SUBSCRIPTION_ID_KEY not in meta:
            return 0.0
        listen = key_of(meta[SUBSCRIPTION_ID_KEY])
        return next((st.delay_s for st in delayed if st.key == listen), 0.0)

    def _reply_to(self, frame: Frame) -> _Open | None:
        """The open request this line answers; None for server notifications and requests (remembered)."""
        msg = decode(frame.data) if frame.whole else None
        if not isinstance(msg, dict):
            return None
        if "method" not in msg and ("result" in msg or "error" in msg):
            state = self._open.pop(key_of(msg.get("id")), None)
            if state is not None:
                state.exchange.timings.first_upstream_byte = self.clock()
            return state
        if isinstance(msg.get("method"), str):
            # Written to the client right after: this is when it reached the client.
            remember(self._server_notes, msg["method"], self.clock(), keep=_NOTES_KEPT)
        return None

    async def _faulted_reply(self, state: _Open, data: bytes) -> None:
        plan = state.plan
        assert plan is not None
        headers = dict(_JSON)
        await self.guard.acall("engine", plan.on_response_headers, 200, headers)
        body = data
        if self.guard.call("engine", plan.wants_body, default=False):
            body = self.guard.call("engine", plan.edit_body, data, headers, default=data) or data
        lines = reply_lines(body, headers)
        timing: StreamTiming | None = self.guard.call("engine", plan.stream_timing)
        if timing is not None:
            size = sum(len(line) + 1 for line in lines)
            delay = timing.pause_s if timing.pause_after_events is not None else 0.0
            delay += size / timing.bytes_per_s if timing.bytes_per_s else 0.0
            delay += timing.event_delay_s or 0.0
            if delay > 0:
                await asyncio.sleep(delay)
            if timing.reset_after_bytes is not None and timing.reset_after_bytes < size:
                # The server dies while the answer is on its way: the client gets its first bytes only.
                self._write(b"".join(line + b"\n" for line in lines)[: timing.reset_after_bytes])
                if state.key is not None:
                    self._open[state.key] = state
                self.child.kill(rule_of(state.exchange, ("reset", "truncate")))
                return
        self._deliver(state, lines)
        await self._drain_client()

    # --- finishing ---------------------------------------------------------------------

    def _deliver(self, state: _Open, lines: list[bytes]) -> None:
        ex = state.exchange
        for line in lines:
            self._write(line + b"\n")
        ex.status = 200
        ex.content_type = "application/json"
        ex.response_bytes = sum(len(line) + 1 for line in lines)
        ex.timings.first_client_byte = self.clock()
        for line in lines:
            self.guard.call("wire", self.wire.parse_response, ex, line, context="mcp stdio reply")
        if ex.mcp_method == "initialize" and isinstance(ex.notes.get("mcp_protocol_version"), str):
            self.protocol_version = ex.notes["mcp_protocol_version"]
        self._finish(state)

    def _fail(self, state: _Open, error_type: str, message: str) -> None:
        state.exchange.error_type = state.exchange.error_type or error_type
        state.exchange.error_message = message
        self._finish(state)

    def _finish(self, state: _Open) -> None:
        ex = state.exchange
        ex.timings.end = self.clock()
        if state.plan is not None:
            self.guard.call("engine", state.plan.finish)
        self.complete(ex)

    def _write(self, data: bytes) -> None:
        if self.client_out.is_closing():
            self.client_gone = self.client_gone or "the MCP client closed its end of stdout"
        if self.client_gone is None:
            self.client_out.write(data)

    async def _drain_client(self) -> None:
        if self.client_gone:
            return
        # A client that keeps its pipe open and reads nothing would hold the server (whose output we
        # stop reading) and brownout forever: after a bound with no byte read, it counts as gone.
        pending = self.client_out.pending()
        while True:
            try:
                await asyncio.wait_for(self.client_out.drain(), self.client_write_timeout_s)
                return
            except ConnectionError:
                self.client_gone = "the MCP client closed its end of stdout"
                return
            except TimeoutError:
                if (now := self.client_out.pending()) >= pending:
                    self.client_gone = f"the MCP client read nothing for {self.client_write_timeout_s:g} s"
                    return
                pending = now  # slow, but reading

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(
            self.guard.acall("engine", lambda: coro, context="stdio exchange")
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def answered(self, timeout_s: float, *, unless: Collection[asyncio.Future[Any]]) -> None:
        """Wait (bounded) until every request read so far has its answer, or one of `unless` is done."""
        deadline = time.monotonic() + timeout_s
        while (self._open or self._tasks) and not any(f.done() for f in unless) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def settle(self, timeout_s: float) -> None:
        """Let in-flight faulted exchanges finish (bounded), then cancel the rest."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
        for state in list(self._open.values()):
            self._fail(state, "connection", "brownout stopped")
        self._open.clear()
        if not self.client_gone:  # the last replies reach a client that still reads
            with contextlib.suppress(TimeoutError, ConnectionError):
                await asyncio.wait_for(self.client_out.drain(), timeout_s)
