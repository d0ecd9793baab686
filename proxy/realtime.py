"""Realtime WebSocket sessions (OpenAI Realtime, Gemini Live): a sub-addon of the brownout addon.

The upgrade request is an exchange like any other: recognised by its wire format, matched by rules
(a refused upgrade is a fault on it), recorded. When upstream answers 101 the addon hands the
exchange here (`adopt`) and it becomes the session's: open until the socket closes, then completed
with how it ended (close code, who closed it, resumption offered and used). Every message passes
through the session's codec as it arrives and again once delivered; each server-side generation it
finds becomes an exchange of its own (`realtime_inference` span, invariants, exporters), completed
when its terminal event reaches the client. Rules with `match.event` / `match.direction` are
decided per event (brownout.faults.events). WebSockets of other formats pass untouched and are
counted.

Messages are forwarded unchanged unless a fault applies; a codec or fault that fails is contained
by the guard and the message goes on as it came.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mitmproxy import http

from brownout.core.exchange import SHUTDOWN, Exchange
from brownout.core.wire.realtime import RealtimeEvent, RealtimeFormat
from brownout.faults.base import NotApplicable
from brownout.faults.close import CloseFault
from brownout.faults.events import CloseAction, EventAction
from brownout.faults.plan import Fired, Plan
from brownout.proxy import wsclose
from brownout.proxy.flowstate import FlowState
from brownout.proxy.rationed import Rationed
from brownout.proxy.realtime_session import RealtimeSession

__all__ = ["Realtime"]

log = logging.getLogger(__name__)


class Realtime:
    """WebSocket hooks for the brownout addon `host` (its config, engine, pipeline, guard)."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.sessions: dict[str, RealtimeSession] = {}
        # Generations and sessions that ended: their spans, invariants and exporters go after live events.
        self.ended = Rationed(host.guard, component="realtime")

    @property
    def guard(self) -> Any:
        return self.host.guard

    # --- the upgrade -----------------------------------------------------------------------

    def adopt(self, flow: http.HTTPFlow, state: FlowState) -> bool:
        """Upstream answered the upgrade with 101: a realtime format's exchange becomes its session's."""
        wire = state.wire
        if flow.websocket is None or not isinstance(wire, RealtimeFormat):
            return False
        codec = self.guard.call("wire", wire.codec, state.exchange, time.time, context=f"{wire.provider} session")
        if codec is None:
            return False
        self.sessions[flow.id] = RealtimeSession(flow, state, codec, self.guard, self._complete)
        return True

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.get(flow.id)
        provider = session.state.exchange.provider if session is not None else "http"
        self.guard.call("exporter:prometheus", self.host.pipeline.exporters.on_websocket_start, provider)
        if session is None:
            return
        plan = session.state.plan
        for fired in plan.fired if plan is not None else ():
            if isinstance(fired.fault, CloseFault) and fired.fault.params.after_s is not None:
                # A session cap: decided at the upgrade, it closes the session when the session is that old.
                action = fired.fault.action(session.codec)
                loop = asyncio.get_running_loop()
                handle = loop.call_later(fired.fault.params.after_s, self._timed_close, session, action)
                session.timers.append(handle)

    def _timed_close(self, session: RealtimeSession, action: CloseAction) -> None:
        self.guard.call("realtime", session.close, action, context="session cap")

    # --- messages ---------------------------------------------------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.get(flow.id)
        if session is None or flow.websocket is None:
            return
        msg = flow.websocket.messages[-1]
        if msg.injected:  # brownout's own (or another addon's): it goes as it is, once
            if session.anchors and msg.content == wsclose.ANCHOR:
                session.on_anchor(msg)
            else:
                session.injected("client" if msg.from_client else "server")
            return
        if session.ended:  # brownout closed or reset the session: nothing more crosses
            msg.drop()
            return
        # Recorded as its sender sent it, before any fault (a recording is upstream's and the agent's).
        self.host.tape.on_ws_message(session.state, msg.from_client, msg.content, msg.is_text)
        direction = "client" if msg.from_client else "server"
        event: RealtimeEvent | None = self.guard.call(
            "wire", session.codec.observe, direction, msg.content, msg.is_text, context="realtime message"
        )
        if event is None:
            return
        action = self._decide(session, event) if self.host.engine.has_event_rules else None
        action = self.guard.call("realtime", session.with_generation_state, event, action, default=action)
        if action is None:
            session.pass_through(msg, event)
        else:
            self.guard.call("realtime", session.apply, msg, event, action, context="fault on event")

    def _decide(self, session: RealtimeSession, event: RealtimeEvent) -> EventAction | None:
        gen = event.generation
        ex = gen.exchange if gen is not None and not gen.done else session.state.exchange
        engine, wire = self.host.engine, session.state.wire
        fired: list[Fired] = self.guard.call("engine", engine.plan_event, ex, wire, event, default=[]) or []
        if not fired:
            return None
        action: EventAction | None = None
        for f in fired:
            found = self.guard.call(f"fault:{f.type}", _on_event, f, event, context="on_event")
            if isinstance(found, str):  # the fault cannot act on this event: recorded as skipped, with why
                Plan(engine, ex, wire, [f]).skip(f, found)
                continue
            if f.ctx.extra:
                f.record.params.update(f.ctx.extra)  # what it sampled (a delay) goes on its record
            if found is None:
                continue
            if action is None:
                action = found
            else:
                action.merge(found)
        return action

    # --- the end ----------------------------------------------------------------------------

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        session = self.sessions.pop(flow.id, None)
        ws = flow.websocket
        if ws is None:
            return
        if session is None:
            code = int(ws.close_code) if ws.close_code is not None else None
            duration = (ws.timestamp_end or time.time()) - flow.request.timestamp_start
            self.guard.call(
                "exporter:prometheus", self.host.pipeline.exporters.on_websocket_end, "http", code, duration
            )
            return
        info = session.codec.info
        if session.forced is not None:
            info.close_code, info.closed_by = session.forced[0], "brownout"
            if session.forced[1] == "close":
                # The client has CLOSE_GRACE_S to answer the close frame; then its connection ends (a FIN), even
                # when a message it sent at that moment left mitmproxy's close command unheard.
                loop = asyncio.get_running_loop()
                loop.call_later(wsclose.CLOSE_GRACE_S, self.guard.call, "reset", wsclose.end_client, flow)
        else:
            info.close_code = int(ws.close_code) if ws.close_code is not None else None
            info.closed_by = "client" if ws.closed_by_client else "server"
        self.host.tape.on_ws_close(session.state, info.close_code, ws.close_reason or "", info.closed_by)
        self._finish(session, ws.timestamp_end or time.time(), defer=True)

    def _finish(self, session: RealtimeSession, end: float, *, defer: bool) -> None:
        session.stop()
        self.guard.call("wire", session.codec.close, end, context="realtime session end")
        for ex in session.codec.drain():
            self._complete(ex, defer=defer)
        ex = session.state.exchange
        ex.timings.end = end
        info = session.codec.info
        self.guard.call(
            "exporter:prometheus",
            self.host.pipeline.exporters.on_websocket_end,
            ex.provider,
            info.close_code,
            end - session.started,
        )
        # The session's exchange completes after its generations: in the same rationed order.
        self.host._close(session.state, defer=defer, later=self.ended.submit)

    def cut_all(self) -> int:
        """Shutdown: what ended completes first, then every open session is recorded as cut by it (`error.type`
        shutdown)."""
        self.ended.flush()
        sessions, self.sessions = self.sessions, {}
        now = time.time()
        for session in sessions.values():
            ex = session.state.exchange
            ex.error_type, ex.error_message = SHUTDOWN, "cut by brownout shutdown"
            self._finish(session, now, defer=False)
        return len(sessions)

    def _complete(self, exchange: Exchange, *, defer: bool = True) -> None:
        """A generation ended: spans, invariants and exporters after this hook (off its latency), rationed."""
        pipeline = self.host.pipeline
        if not defer:
            pipeline.complete(exchange)
            return
        self.ended.submit(pipeline.complete, exchange)


def _on_event(fired: Fired, event: RealtimeEvent) -> EventAction | str | None:
    """The fault's action, or why it cannot act (NotApplicable is no failure for the guard to count)."""
    try:
        return fired.fault.on_event(fired.ctx, event)
    except NotApplicable as e:
        return str(e) or "not applicable"
