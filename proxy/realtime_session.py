"""One realtime WebSocket session in the proxy: its codec, and what faults have it send, hold or end.

Events leave in the order they arrived in each direction. A fault that delays, precedes or replaces
an event takes it off mitmproxy's path (the message is dropped) and puts it, and everything behind
it in the same direction, on a queue that a task releases by re-injecting each message at its
time: mitmproxy's hooks block the connection, so waiting inside one would hold back both
directions. Injected messages come back through `websocket_message` marked `injected` and are let
through untouched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from mitmproxy import http
from mitmproxy.websocket import WebSocketMessage

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.realtime import CloseSpec, Direction, RealtimeCodec, RealtimeEvent, WsOut
from brownout.faults.events import CloseAction, EventAction, GenerationCut
from brownout.proxy import wsclose
from brownout.proxy.flowstate import FlowState

__all__ = ["RealtimeSession"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    """A message waiting its turn: brownout's own (`out`), a peer's event, or the session's close."""

    due: float  # loop time
    event: RealtimeEvent | None = None  # accounted for when it goes out
    out: WsOut | None = None  # the bytes to send (None: the event's own)
    close: CloseAction | None = None


@dataclass(slots=True)
class _Cut:
    """A generation ending early: `left` more of its events get through, then `end`, then nothing."""

    left: int
    end: WsOut | CloseSpec
    sent: bool = False


