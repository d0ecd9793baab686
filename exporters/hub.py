"""The one object the addon talks to: it fans exchanges, violations and decisions out to every exporter.

Order of use (see the README's integration notes):

    hub = Exporters(config.exporters, guard=guard)      # builds everything, binds nothing
    builder = SpanBuilder(hub.tracer_provider, semconv=hub.semconv)  # spans go to OTLP when configured
    engine.decisions.add_sink(hub.on_decision)
    hub.watch(sessions=..., rules=engine.active_rules)  # gauges read at scrape time
    hub.start()                                         # binds /metrics
    ... per finished exchange: hub.on_exchange(exchange, violations)
    ... session-level violations: hub.on_violation(v)
    hub.shutdown(timeout_s=3)                           # flush spans and logs, bounded

Every method contains its exporters' failures: they are counted through `guard.failed`
under "exporter:<name>" (which feeds brownout_internal_errors_total) and never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from prometheus_client import CollectorRegistry

from brownout.core import wire
from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.semconv import resolve_semconv
from brownout.exporters.agent_metrics import AgentSpanMetrics
from brownout.exporters.config import ExportersConfig
from brownout.exporters.jsonl import JsonlWriter, exchange_summary
from brownout.exporters.metrics import DecisionLike, Metrics
from brownout.exporters.otlp import OtlpTracing

__all__ = ["Exporters", "ViolationRecord"]

log = logging.getLogger(__name__)


class ViolationRecord(Protocol):
    """What the hub needs from invariants.records.Violation."""

    @property
    def invariant(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def timestamp(self) -> float: ...
    def to_dict(self) -> dict[str, Any]: ...


class Exporters:
    """Prometheus metrics, OTLP traces and JSONL logs behind one fail-open facade."""

    def __init__(
        self,
        config: ExportersConfig | None = None,
        *,
        guard: Guard | None = None,
        registry: CollectorRegistry | None = None,
        environ: Mapping[str, str] | None = None,
        span_exporter: SpanExporter | None = None,
        extra: Sequence[Callable[[], Any]] = (),
        providers: Iterable[str] | None = None,
    ) -> None:
        """`extra`: factories of a config's plugin exporters; each hub calls each once, so a rebuilt
        hub never shares an exporter with the one it replaced. `providers`: the config's wire formats
        (the bounded values of the provider label)."""
        self.config = config or ExportersConfig()
        self.guard = guard or Guard()
        # Called before anything reads what the hub has (a flush of the logs, the kept records, a scrape of
        # /metrics): the proxy waits there, bounded, for the exchanges it has answered and not yet handed in.
        self.settle: Callable[[], object] = lambda: None
        prom = self.config.prometheus
        # This instance's GenAI conventions, for /metrics here and for the pipeline's span builder.
        self.semconv = resolve_semconv(self.config.semconv, environ)
        if self.semconv.key != "pinned":
            log.info("GenAI semantic conventions: %s", self.semconv.release)
        self.metrics = Metrics(
            registry=registry,
            model_allowlist=prom.model_allowlist,
            max_models=prom.max_models,
            providers=wire.BUILTIN.providers if providers is None else providers,
            semconv=self.semconv,
        )
        self.metrics.before_scrape.wait = lambda: self.settle()
        # Contained failures anywhere in brownout (not only here) feed the internal-errors counter.
        self.guard.listeners.append(self.metrics.internal_error)
        self.metrics.gauge_failed = lambda name, exc: self.guard.failed("exporter:prometheus", exc, f"gauge {name}")
        self.agent = AgentSpanMetrics(self.metrics.registry)
        self.metrics_server: Any = None
        self._started = False
        self._closed = False
        self._ring: deque[dict[str, Any]] = deque(maxlen=self.config.recent_violations or None)
        self._exchanges: deque[dict[str, Any]] = deque(maxlen=self.config.recent_exchanges or None)
        self._ring_lock = threading.Lock()  # read by the control API's thread

        settings = self.config.otlp.resolve(environ)
        self.otlp: OtlpTracing | None = None
        if settings is not None:
            self.otlp = OtlpTracing(
                settings, on_dropped=lambda n: self.metrics.export_dropped("otlp", n), exporter=span_exporter
            )
            self.tracer_provider: TracerProvider = self.otlp.provider
            log.info("OTLP traces to %s (%s)", settings.endpoint, settings.protocol)
        else:
            # Spans are still built (invariants read them); they just go nowhere.
            self.tracer_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "brownout"}))

        j = self.config.jsonl
        self.violation_log = self._writer(j.path)
        self.decision_log = self._writer(j.decisions_path)
        self.exchange_log = self._writer(j.exchanges_path)
        self.extra: list[tuple[str, Any]] = []  # (name, exporter) from the plugins' factories
        self.span_consumers = 0  # plugin span processors; OTLP counts separately (self.otlp)
        # Spans another process exported for this hub's proxy (proxy.analysis: process), for GET /status.
        self.otlp_elsewhere: Callable[[], int] | None = None
        for factory in extra:
            self._add_extra(factory)

    def _writer(self, path: str | None) -> JsonlWriter | None:
        if not path:
            return None
        return JsonlWriter(
            path,
            guard=self.guard,
            on_dropped=lambda n: self.metrics.export_dropped("jsonl", n),
            fsync=self.config.jsonl.fsync,
            max_queue_size=self.config.jsonl.max_queue_size,
        )

    def _add_extra(self, factory: Callable[[], Any]) -> None:
        name = str(getattr(factory, "name", None) or getattr(factory, "__name__", None) or "extra")
        # A broken plugin costs its own exporter, not brownout's start.
        exporter = self.guard.call(f"exporter:{name}", self._create, factory, context="creating the exporter")
        if exporter is not None:
            self.extra.append((str(getattr(exporter, "name", None) or name), exporter))

    def _create(self, factory: Callable[[], Any]) -> Any:
        exporter = factory()
        if isinstance(exporter, SpanProcessor):
            self.add_span_processor(exporter)
        return exporter

    def flush_logs(self, timeout_s: float = 5.0) -> bool:
        """Wait until every JSONL record handed over so far is written (or counted as dropped)."""
        self.settle()
        writers = [w for w in (self.violation_log, self.decision_log, self.exchange_log) if w is not None]
        flushed = [w.flush(timeout_s) for w in writers]  # every one, even after one timed out
        return all(flushed)

    def _contain(self, name: str, fn: Callable[..., object], *args: object, level: int = logging.ERROR) -> None:
        self.guard.call(f"exporter:{name}", fn, *args, context=getattr(fn, "__name__", ""), level=level)

    def _fan_out(self, method: str, *args: object) -> None:
        for name, exporter in self.extra:
            fn = getattr(exporter, method, None)
            if fn is not None:
                self._contain(name, fn, *args)

    def add_span_processor(self, processor: SpanProcessor) -> None:
        """Another consumer of brownout's spans (a plugin, a test's in-memory exporter)."""
        self.tracer_provider.add_span_processor(processor)
        self.span_consumers += 1

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Bind the /metrics server (idempotent).

        Raises OSError naming the address when it cannot bind: metrics that were asked for and
        silently missing would leave dashboards and alerts blind, so the proxy does not start."""
        if self._started:
            return
        self._started = True
        prom = self.config.prometheus
        if prom.enabled:
            try:
                self.metrics_server = self.metrics.serve(prom.listen)
            except OSError as e:
                raise OSError(e.errno, f"cannot serve /metrics on {prom.listen}: {e.strerror or e}") from e

    @property
    def metrics_port(self) -> int | None:
        return None if self.metrics_server is None else int(self.metrics_server.server_port)

    def watch(
        self,
        *,
        sessions: Callable[[], int] | None = None,
        rules: Callable[[], Mapping[str, bool]] | None = None,
        client_connections: Callable[[], int] | None = None,
        client_connections_waiting: Callable[[], int] | None = None,
    ) -> None:
        """Read brownout_sessions_active, brownout_rule_active, brownout_client_connections and
        brownout_client_connections_waiting from these callables at scrape time."""
        self.metrics.watch(
            sessions=sessions,
            rules=rules,
            client_connections=client_connections,
            client_connections_waiting=client_connections_waiting,
        )

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Flush spans (bounded by timeout_s), close the logs, stop /metrics. Idempotent."""
        if self._closed:
            return
        self._closed = True
        # A rebuilt hub (config reload before start) must not leave its counter on the shared Guard.
        if self.metrics.internal_error in self.guard.listeners:
            self.guard.listeners.remove(self.metrics.internal_error)
        # The logs first: they are local and quick, while an unreachable collector takes its whole bound.
        for writer in (self.violation_log, self.decision_log, self.exchange_log):
            if writer is not None:
                self._contain("jsonl", writer.close, timeout_s)
        if self.otlp is not None:
            self._contain("otlp", self.otlp.shutdown, timeout_s)
        else:
            self._contain("otlp", self.tracer_provider.shutdown)
        if self.metrics_server is not None:
            server, self.metrics_server = self.metrics_server, None
            self._contain("prometheus", server.shutdown)
            self._contain("prometheus", server.server_close)
        # Span processors among them were shut down with the tracer provider above. A warning, not
        # an error: a hub replaced before start is shut down while mitmproxy still treats error
        # logs as a failed start, and a plugin's shutdown cannot hurt traffic.
        for name, exporter in self.extra:
            if not isinstance(exporter, SpanProcessor) and hasattr(exporter, "shutdown"):
                self._contain(name, exporter.shutdown, level=logging.WARNING)

    # --- the pipeline -------------------------------------------------------------------

    def on_exchange(self, exchange: Exchange, violations: Iterable[ViolationRecord] = ()) -> None:
        """One finished exchange and the violations found on it (do not pass these to on_violation too)."""
        self._contain("prometheus", self.metrics.observe_exchange, exchange)
        if exchange.realtime is not None:
            self._contain("prometheus", self.metrics.realtime.generation, exchange)
        if self.exchange_log is not None or self._exchanges.maxlen != 0:
            self._contain("exchanges", self._keep_exchange, exchange)
        if self.extra:
            violations = list(violations)  # iterated twice
            self._fan_out("on_exchange", exchange, violations)
        for violation in violations:
            self.on_violation(violation)

    def _keep_exchange(self, exchange: Exchange) -> None:
        record = exchange_summary(exchange)
        if self.exchange_log is not None:
            self.exchange_log.write(record)
        if self._exchanges.maxlen != 0:
            with self._ring_lock:
                self._exchanges.append(record)

    def on_violation(self, violation: ViolationRecord) -> None:
        """One violation: counter, JSONL line, and the in-memory ring for GET /violations."""
        self._contain("prometheus", self.metrics.observe_violation, violation)
        self._contain("violations", self._keep_violation, violation)
        if self.extra:
            self._fan_out("on_violation", violation)

    def _keep_violation(self, violation: ViolationRecord) -> None:
        record = violation.to_dict()
        if self.violation_log is not None:
            self.violation_log.write(record)
        if self._ring.maxlen != 0:
            with self._ring_lock:
                self._ring.append(record)

    def on_websocket_start(self, provider: str) -> None:
        """A WebSocket session opened (`provider`: its wire format, "http" for one none recognised)."""
        self._contain("prometheus", self.metrics.realtime.started, provider)

    def on_websocket_end(self, provider: str, close_code: int | None, duration_s: float | None) -> None:
        """A WebSocket session ended with this close code (as the client saw it)."""
        self._contain("prometheus", self.metrics.realtime.ended, provider, close_code, duration_s)

    def on_checks_dropped(self, n: int = 1) -> None:
        """Exchanges exported without their invariant checks: the queue of shared-session checks was full."""
        self._contain("prometheus", self.metrics.checks_dropped.inc, n)

    def on_client_cut(self, reason: str) -> None:
        """A client connection closed by a proxy bound, or answered 503 over the connection cap."""
        self._contain("prometheus", self.metrics.client_cut, reason)

    def on_admission_wait(self, seconds: float) -> None:
        """A new client connection waited this long to be admitted (proxy.admit_per_tick)."""
        self._contain("prometheus", self.metrics.connection_wait.observe, seconds)

    def on_agent_spans(self, what: str, label: str, n: int = 1) -> None:
        """The agent's spans: `received` (by source), `evicted` (by reason), `joins` (by how); see AgentSpanMetrics."""
        self._contain("prometheus", self.agent.count, what, label, n)

    def on_otlp_forward(self, signal: str, outcome: str) -> None:
        """An OTLP export the receiver forwarded: `ok`, `failed` or `dropped`."""
        self._contain("prometheus", self.agent.forward, signal, outcome)

    def on_ignored(self) -> None:
        """A request to an ignored host went by: counted, nothing else."""
        self._contain("prometheus", self.metrics.ignored.inc)

    def on_upstream_error(self, host: str, kind: str) -> None:
        """A connection to an upstream failed (`kind`: one of exporters.upstream_errors.UPSTREAM_ERROR_KINDS)."""
        self._contain("prometheus", self.metrics.upstream_errors.observe, host, kind)

    def on_replay(self, outcome: str) -> None:
        """A request met by replay: `hit`, `miss` or `passthrough`."""
        self._contain("prometheus", self.metrics.replay.labels(outcome).inc)

    def on_config_reload(self, outcome: str) -> None:
        """A hot reload of the config file: `applied`, or `rejected` (the last good config kept)."""
        self._contain("prometheus", self.metrics.config_reloads.labels(outcome).inc)

    def on_recorded(self, written: int, dropped: int = 0) -> None:
        """Cassette records written, and those lost (full queue, unwritable directory)."""
        self._contain("prometheus", self.metrics.recorded.inc, written)
        self._contain("prometheus", self.metrics.export_dropped, "cassette", dropped)

    def on_state_error(self, op: str) -> None:
        """A call to the shared state store failed or outlasted its budget (`op`: named in code)."""
        self._contain("prometheus", self.metrics.state.error, op)

    def watch_state(
        self,
        *,
        up: Callable[[], bool | None] | None = None,
        config_mismatch: Callable[[], int] | None = None,
        replicas: Callable[[], int] | None = None,
    ) -> None:
        """Read brownout_state_store_up, brownout_state_config_mismatch and brownout_state_replicas from
        these callables at scrape time (a fleet on Redis; absent with the memory backend)."""
        self.metrics.state.watch(up=up, config_mismatch=config_mismatch, replicas=replicas)

    def watch_experiment(self, phases: Callable[[], Mapping[tuple[str, str], float]]) -> None:
        """Read brownout_experiment_phase{experiment, phase} from `phases` at scrape time."""
        self.metrics.state.watch(experiment=phases)

    def on_decision(self, decision: DecisionLike) -> None:
        """A DecisionLog sink: per-rule outcome counter and the decision log file."""
        self._contain("prometheus", self.metrics.observe_decision, decision)
        if self.decision_log is not None:
            self._contain("jsonl", self._write_decision, decision)
        if self.extra:
            self._fan_out("on_decision", decision)

    def _write_decision(self, decision: Any) -> None:
        assert self.decision_log is not None
        record = decision.to_dict() if hasattr(decision, "to_dict") else dict(vars(decision))
        self.decision_log.write(record)

    def recent_violations(self, since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Kept violation records with timestamp > since, oldest first (thread-safe copy)."""
        self.settle()
        with self._ring_lock:
            records = list(self._ring)
        if since is not None:
            records = [r for r in records if float(r.get("timestamp") or 0.0) > since]
        return records[-limit:] if limit else records

    def recent_exchanges(self, since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Kept exchange summaries that started after `since`, oldest first (thread-safe copy)."""
        self.settle()
        with self._ring_lock:
            records = list(self._exchanges)
        if since is not None:
            records = [r for r in records if float(r.get("timestamp") or 0.0) > since]
        return records[-limit:] if limit else records

    def status(self) -> dict[str, Any]:
        """Exporter health for GET /status."""
        dropped = {
            s.labels["exporter"]: s.value
            for m in self.metrics.dropped.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }
        return {
            "metrics_port": self.metrics_port,
            "otlp": None
            if self.otlp is None
            else {
                "endpoint": self.otlp.settings.endpoint,
                "protocol": self.otlp.settings.protocol,
                "exported": self.otlp.exporter.exported + (self.otlp_elsewhere() if self.otlp_elsewhere else 0),
            },
            "export_dropped": dropped,
            "violations_kept": len(self._ring),
            "at": time.time(),
        }
