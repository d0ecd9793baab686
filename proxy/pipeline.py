"""What happens to a finished exchange: span, invariants, exporters, listeners.

Order per exchange: price it (tokens -> currency) -> build the span (attributes, fault events) -> run span- and session-level
invariants on it -> add violation events and end it (BatchSpanProcessor ships it off-loop)
-> metrics and logs -> listeners. Each step is contained by the guard: traffic first.

With a shared session store (`state.backend: redis`) the invariant checks take a round trip: from
the checks on, an exchange's steps run as an async job (proxy/fleet_sessions.py), in order per
session, after the response as before. With `proxy.analysis: process` an exchange is priced, counted,
logged and handed to the listeners here at once, and its span and checks run in a child process
(proxy/analysis.py), whose violations are exported and announced here when they come.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.joined_trace import JoinedTrace
from brownout.core.spans import ExchangeSpan, SpanBuilder
from brownout.core.wire.otlp import PROVIDER as OTLP
from brownout.core.wire.otlp import SPANS_NOTE
from brownout.exporters.hub import Exporters
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner
from brownout.proxy.agent_config import AgentSpansConfig
from brownout.proxy.agent_join import AgentJoin
from brownout.proxy.analysis import AnalysisProcess
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.fleet_sessions import FleetSessions
from brownout.proxy.idlework import IdleWork

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 1.0
SETTLE_WAIT_S = 1.0


class Pipeline:
    """Runs every consumer of finished exchanges, each contained by the guard."""

    def __init__(self, config: BrownoutConfig, guard: Guard) -> None:
        self.guard = guard
        self.listeners: list[Callable[[Exchange], None]] = []
        self.violation_listeners: list[Callable[[Violation], None]] = []
        self._started = False
        self.prices_loaded = threading.Event()  # the price table is in memory (or failed to load)
        self._last_sweep = time.monotonic()
        self._deferred = 0  # finished exchanges waiting for an idle moment of the loop (complete_later)
        self._loop_thread: int | None = None  # the thread of the loop that completes them
        self.pricer = Pricer()
        self.fleet: FleetSessions | None = None  # built at start with state.backend redis
        self.analysis: AnalysisProcess | None = None  # started at start with proxy.analysis process
        self._sweeping: asyncio.Task[None] | None = None
        self._build(config)

    def _build(self, config: BrownoutConfig) -> None:
        self._config = config
        catalogue = config.catalogue
        self.exporters = Exporters(
            config.exporters, guard=self.guard, extra=catalogue.exporters, providers=catalogue.wire.providers
        )
        # What reads the exporters (a scrape, a log flush, the control API) sees the exchanges whose answers
        # were sent: their bookkeeping waits for an idle moment of the loop, at most idlework.MAX_S.
        self.exporters.settle = lambda: self.wait_completed(SETTLE_WAIT_S)
        self.spans = SpanBuilder(
            self.exporters.tracer_provider, capture_content=config.proxy.capture_content, semconv=self.exporters.semconv
        )
        self.invariants = InvariantRunner(
            config.invariants, guard=self.guard, types=catalogue.invariants, idle_s=config.proxy.session_idle_s
        )
        # The agent's own spans are kept and joined when asked for, or when an invariant needs both sides.
        settings = config.agent_spans or (AgentSpansConfig() if self.invariants.wants_traces else None)
        self.join: AgentJoin | None = None
        if settings is not None:
            self.join = AgentJoin(
                settings,
                guard=self.guard,
                release=lambda ex: self.guard.call("spans", self._complete, ex, context=f"exchange {ex.id}"),
                judge=lambda trace: self.guard.call("invariants", self._judge, trace, context="agent spans"),
                count=self.exporters.on_agent_spans,
            )

    def reload(self, config: BrownoutConfig) -> None:
        """Before start: rebuild everything. After: new invariants and content capture only;
        exporter endpoints and listen addresses take a restart (they own sockets and threads)."""
        if not self._started:
            self.exporters.shutdown(timeout_s=0.1)
            self._build(config)
            return
        self.invariants.reload(config.invariants, config.catalogue.invariants)
        self.spans.capture_content = config.proxy.capture_content
        if self.analysis is not None:
            self.analysis.reload(config)

    @property
    def _remote(self) -> AnalysisProcess | None:
        """The analysis process while it judges; None inline (or once it is gone)."""
        analysis = self.analysis
        return analysis if analysis is not None and analysis.alive else None

    @property
    def judging(self) -> int:
        """Finished exchanges not completed yet (waiting for an idle moment of the loop) or that the analysis
        process has not answered yet; read from any thread."""
        analysis = self._remote
        return self._deferred + (analysis.backlog if analysis is not None else 0)

    def wait_judged(self, timeout_s: float = 10.0) -> bool:
        """From another thread than the proxy's: wait (bounded) until every finished exchange has been
        completed and judged and its violations announced; True when they have."""
        return _wait(lambda: self.judging == 0, timeout_s)

    def wait_completed(self, timeout_s: float = 10.0) -> bool:
        """From another thread than the proxy's: wait (bounded) until every finished exchange has been
        counted, logged and handed to the listeners (judged too, inline); True when they have."""
        if threading.get_ident() == self._loop_thread:
            return self._deferred == 0  # the loop cannot complete them while it waits here
        return _wait(lambda: self._deferred == 0, timeout_s)

    @property
    def sessions_active(self) -> int:
        """Sessions open now: the analysis process's count while it judges, else this process's."""
        analysis = self._remote
        return analysis.sessions_active if analysis is not None else self.invariants.sessions_active

    @property
    def needs_spans(self) -> bool:
        """Spans cost ~30 us each: build them only when something reads or exports them."""
        return (
            bool(self.invariants.invariants)
            or self.exporters.otlp is not None
            or self.exporters.span_consumers > 0
            or self.join is not None
        )

    def complete_later(self, exchange: Exchange, prepare: Callable[[], None] | None = None) -> None:
        """On the loop: complete the exchange at the loop's next idle moment (proxy/idlework.py), so the
        client's next request is read and forwarded first; on a loop without a selector, on its next turn.
        `prepare` runs first, at that moment (parsing a streamed body's copy, see proxy/inspection.py)."""
        loop = asyncio.get_running_loop()
        work = IdleWork.of(loop)
        self._loop_thread = threading.get_ident()
        self._deferred += 1
        if work is None:
            loop.call_soon(self._complete_deferred, exchange, prepare)
        else:
            work.add(self._complete_deferred, exchange, prepare)

    def _complete_deferred(self, exchange: Exchange, prepare: Callable[[], None] | None = None) -> None:
        try:
            if prepare is not None:
                self.guard.call("wire", prepare, context=f"exchange {exchange.id} body")
            self.complete(exchange)
        finally:
            self._deferred -= 1  # after: a thread that waits for the count sees the exchange complete

    def complete_deferred_now(self) -> None:
        """On the loop: complete at once every exchange this pipeline has waiting (at shutdown, and before a
        call another thread sends onto the loop)."""
        try:
            work = IdleWork.of(asyncio.get_running_loop())
        except RuntimeError:
            return
        if work is not None:
            work.run_now(lambda item: item[1] == self._complete_deferred)

    def complete(self, exchange: Exchange) -> None:
        if exchange.provider == OTLP:
            self._telemetry(exchange)
            return
        if self.join is not None and self.guard.call("spans", self.join.admit, exchange, default=False):
            return  # waits for the agent span it belongs to; the join releases it into _complete
        analysis = self._remote
        if analysis is not None:
            # Counted and logged here and now; its span and violations come from the analysis process.
            self._price(exchange)
            if not analysis.submit(exchange):
                self.exporters.on_checks_dropped()
            self._finish(exchange, None, [])
            return
        self._complete(exchange)

    def _analysis_lost(self, unready: list[Exchange], unjudged: int) -> None:
        """The analysis process is gone: judge from now on here. What it never started on is judged here
        (its metrics and logs were written when it finished); what it had unjudged is counted."""
        self.analysis = None
        if unjudged:
            self.exporters.on_checks_dropped(unjudged)
        for exchange in unready:
            self._export(self.invariants.check_exchange(self.spans, exchange))

    def _telemetry(self, exchange: Exchange) -> None:
        """An OTLP export crossing the proxy: the agent's telemetry, not its work. Its spans go to the join;
        it is counted and logged as an exchange, and no span or invariant looks at it."""
        spans = exchange.notes.pop(SPANS_NOTE, None)
        if spans and self.join is not None and not self.join.own_receiver(exchange.host, exchange.port):
            self.guard.call("spans", self.join.receive, spans, "proxy", context="intercepted OTLP export")
        self.exporters.on_exchange(exchange, [])
        for listener in self.listeners:
            self.guard.call("listener", listener, exchange, context=f"exchange {exchange.id}")

    def _judge(self, trace: JoinedTrace) -> None:
        """The invariants that need both sides, on a settled trace; each violation also becomes a span under
        the span it is about (the wire call's, or the agent's)."""
        found = self.invariants.check_trace(trace)
        for violation in found:
            self.spans.late_violation(violation)
        self._export(found)

    def _price(self, exchange: Exchange) -> None:
        if exchange.cost is None:
            exchange.cost = self.guard.call("cost", self.pricer.price, exchange, context=f"exchange {exchange.id}")

    def _complete(self, exchange: Exchange) -> None:
        self._price(exchange)
        violations: list[Violation] = []
        if not self.needs_spans:
            self.invariants.check_without_span(exchange)  # keeps the session count current
            span = None
        else:
            span = self.guard.call("spans", self.spans.start, exchange, context=f"exchange {exchange.id}")
        if span is not None:
            if self.fleet is not None and self.invariants.invariants:
                self._check_shared(self.fleet, span, exchange)
                return
            violations = self.guard.call("invariants", self.invariants.check, span, exchange, default=[]) or []
        self._finish(exchange, span, violations)

    def _finish(self, exchange: Exchange, span: ExchangeSpan | None, violations: list[Violation]) -> None:
        if span is not None:
            self.guard.call("spans", self.spans.finish, span, violations, context=f"exchange {exchange.id}")
            if self.join is not None:
                self.guard.call("spans", self.join.record, exchange, span, context=f"exchange {exchange.id}")
        self.exporters.on_exchange(exchange, violations)
        for listener in self.listeners:
            self.guard.call("listener", listener, exchange, context=f"exchange {exchange.id}")
        self._announce(violations)
        if self.analysis is None and time.monotonic() - self._last_sweep >= SWEEP_EVERY_S:
            self.sweep()

    def _check_shared(self, fleet: FleetSessions, span: ExchangeSpan, exchange: Exchange) -> None:
        """The checks on the fleet's session, as a job after this one; then the rest of the exchange's steps."""

        async def job() -> None:
            found: list[Violation] = await self.guard.acall("invariants", fleet.checks.check, span, exchange) or []
            self._finish(exchange, span, found)

        if not fleet.jobs.submit(exchange.session, job):
            self.exporters.on_checks_dropped()
            self._finish(exchange, span, [])

    def sweep(self, *, close_all: bool = False) -> list[Violation]:
        """Close idle sessions (or all, at shutdown): their session-end violations are exported.

        With a shared store the fleet's idle sessions are claimed in a task (their violations are
        exported when it ends, not returned); at shutdown only those changed here alone are closed."""
        self._last_sweep = time.monotonic()
        fleet = self.fleet
        if fleet is None:
            fn: Any = self.invariants.close_all if close_all else self.invariants.sweep
        elif close_all:
            fn = fleet.checks.close_all
        else:
            if self._sweeping is None or self._sweeping.done():
                self._sweeping = self.guard.call("invariants", _task, self._sweep_shared(fleet))
            return []
        found: list[Violation] = self.guard.call("invariants", fn, default=[]) or []
        self._export(found)
        return found

    async def _sweep_shared(self, fleet: FleetSessions) -> None:
        self._export(await self.guard.acall("invariants", fleet.checks.sweep, default=[]) or [])

    def _export(self, violations: list[Violation]) -> None:
        for violation in violations:
            self.exporters.on_violation(violation)
        self._announce(violations)

    def _announce(self, violations: list[Violation]) -> None:
        for violation in violations:
            for listener in self.violation_listeners:
                self.guard.call("listener", listener, violation, context=f"violation {violation.invariant}")

    def start(self, *, rules: Callable[[], Any], link: RedisLink | None = None) -> None:
        """On the proxy's loop: exporters, and the shared session store on the proxy's own link to the
        fleet's store (proxy/fleet.py) when state.backend is redis."""
        self._started = True
        if link is not None:
            self.fleet = FleetSessions(self.invariants, link, idle_s=self._config.proxy.session_idle_s)
        elif self._config.proxy.analysis == "process":
            self._start_analysis()
        # Off the loop: loading the price table takes a moment that traffic should not wait for.
        threading.Thread(target=self._warm_prices, name="brownout-prices", daemon=True).start()
        self.exporters.watch(sessions=lambda: self.sessions_active, rules=rules)
        self.exporters.start()
        if self.join is not None:
            self.join.start()

    def _start_analysis(self) -> None:
        if not self.needs_spans:
            return  # nothing to judge or export
        if self.join is not None or self.exporters.span_consumers:
            # An invariant that needs the agent's spans, or a plugin reading brownout's, needs them here.
            log.warning("proxy.analysis 'process' needs every span consumer in that process; judging inline")
            return
        analysis = AnalysisProcess(
            self._config,
            guard=self.guard,
            found=self._export,
            lost=self._analysis_lost,
            dropped=lambda n: self.exporters.metrics.export_dropped("otlp", n),
        )
        try:
            analysis.start()
        except Exception as exc:  # noqa: BLE001 - no child (fork refused, no interpreter): inline, as before
            self.guard.failed("analysis", exc, "starting the analysis process; judging inline", trace=False)
            return
        self.analysis = analysis
        self.exporters.otlp_elsewhere = lambda: analysis.otlp_exported

    async def start_receiver(self) -> None:
        """On the loop, after start: the OTLP receiver, when `agent_spans.receiver` is set."""
        if self.join is not None:
            otlp = self.exporters.otlp.settings if self.exporters.otlp is not None else None
            await self.join.start_receiver(otlp, self.exporters.on_otlp_forward)

    def _warm_prices(self) -> None:
        try:
            self.guard.call("cost", self.pricer.warm)
        finally:
            self.prices_loaded.set()

    async def stop(self, timeout_s: float = 3.0) -> None:
        """On the loop, before shutdown: calls waiting for their agent span go on, held traces are judged, and
        the shared-session checks still queued finish (bounded) or are counted."""
        self.complete_deferred_now()
        if self.join is not None:
            await self.join.stop_receiver()
            self.guard.call("spans", self.join.stop, context="agent spans at shutdown")
        if self.analysis is not None:
            await self.analysis.close(timeout_s)
            self.analysis = None
        fleet = self.fleet
        if fleet is None:
            return
        if self._sweeping is not None:
            await asyncio.wait([self._sweeping], timeout=timeout_s)
        left = await fleet.close(timeout_s)
        if left:
            self.exporters.on_checks_dropped(left)

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Close every session, flush spans and logs with a bounded wait."""
        self.complete_deferred_now()
        self.sweep(close_all=True)
        self.exporters.shutdown(timeout_s=timeout_s)


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _task(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    try:
        return asyncio.get_running_loop().create_task(coro)
    except RuntimeError:
        coro.close()  # no running loop (driven synchronously): nothing to sweep on
        raise
