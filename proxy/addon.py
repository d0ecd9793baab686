"""The brownout mitmproxy addon: the only layer that touches mitmproxy flows.

Hooks build an `Exchange` per flow, ask the fault engine for a plan, apply the plan's
effects at each phase, parse the response (streamed ones chunk by chunk, without
buffering), and hand the finished exchange to the pipeline. The request side and the
per-flow state live here; the response side is proxy/responses.py, the lifecycle (options,
config, start-up, shutdown) proxy/lifecycle.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from mitmproxy import http
from mitmproxy.utils import human

from brownout.core.exchange import SHUTDOWN, Exchange
from brownout.core.guard import Guard
from brownout.core.secrets import SecretHeaders
from brownout.core.wire.mcp_messages import LISTEN, SUBSCRIPTION_STREAMS
from brownout.faults.base import Hang, Reset, Respond, StreamTiming
from brownout.faults.engine import FaultEngine
from brownout.faults.plan import Plan
from brownout.faults.rug_pull import RugPullFault
from brownout.faults.rules import websocket_handshake
from brownout.proxy import bodies, effects, flowmodel
from brownout.proxy.admission import Admission
from brownout.proxy.clientlimits import ClientLimits
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.fleet import Fleet
from brownout.proxy.flowstate import FlowState
from brownout.proxy.ignore import IGNORED, HostGlobs
from brownout.proxy.lifecycle import Lifecycle
from brownout.proxy.mcpstreams import LISTEN_INBOX_MAX, McpStreams, McpVersions
from brownout.proxy.onloop import LoopRunner
from brownout.proxy.overlay import PhaseOverlay
from brownout.proxy.pipeline import Pipeline
from brownout.proxy.realtime import Realtime
from brownout.proxy.record.tape import Tape
from brownout.proxy.relay import RELAY_HEADER, Relay
from brownout.proxy.responses import ResponseHooks
from brownout.proxy.sessions import proxy_auth_user
from brownout.proxy.tlstickets import TicketHold
from brownout.proxy.tokenshield import MISDIRECTED, TokenShield
from brownout.proxy.unreachable import Unreachable
from brownout.proxy.watch import ConfigWatcher

__all__ = ["Brownout"]

Later = Callable[[Callable[[Exchange], None], Exchange], None]  # schedules an exchange's completion

log = logging.getLogger(__name__)

# A request larger than proxy.buffer_max_bytes streams upstream before the request hook runs.
_STREAMED = "the request streamed to the server before brownout could hold it (larger than proxy.buffer_max_bytes)"


class Brownout(Lifecycle, ResponseHooks):
    """Chaos proxy addon: faults, exchange model, spans, invariants, exporters."""

    def __init__(
        self,
        *,
        config: BrownoutConfig | None = None,
        config_path: str | None = None,
        on_exchange: Callable[[Exchange], None] | None = None,
    ) -> None:
        """`config` alone: a fixed config (no file, no hot reload). With `config_path`: `config` is that
        file already loaded (off the event loop), and the file is watched."""
        self.guard = Guard()
        self._fixed = config is not None and config_path is None
        self._loaded_path = config_path  # brownout_config pointing here needs no second parse
        self.config = config or BrownoutConfig()
        self.pipeline = Pipeline(self.config, self.guard)
        if on_exchange is not None:
            self.pipeline.listeners.append(on_exchange)
        self.engine = FaultEngine(self.config.ruleset, guard=self.guard)
        # Decisions go to whichever exporters the pipeline has now (they are rebuilt before start).
        self.engine.decisions.add_sink(lambda d: self.pipeline.exporters.on_decision(d))
        # Bound to mitmproxy's loop in running(); other threads go through it, and see every exchange
        # whose answer was sent (its bookkeeping may still wait for an idle moment: proxy/idlework.py).
        self.on_loop = LoopRunner(before=self.pipeline.complete_deferred_now)
        self.options: Any = None  # this proxy's mitmproxy options, from load()
        self._reloading = threading.Lock()
        self.started = asyncio.Event()  # running() is done: endpoints bound, or start_error says why not
        self.start_error: str | None = None
        self.control: Any = None
        self.fleet: Fleet | None = None  # built from config.state when the proxy runs (proxy/fleet.py)
        self.overlay: PhaseOverlay | None = None  # an experiment's phase, from start (proxy/overlay.py)
        self.relay: Relay | None = None
        self.watcher: ConfigWatcher | None = None
        self.heap_owned = False
        self._reloading = threading.Lock()
        self._states: dict[str, FlowState] = {}
        self.mcp_streams = McpStreams()  # open MCP subscription streams, by session
        self.mcp_versions = McpVersions()  # the version each MCP session negotiated
        self._conn_users: dict[str, str] = {}  # client connection id -> proxy username (from CONNECT)
        self._stream_above = human.parse_size(self.config.proxy.stream_large_bodies) or 0
        self._buffer_max = human.parse_size(self.config.proxy.buffer_max_bytes) or 0
        self._ignored = HostGlobs(self.config.proxy.ignore_hosts)
        self._secret_headers = SecretHeaders(self.config.proxy.secret_headers)
        self._shield = TokenShield(self.config.control.resolve_token())
        self.tape = Tape(
            self.guard,
            on_replay=lambda outcome: self.pipeline.exporters.on_replay(outcome),
            on_recorded=lambda written, dropped: self.pipeline.exporters.on_recorded(written, dropped),
        )
        self.engine.decisions.add_sink(self.tape.on_decision)  # a replay miss names a fault fired before it
        self.tape.secret_headers = self._secret_headers
        self.limits = ClientLimits(
            self.config.proxy, on_cut=lambda reason: self.pipeline.exporters.on_client_cut(reason)
        )
        self.admission = Admission(
            self.config.proxy, self.guard, on_wait=lambda seconds: self.pipeline.exporters.on_admission_wait(seconds)
        )
        self.unreachable = Unreachable(
            self.guard, on_error=lambda host, kind: self.pipeline.exporters.on_upstream_error(host, kind)
        )
        self.realtime = Realtime(self)  # WebSocket sessions: realtime formats' faults, spans, invariants
        # mitmproxy sub-addons: their hooks run after this addon's, in this order (a connection is
        # admitted before the header timeout starts counting).
        self.addons = [self.admission, self.limits, self.unreachable, self.realtime, TicketHold()]

    @property
    def in_flight(self) -> int:
        """Exchanges between their request hook and their response or error (graceful drain waits on it)."""
        return len(self._states)

    # --- connection identity ---------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # For HTTPS, Proxy-Authorization travels only on the CONNECT: remember it per connection.
        user = proxy_auth_user(flow.request.headers.get("proxy-authorization"))
        if user:
            self._conn_users[flow.client_conn.id] = user

    def client_disconnected(self, client: Any) -> None:
        self._conn_users.pop(client.id, None)

    # --- request ---------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self._shield.intercept(flow):  # the control token: dropped here, the request answered in request()
            return
        if not self._ignored.globs or not self._ignored(flow.request.pretty_host):
            return  # no globs: no host to work out (pretty_host IDNA-encodes it, per request)
        # Not the agent's traffic: both bodies stream through, and no hook below looks at it again.
        flow.metadata[IGNORED] = True
        flow.request.stream = True
        flow.request.headers.pop("proxy-authorization", None)  # brownout's credential, never forwarded
        self.pipeline.exporters.on_ignored()

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or not flow.live or RELAY_HEADER in flow.request.headers:
            return
        if flow.metadata.get(IGNORED):  # proxy.ignore_hosts
            return
        if flow.metadata.get(MISDIRECTED):
            self._shield.answer(flow)
            return
        body = await self._request_body(flow)
        # No raw path in a context: it can carry a secret (the exchange's path, once there is one, is redacted).
        host = flow.request.pretty_host  # parses the authority: once per request, not per use
        where = f"{flow.request.method} {host}"
        state = self.guard.call("exchange", self._begin, flow, body, host, context=where)
        if state is None:
            return
        self._states[flow.id] = state
        plan = state.plan
        if plan is not None and plan.pending:
            # A fleet's shared store decides these rules: one round trip, within the store's budget. When
            # their faults act only on the answer, the request goes upstream meanwhile (see _decide).
            if plan.decided_in_flight and not websocket_handshake(state.exchange):
                state.deciding = asyncio.ensure_future(self._decide(state, plan))
            elif await self._decide(state, plan):
                plan = None
        inbox = self._listen_inbox(state)
        if plan is None:
            if not self.tape.on_request(flow, state, body) and inbox is not None:
                self._route_listen(flow, state, StreamTiming(), inbox)
            return
        streamed = _STREAMED if flow.request.stream else None
        action = await self.guard.acall("engine", functools.partial(plan.before_upstream, sent=streamed))
        if isinstance(action, Respond | Reset):
            for scope in self.guard.call("engine", plan.cuts_streams, default=None) or ():
                why = f"the {scope} went away ({_rules(state.exchange)})"
                self.mcp_streams.cut(state.exchange, scope, why)
        if isinstance(action, Respond):
            flow.response = http.Response.make(action.status, action.body, action.headers)
        elif isinstance(action, Reset):
            effects.reset(flow, self.guard)
        elif isinstance(action, Hang):
            await effects.hang(flow, action.duration_s, self.guard)
        else:
            if plan.edits_request():
                if isinstance(body, bodies.Uninspected):
                    self.guard.call("engine", plan.skip_request_faults, f"request: {body.detail}")
                else:
                    sent = await self.guard.acall(
                        "engine", effects.edit_request, flow, plan, body, context=f"{where}{state.exchange.path}"
                    )
                    body = body if sent is None else sent  # what the request now carries: recorded as such
            state.timing = self.guard.call("engine", plan.stream_timing)
            for method in self.guard.call("engine", plan.announcements, default=None) or ():
                self.mcp_streams.announce(state.exchange.session, method)
            if self.tape.on_request(flow, state, body):  # answered from a cassette, or a replay miss
                return
            timing = state.timing
            paced = timing is not None and timing.paced
            clock = self.tape.upstream_clock(flow, state, paced=paced)
            if (paced or clock is not None or inbox is not None) and self.relay:
                self._route_listen(flow, state, timing or StreamTiming(), inbox, on_upstream=clock)

    async def _decide(self, state: FlowState, plan: Plan) -> bool:
        """The store decides the plan's pending rules; True when nothing is left of the plan (it is dropped)."""
        await self.guard.acall("engine", self.engine.settle, plan, context=f"exchange {state.exchange.id}")
        if plan.empty and state.plan is plan:
            state.plan = None
        return state.plan is None

    def _listen_inbox(self, state: FlowState) -> asyncio.Queue[bytes] | None:
        """A queue for announcements onto a 2026-07-28 listen stream, when a rule may make one (a rug pull)."""
        ex = state.exchange
        if ex.operation != LISTEN or ex.provider != "mcp" or self.relay is None:
            return None
        if not any(rule.fault_type == RugPullFault.type for rule in self.config.ruleset.rules):
            return None
        return asyncio.Queue(LISTEN_INBOX_MAX)

    def _route_listen(
        self,
        flow: http.HTTPFlow,
        state: FlowState,
        timing: StreamTiming,
        inbox: asyncio.Queue[bytes] | None,
        *,
        on_upstream: Callable[[bytes], None] | None = None,
    ) -> None:
        """Through the relay (pacing, a recording's clock, events put onto a listen stream)."""
        if self.relay is None:
            return
        state.relay_token = effects.route_to_relay(
            flow, self.relay, timing, self.guard, on_upstream=on_upstream, inbox=inbox
        )
        if state.relay_token is not None and inbox is not None:
            self.mcp_streams.attach(state.exchange, inbox)

    async def _request_body(self, flow: http.HTTPFlow) -> bytes | bodies.Uninspected:
        """The request body decoded for recognition (bounded: a compression bomb is not inflated)."""
        if flow.request.stream:
            return b""
        body = await self.guard.acall("exchange", bodies.decoded, flow.request, self._buffer_max)
        return b"" if body is None else body

    def _begin(self, flow: http.HTTPFlow, body: bytes | bodies.Uninspected, host: str | None = None) -> FlowState:
        user = proxy_auth_user(flow.request.headers.get("proxy-authorization")) or self._conn_users.get(
            flow.client_conn.id
        )
        # The proxy credential is for brownout only; never forward it.
        flow.request.headers.pop("proxy-authorization", None)
        cap = self.config.proxy.capture_max_bytes
        problem = body if isinstance(body, bodies.Uninspected) else None
        plain = body if isinstance(body, bytes) else b""
        exchange, body, headers = flowmodel.new_exchange(flow, user, cap, plain, self._secret_headers, host=host)
        if problem is not None:  # forwarded untouched; recognised from its path and headers only
            exchange.mark_uninspected(problem.reason, f"request: {problem.detail}")
            exchange.request_bytes = len(flow.request.raw_content or b"")
        # A format whose recognise() raises is skipped; the guard still logs and counts it.
        on_error = lambda fmt, e: self.guard.failed("wire", e, f"{fmt.provider} recognise {exchange.path}")
        info = flowmodel.request_info(flow, headers, body, host=exchange.host)
        wire, operation = self.config.catalogue.wire.detect(info, on_error)
        exchange.provider, exchange.operation = wire.provider, operation
        self.guard.call("wire", wire.parse_request, exchange, body, context=f"{wire.provider} request")
        if exchange.provider == "mcp":
            self.mcp_versions.fill(exchange)
            cut = lambda: effects.drop(flow, self.guard, now=True)
            self.guard.call("exchange", self.mcp_streams.begin, exchange, cut, context="mcp streams")
        plan = self.guard.call("engine", self.engine.plan, exchange, wire, context=f"exchange {exchange.id}")
        if plan is not None and plan.empty:
            plan = None
        return FlowState(exchange=exchange, wire=wire, plan=plan)

    def cut_in_flight(self) -> int:
        """Record every exchange still in flight as cut by shutdown (`error.type` shutdown), with what
        arrived so far; their connections' later hooks find nothing left to record. Returns how many."""
        states, self._states = self._states, {}
        now = time.time()
        for state in states.values():
            ex = state.exchange
            ex.error_type, ex.error_message = SHUTDOWN, "cut by brownout shutdown"
            ex.timings.end = now
            self.tape.on_cut(state, ex.error_message)
            self._close(state, defer=False)
        return len(states) + self.realtime.cut_all()

    def _close(self, state: FlowState, *, defer: bool = True, later: Later | None = None) -> None:
        deciding = state.deciding
        if deciding is not None and not deciding.done():
            if defer:  # its decisions belong to the exchange: it ends once they are in (within the store's budget)
                deciding.add_done_callback(lambda _: self._close(state, defer=defer, later=later))
                return
            deciding.cancel()  # shutdown: the exchange ends now, its pending rules undecided
        if state.relay_token and self.relay is not None:
            self.relay.discard(state.relay_token)
        if state.exchange.operation in SUBSCRIPTION_STREAMS:
            self.mcp_streams.end(state.exchange)
        if state.tap is not None and state.tap.parses_later and defer and later is None:
            # Its copy is parsed when the exchange completes, at the loop's next idle moment (see _complete).
            self._complete(state, defer=defer, prepare=state.tap.close)
        elif state.tap is not None:
            # A compressed stream's copy may still be parsing (in slices, on this loop): the
            # exchange completes once it is done (at shutdown at once, with what was parsed).
            state.tap.close(lambda: self._complete(state, defer=defer, later=later), wait=defer)
        else:
            self._complete(state, defer=defer, later=later)

    def _complete(
        self, state: FlowState, *, defer: bool, later: Later | None = None, prepare: Callable[[], None] | None = None
    ) -> None:
        """`later` schedules the deferred part (by default, the loop's next idle moment); `prepare` runs just
        before it (nothing before it may read what `prepare` fills in)."""
        if state.exchange.mcp_method == "initialize":
            self.mcp_versions.learn(state.exchange)
        if state.plan is not None:
            self.guard.call("engine", state.plan.finish)
        self.tape.finish(state, state.exchange.timings.end)
        if not defer:
            self.pipeline.complete(state.exchange)
            return
        if later is not None:
            later(self.pipeline.complete, state.exchange)
            return
        # After this hook returns mitmproxy writes the response. Spans, invariants and metrics run
        # on the same loop when it next waits for I/O, after the client's next request has been read
        # and forwarded (proxy/idlework.py): they never add to the agent's latency.
        try:
            self.pipeline.complete_later(state.exchange, prepare)
        except RuntimeError:  # no running loop (driven synchronously, e.g. by a test harness)
            if prepare is not None:
                prepare()
            self.pipeline.complete(state.exchange)


def _rules(exchange: Exchange) -> str:
    return "brownout rule " + ", ".join(dict.fromkeys(f.rule for f in exchange.faults))
