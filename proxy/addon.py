"""The brownout mitmproxy addon: the only layer that touches mitmproxy flows.

Hooks build an `Exchange` per flow, ask the fault engine for a plan, apply the plan's
effects at each phase, parse the response (streamed ones chunk by chunk, without
buffering), and hand the finished exchange to the pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.utils import human

from brownout.core.exchange import SHUTDOWN, Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import WireFormat
from brownout.core.wire.framing import Framer, framer_for
from brownout.faults.base import Hang, Reset, Respond, StreamTiming
from brownout.faults.engine import FaultEngine
from brownout.faults.plan import Plan
from brownout.proxy import bodies, effects, flowmodel
from brownout.proxy.clientlimits import ClientLimits
from brownout.proxy.config import BrownoutConfig, with_listen_overrides
from brownout.proxy.configload import ConfigError, load_config
from brownout.proxy.connkill import drop_client, is_multiplexed
from brownout.proxy.control_link import start_control
from brownout.proxy.ignore import IGNORED, HostGlobs
from brownout.proxy.onloop import LoopRunner
from brownout.proxy.pipeline import Pipeline
from brownout.proxy.record import config as cassette_options
from brownout.proxy.record.cassette import CassetteError
from brownout.proxy.record.tape import Tape
from brownout.proxy.relay import RELAY_HEADER, Relay
from brownout.proxy.sessions import proxy_auth_user
from brownout.proxy.streaming import StreamTap
from brownout.proxy.tokenshield import MISDIRECTED, TokenShield
from brownout.proxy.watch import ConfigWatcher

__all__ = ["Brownout"]

log = logging.getLogger(__name__)


def _option(name: str) -> str:
    """A brownout option's value, or "" outside a running mitmproxy (e.g. in unit tests)."""
    try:
        return str(getattr(ctx.options, name) or "")
    except (AttributeError, KeyError):
        return ""