@dataclass(eq=False)
class RealtimeSession:
    """The proxy's state for one session; `on_done` hands finished exchanges to the pipeline."""

    flow: http.HTTPFlow
    state: FlowState
    codec: RealtimeCodec
    guard: Guard
    on_done: Callable[[Exchange], None]
    held: dict[Direction, deque[_Held]] = field(default_factory=lambda: {"server": deque(), "client": deque()})
    # Messages injected and not yet through mitmproxy (injection is asynchronous): a message arriving
    # meanwhile waits its turn behind them, or it would overtake them.
    injecting: dict[Direction, int] = field(default_factory=lambda: {"server": 0, "client": 0})
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    cuts: dict[str, _Cut] = field(default_factory=dict)
    rewrites: dict[str, Callable[[str], str]] = field(default_factory=dict)
    anchors: deque[CloseSpec] = field(default_factory=deque)
    forced: tuple[int, str] | None = None  # brownout ended the session: (the code the client saw, how)
    ended: bool = False  # closing, closed or reset by brownout: nothing more crosses

    # --- delivery ------------------------------------------------------------------------

    def deliver(self, event: RealtimeEvent) -> None:
        """`event` reached its peer: the codec accounts for it; generations it ended are done."""
        self.guard.call("wire", self.codec.deliver, event, context="realtime event")
        for ex in self.codec.drain():
            self.on_done(ex)

    def busy(self, direction: Direction) -> bool:
        """Messages of brownout's are ahead in this direction: a new one must queue behind them."""
        return bool(self.held[direction]) or self.injecting[direction] > 0

    def injected(self, direction: Direction) -> None:
        """One of brownout's injected messages came through mitmproxy (its hook fired)."""
        self.injecting[direction] = max(0, self.injecting[direction] - 1)

    def _inject(self, out: WsOut, direction: Direction) -> None:
        self.injecting[direction] += 1
        wsclose.inject(self.flow, out, to_client=direction == "server")

    def pass_through(self, msg: WebSocketMessage, event: RealtimeEvent) -> None:
        """The common case: no fault, nothing held. The message goes as it is."""
        if self.busy(event.direction):
            msg.drop()
            self._enqueue(event.direction, [_Held(0.0, event)], 0.0)
        else:
            self.deliver(event)

    def with_generation_state(self, event: RealtimeEvent, action: EventAction | None) -> EventAction | None:
        """Apply what earlier faults left on the event's generation (a cut, a rewrite); register new ones."""
        gen = event.generation
        if gen is None:
            return action
        if action is not None and action.cut is not None and gen.key not in self.cuts:
            cut: GenerationCut = action.cut
            self.cuts[gen.key] = _Cut(cut.after_events, cut.end)
        if action is not None and action.rewrite is not None:
            self.rewrites.setdefault(gen.key, action.rewrite[1])
        state = self.cuts.get(gen.key)
        if state is not None:
            action = action or EventAction()
            if state.left > 0:
                state.left -= 1
            elif state.sent:
                action.drop, action.replace, action.after, action.copies = True, None, [], 0
            else:
                state.sent = True
                if isinstance(state.end, CloseSpec):
                    action.drop, action.close = True, CloseAction(state.end)
                else:
                    action.replace, action.after, action.copies = state.end, [], 0
            return action
        edit = self.rewrites.get(gen.key)
        if edit is not None and (action is None or action.replace is None):
            out = self.guard.call("wire", self.codec.edit_tool_arguments, event, edit, context="rewrite")
            if out is not None:
                action = action or EventAction()
                action.replace = out
        return action

    def apply(self, msg: WebSocketMessage, event: RealtimeEvent, action: EventAction) -> None:
        """Realise faults' action on `event` (its message `msg` is in its websocket_message hook)."""
        if action.reset:
            msg.drop()
            self.reset()
            return
        direction = event.direction
        items: list[_Held] = [_Held(0.0, self._synthetic(b, direction), b) for b in action.before]
        own: _Held | None = None
        if not action.drop:
            if action.replace is not None:
                replaced = self.guard.call("wire", self.codec.replaced, event, action.replace, context="realtime event")
                own = _Held(0.0, replaced, action.replace)
            else:
                own = _Held(0.0, event)
            items.append(own)
            for _ in range(action.copies):
                items.append(_Held(0.0, own.event, own.out or WsOut(event.content, event.is_text)))
        items += [_Held(0.0, self._synthetic(a, direction), a) for a in action.after]
        if action.close is not None:
            items.append(_Held(0.0, close=action.close))
        in_place = own is not None and items[0] is own and action.delay_s == 0 and not self.busy(direction)
        if in_place:
            assert own is not None and own.event is not None
            if own.out is not None:
                msg.content = own.out.content
            self.deliver(own.event)
            items = items[1:]
        else:
            msg.drop()
        if items:
            self._enqueue(direction, items, action.delay_s)

    def _synthetic(self, out: WsOut, direction: Direction) -> RealtimeEvent | None:
        return self.guard.call("wire", self.codec.synthetic, out, direction, context="realtime event")

    # --- the queue -----------------------------------------------------------------------

    def _enqueue(self, direction: Direction, items: list[_Held], delay_s: float) -> None:
        queue = self.held[direction]
        loop = asyncio.get_running_loop()
        due = max(loop.time() + delay_s, queue[-1].due if queue else 0.0)
        for item in items:
            item.due = due
            queue.append(item)
        if len(queue) == len(items):  # the queue was empty: nothing is releasing it
            task = loop.create_task(self._release(direction))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _release(self, direction: Direction) -> None:
        queue = self.held[direction]
        loop = asyncio.get_running_loop()
        while queue and not self.ended:
            wait = queue[0].due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            item = queue.popleft()
            self.guard.call("realtime", self._send, item, direction, context="held event")
        queue.clear()

    def _send(self, item: _Held, direction: Direction) -> None:
        if item.close is not None:
            self.close(item.close)
            return
        event = item.event
        out = item.out
        if out is None:
            assert event is not None
            out = WsOut(event.content, event.is_text)
        if event is not None:
            self.deliver(event)
        self._inject(out, direction)

    # --- ending the session --------------------------------------------------------------

    def close(self, close: CloseAction) -> None:
        """The provider's warning, then (after `warning_s`) the close frame with brownout's code."""
        if self.ended or self.forced is not None:
            return
        for warning in close.warning:
            event = self._synthetic(warning, "server")
            if event is not None:
                self.deliver(event)
            self._inject(warning, "server")
        self.forced = (close.spec.code, "close")
        self.anchors.append(close.spec)
        if close.warning_s > 0:
            handle = asyncio.get_running_loop().call_later(close.warning_s, self._anchor)
            self.timers.append(handle)
        else:
            self._anchor()

    def _anchor(self) -> None:
        if not self.ended:
            # From here the session is closing: what either peer still sends stays on its side.
            self.ended = True
            self.guard.call("realtime", wsclose.inject_anchor, self.flow, context="close")

    def on_anchor(self, msg: WebSocketMessage) -> None:
        """Our anchor's hook: the close goes out now (or, should mitmproxy's layer not be found, a FIN)."""
        spec = self.anchors.popleft()
        if not self.guard.call("realtime", wsclose.close_at_anchor, self.flow, msg, spec, default=False):
            msg.drop()
            log.warning(
                "realtime: no WebSocket layer for %s; ending the session with a dropped connection", self.flow.id
            )
            self.guard.call("reset", wsclose.reset, self.flow)
            self.forced = (1006, "close")

    def reset(self) -> None:
        self.ended = True
        self.forced = (1006, "reset")
        self.guard.call("reset", wsclose.reset, self.flow)

    def stop(self) -> None:
        """The socket is gone: stop timers and queues."""
        self.ended = True
        for handle in self.timers:
            handle.cancel()
        for task in list(self.tasks):
            task.cancel()
        for queue in self.held.values():
            queue.clear()

    @property
    def started(self) -> float:
        return self.state.exchange.timings.start or time.time()