@dataclass(slots=True)
class FlowState:
    """Per-flow state, keyed by flow.id (never in flow.metadata, which is deep-copied)."""

    exchange: Exchange
    wire: WireFormat
    plan: Plan | None = None  # None when no rule fired
    timing: StreamTiming | None = None
    relay_token: str | None = None
    tap: StreamTap | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Brownout:
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
        self.on_loop = LoopRunner()  # bound to mitmproxy's loop in running(); other threads go through it
        self.started = asyncio.Event()  # running() is done: endpoints bound, or start_error says why not
        self.start_error: str | None = None
        self.control: Any = None
        self.relay: Relay | None = None
        self.watcher: ConfigWatcher | None = None
        self._states: dict[str, FlowState] = {}
        self._conn_users: dict[str, str] = {}  # client connection id -> proxy username (from CONNECT)
        self._stream_above = human.parse_size(self.config.proxy.stream_large_bodies) or 0
        self._buffer_max = human.parse_size(self.config.proxy.buffer_max_bytes) or 0
        self._ignored = HostGlobs(self.config.proxy.ignore_hosts)
        self._shield = TokenShield(self.config.control.resolve_token())
        self.tape = Tape(
            self.guard,
            on_replay=lambda outcome: self.pipeline.exporters.on_replay(outcome),
            on_recorded=lambda written, dropped: self.pipeline.exporters.on_recorded(written, dropped),
        )
        self.limits = ClientLimits(
            self.config.proxy, on_cut=lambda reason: self.pipeline.exporters.on_client_cut(reason)
        )
        self.addons = [self.limits]  # a mitmproxy sub-addon: its hooks run after this addon's

    @property
    def in_flight(self) -> int:
        """Exchanges between their request hook and their response or error (graceful drain waits on it)."""
        return len(self._states)

    # --- lifecycle -------------------------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option("brownout_config", str, "", "Path of the brownout chaos config (YAML); empty: defaults.")
        loader.add_option(
            "brownout_reload_s", int, 1, "Seconds between checks of the config file for hot reload; 0: off."
        )
        loader.add_option(
            "brownout_metrics_listen", str, "", "Overrides exporters.prometheus.listen (host:port; port 0 picks one)."
        )
        loader.add_option("brownout_control_listen", str, "", "Overrides control.listen (host:port; port 0 picks one).")
        cassette_options.add_options(loader)

    def configure(self, updated: set[str]) -> None:
        path = ctx.options.brownout_config
        if "brownout_config" in updated and not self._fixed and path and path != self._loaded_path:
            try:
                self.apply_config(load_config(ctx.options.brownout_config))
            except (ConfigError, CassetteError, OSError, ValueError) as e:
                raise exceptions.OptionsError(str(e)) from e
        elif updated & {"brownout_metrics_listen", "brownout_control_listen", *cassette_options.OPTIONS}:
            try:
                self.apply_config(self.config)
            except (CassetteError, OSError, ValueError) as e:
                raise exceptions.OptionsError(str(e)) from e
        # mitmproxy's own limit applies to requests too: keep it high so a long-context or image
        # request is still buffered, recognised and faulted; responses stream from our threshold.
        if updated & {"stream_large_bodies", "brownout_config"} and ctx.options.stream_large_bodies is None:
            ctx.options.update(stream_large_bodies=self.config.proxy.buffer_max_bytes)

    async def running(self) -> None:
        self.on_loop.loop = asyncio.get_running_loop()
        try:
            self.relay = Relay(verify=self._upstream_verify())
            await self.relay.start()
            await self.tape.start()
            self.pipeline.start(rules=self.engine.active_rules)
            self.pipeline.exporters.watch(client_connections=lambda: self.limits.open)
            self.control = start_control(self)
            self._shield.control_url = self.control.url if self.control is not None else ""
        except OSError as e:
            # An endpoint that was asked for and cannot bind: say which, and do not run without it.
            self.start_error = str(e)
            log.error("brownout cannot start: %s", e)
            ctx.master.shutdown()
            return
        finally:
            self.started.set()
        path = ctx.options.brownout_config
        if path and not self._fixed and ctx.options.brownout_reload_s > 0:
            self.watcher = ConfigWatcher(path, self.reload_from_file, interval_s=ctx.options.brownout_reload_s)
            self.watcher.start()

    async def done(self) -> None:
        self.cut_in_flight()  # recorded before the exporters close; their connections die with the loop
        if self.watcher is not None:
            self.watcher.stop()
        if self.control is not None:
            self.guard.call("control", self.control.stop)
        if self.relay is not None:
            await self.relay.stop()
        await self.tape.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.tape.close, 3.0)
        # Bounded: an unreachable collector must not hold shutdown for the SDK's 30 s.
        await asyncio.get_running_loop().run_in_executor(None, self.pipeline.shutdown, 3.0)

    def apply_config(self, config: BrownoutConfig) -> None:
        """Switch to a validated config; new exchanges use it."""
        config = with_listen_overrides(config, _option("brownout_metrics_listen"), _option("brownout_control_listen"))
        config = cassette_options.with_cassette_overrides(config, _option)
        self.tape.configure(config.record, config.replay, config.catalogue.wire)  # raises before anything changes
        self.config = config
        self.engine.reload(config.ruleset)
        self.pipeline.reload(config)
        self._stream_above = human.parse_size(config.proxy.stream_large_bodies) or 0
        self._buffer_max = human.parse_size(config.proxy.buffer_max_bytes) or 0
        self._ignored = HostGlobs(config.proxy.ignore_hosts)
        self._shield = TokenShield(config.control.resolve_token(), self._shield.control_url)
        self.limits.settings = config.proxy
        if (
            getattr(ctx, "master", None) is not None
            and ctx.options.stream_large_bodies != config.proxy.buffer_max_bytes
        ):
            ctx.options.update(stream_large_bodies=config.proxy.buffer_max_bytes)

    def reload_from_file(self, path: str) -> tuple[bool, str]:
        """Parse and validate `path` here (call it off the loop: YAML, plugins), then apply it on the loop.

        A bad file keeps the last good config; the result says which happened."""
        try:
            config: BrownoutConfig = load_config(path)
        except ConfigError as e:
            log.error("brownout: config reload rejected, keeping the last good config: %s", e)
            return False, f"rejected, keeping the last good config: {e}"
        self.on_loop.call(self.apply_config, config)
        log.info("brownout: config reloaded from %s", path)
        return True, f"reloaded {path}"

    def _upstream_verify(self) -> Any:
        import ssl

        if ctx.options.ssl_insecure:
            return False
        ca = ctx.options.ssl_verify_upstream_trusted_ca
        return ssl.create_default_context(cafile=ca) if ca else True

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
        if not self._ignored(flow.request.pretty_host):
            return
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
        state = self.guard.call("exchange", self._begin, flow, body, context=flow.request.pretty_url)
        if state is None:
            return
        self._states[flow.id] = state
        plan = state.plan
        if plan is None:
            self.tape.on_request(flow, state)
            return
        action = await self.guard.acall("engine", plan.before_upstream)
        if isinstance(action, Respond):
            flow.response = http.Response.make(action.status, action.body, action.headers)
        elif isinstance(action, Reset):
            effects.reset(flow, self.guard)
        elif isinstance(action, Hang):
            await effects.hang(flow, action.duration_s, self.guard)
        else:
            if plan.edits_request() and isinstance(body, bodies.Uninspected):
                self.guard.call("engine", plan.skip_request_faults, f"request: {body.detail}")
            elif plan.edits_request():
                self.guard.call("engine", effects.edit_request, flow, plan, body, context=flow.request.pretty_url)
            state.timing = self.guard.call("engine", plan.stream_timing)
            if self.tape.on_request(flow, state):  # answered from a cassette, or a replay miss
                return
            timing = state.timing
            if timing is not None and (timing.pause_after_events is not None or timing.bytes_per_s) and self.relay:
                state.relay_token = effects.route_to_relay(flow, self.relay, timing, self.guard)

    async def _request_body(self, flow: http.HTTPFlow) -> bytes | bodies.Uninspected:
        """The request body decoded for recognition (bounded: a compression bomb is not inflated)."""
        if flow.request.stream:
            return b""
        body = await self.guard.acall("exchange", bodies.decoded, flow.request, self._buffer_max)
        return b"" if body is None else body

    def _begin(self, flow: http.HTTPFlow, body: bytes | bodies.Uninspected) -> FlowState:
        user = proxy_auth_user(flow.request.headers.get("proxy-authorization")) or self._conn_users.get(
            flow.client_conn.id
        )
        # The proxy credential is for brownout only; never forward it.
        flow.request.headers.pop("proxy-authorization", None)
        cap = self.config.proxy.capture_max_bytes
        problem = body if isinstance(body, bodies.Uninspected) else None
        plain = body if isinstance(body, bytes) else b""
        exchange, body, headers = flowmodel.new_exchange(flow, user, cap, plain)
        if problem is not None:  # forwarded untouched; recognised from its path and headers only
            exchange.mark_uninspected(problem.reason, f"request: {problem.detail}")
            exchange.request_bytes = len(flow.request.raw_content or b"")
        # A format whose recognise() raises is skipped; the guard still logs and counts it.
        on_error = lambda fmt, e: self.guard.failed("wire", e, f"{fmt.provider} recognise {exchange.path}")
        wire, operation = self.config.catalogue.wire.detect(flowmodel.request_info(flow, headers, body), on_error)
        exchange.provider, exchange.operation = wire.provider, operation
        self.guard.call("wire", wire.parse_request, exchange, body, context=f"{wire.provider} request")
        plan = self.guard.call("engine", self.engine.plan, exchange, wire, context=f"exchange {exchange.id}")
        if plan is not None and plan.empty:
            plan = None
        return FlowState(exchange=exchange, wire=wire, plan=plan)

    # --- response --------------------------------------------------------------------

    async def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self._states.get(flow.id)
        if state is None or flow.response is None:
            if flow.response is not None and flow.metadata.get(IGNORED):
                flow.response.stream = True
            return
        ex = state.exchange
        resp = flow.response
        ex.status = resp.status_code
        ex.timings.first_upstream_byte = resp.timestamp_start or time.time()
        ex.response_headers = flowmodel.response_headers(flow)
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
        ex = state.exchange
        resp = flow.response
        if ex.status is None:  # answered in `request` (injected) or by mitmproxy itself
            ex.status = resp.status_code
            ex.response_headers = flowmodel.response_headers(flow)
            ex.content_type = resp.headers.get("content-type", "")
        if not ex.streamed:
            self.tape.on_response(flow, state)  # the body as upstream sent it, before body faults
            await self._finish_buffered(flow, state)
        ex.timings.end = resp.timestamp_end or time.time()
        self._close(state)

    async def _finish_buffered(self, flow: http.HTTPFlow, state: FlowState) -> None:
        ex, resp = state.exchange, flow.response
        assert resp is not None
        body = await self.guard.acall("wire", bodies.decoded, resp, self._buffer_max)
        if isinstance(body, bodies.Uninspected):
            e = body  # too large once decoded, or undecodable: the body passes through untouched, unread
            ex.response_bytes = len(resp.raw_content or b"")
            ex.mark_uninspected(e.reason, e.detail)
            if e.reason == "undecodable":
                ex.parse_error = ex.parse_error or e.detail
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
            edited = self.guard.call("engine", state.plan.edit_body, body, headers, default=body)
            if (
                edited is not None
                and edited != body
                and await self.guard.acall("wire", bodies.set_content, resp, edited)
            ):
                body = edited
            effects.sync_headers(resp, ex.response_headers, headers)
        bodies.parse(state.wire, ex, body, self.guard)
        self._announce(resp, ex)
        ex.timings.first_client_byte = time.time()

    def _announce(self, resp: http.Response, ex: Exchange) -> None:
        if ex.faults and self.config.proxy.announce_faults:
            resp.headers["x-brownout-fault"] = ", ".join(f"{f.rule}:{f.fault}" for f in ex.faults)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self._states.pop(flow.id, None)
        if state is None:
            return
        ex = state.exchange
        self.tape.on_error(flow, state)
        cut = state.tap is not None and state.tap.cut  # a clean truncation ended the read: no error
        if ex.error_type is None and not cut:
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
        self._close(state)

    def _no_response(self, flow: http.HTTPFlow, ex: Exchange) -> None:
        """Upstream gave no response at all; mitmproxy would now answer its own 502 page, which SDKs
        retry as a server error. Without brownout the client's connection would fail instead."""
        if self.config.proxy.upstream_error == "502":
            ex.status, ex.error_type, ex.content_type = 502, None, "text/html"  # what the client will get
        elif flow.server_conn.timestamp_tcp_setup is None:
            effects.reset(flow, self.guard)  # never connected (refused, DNS, TLS): a refusal is a reset
        else:
            self.guard.call("reset", flow.kill)  # upstream hung up unanswered: so does brownout (HTTP/2: the stream)

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
        return len(states)

    def _close(self, state: FlowState, *, defer: bool = True) -> None:
        if state.relay_token and self.relay is not None:
            self.relay.discard(state.relay_token)
        if state.tap is not None:
            # A compressed stream's copy may still be parsing (in slices, on this loop): the
            # exchange completes once it is done (at shutdown at once, with what was parsed).
            state.tap.close(lambda: self._complete(state, defer=defer), wait=defer)
        else:
            self._complete(state, defer=defer)

    def _complete(self, state: FlowState, *, defer: bool) -> None:
        if state.plan is not None:
            self.guard.call("engine", state.plan.finish)
        self.tape.finish(state, state.exchange.timings.end)
        if not defer:
            self.pipeline.complete(state.exchange)
            return
        # After this hook returns mitmproxy writes the response: spans, invariants and metrics
        # run right after that, on the same loop, so they never add to the agent's latency.
        try:
            asyncio.get_running_loop().call_soon(self.pipeline.complete, state.exchange)
        except RuntimeError:  # no running loop (driven synchronously, e.g. by a test harness)
            self.pipeline.complete(state.exchange)
