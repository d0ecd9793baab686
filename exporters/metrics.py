"""Prometheus metrics: the names and labels dashboards, alert rules and users' queries rely on.

Every label is bounded: providers and operations come from fixed sets, models from an
allowlist (else "other"), rules/invariants/faults from the config, components from code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, start_http_server

from brownout.core import wire
from brownout.core.config import parse_listen
from brownout.core.exchange import PARSE_ERROR_REASONS, Exchange
from brownout.core.semconv import PINNED, Semconv
from brownout.core.span_attributes import error_type, operation_name, provider_name
from brownout.exporters.config import DEFAULT_MODEL_ALLOWLIST
from brownout.exporters.gauges import GaugeSource
from brownout.exporters.genai_metrics import SemconvMetrics
from brownout.exporters.label_bounds import LabelBounds
from brownout.exporters.metric_labels import (
    ADMISSION_WAIT_BUCKETS,
    CLIENT_CUT_REASONS,
    COMPONENTS,
    DURATION_BUCKETS,
    MCP_DURATION_BUCKETS,
    MCP_METHODS,
    STATUS_CLASSES,
    TTFC_BUCKETS,
    mcp_code_label,
    mcp_error_label,
)
from brownout.exporters.promfilter import WithoutCreated
from brownout.exporters.realtime_metrics import RealtimeMetrics
from brownout.exporters.state_metrics import StateMetrics
from brownout.exporters.upstream_errors import UpstreamErrors

__all__ = ["DecisionLike", "Metrics", "ViolationLike"]

log = logging.getLogger(__name__)


class ViolationLike(Protocol):
    """What the metrics read from invariants.records.Violation."""

    invariant: str
    severity: str
    trace_id: str | None


class DecisionLike(Protocol):
    """What the metrics read from faults.decisions.Decision."""

    @property
    def rule(self) -> str: ...
    @property
    def outcome(self) -> str: ...


def _version() -> str:
    try:
        return metadata.version("brownout")
    except metadata.PackageNotFoundError:
        return "unknown"


class BeforeScrape:
    """A collector with no metrics that calls `wait` at each scrape, before the others are read (the
    proxy sets it to wait, bounded, for exchanges it has not counted yet)."""

    def __init__(self) -> None:
        self.wait: Callable[[], object] = lambda: None

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> list[Any]:
        self.wait()
        return []


class Metrics(LabelBounds):
    """brownout's Prometheus metrics on one registry (a fresh CollectorRegistry in tests)."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        model_allowlist: Iterable[str] = DEFAULT_MODEL_ALLOWLIST,
        max_models: int = 200,
        max_tools: int = 100,
        version: str | None = None,
        providers: Iterable[str] = wire.BUILTIN.providers,
        semconv: Semconv = PINNED,
    ) -> None:
        """`semconv`: the GenAI conventions whose metric names and labels to expose."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.before_scrape = BeforeScrape()  # first on the registry: it runs before any metric is read
        self.registry.register(self.before_scrape)
        # A gauge whose source raised at scrape time (the hub routes it through its guard).
        self.gauge_failed: Callable[[str, Exception], None] = lambda name, exc: self.internal_error(
            "exporter:prometheus"
        )
        LabelBounds.__init__(
            self, providers=providers, model_allowlist=model_allowlist, max_models=max_models, max_tools=max_tools
        )
        # Children by (metric, label values): prometheus_client's labels() validates and locks on
        # every call (about 2 us); label values are already bounded, so the dict stays small.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # brownout's own metrics: exposed on self.registry without `_created` series (see promfilter).
        r = CollectorRegistry()
        self.requests = Counter(
            "brownout_requests", "Exchanges seen.", ["provider", "operation", "tool", "status_class"], registry=r
        )
        self.faults = Counter("brownout_faults_injected", "Faults injected.", ["rule", "fault"], registry=r)
        self.uninspected = Counter(
            "brownout_uninspected",
            "Exchanges whose body brownout stopped reading (it passed through untouched).",
            ["reason"],
            registry=r,
        )
        self.parse_errors = Counter(
            "brownout_parse_errors",
            "Bodies brownout could not parse because the traffic was malformed (its own failures are "
            "brownout_internal_errors_total).",
            ["reason"],
            registry=r,
        )
        self.decisions = Counter(
            "brownout_fault_decisions", "Rule decisions by outcome.", ["rule", "outcome"], registry=r
        )
        self.violations = Counter("brownout_violations", "Invariant violations.", ["invariant", "severity"], registry=r)
        self.duration = Histogram(
            "brownout_request_duration_seconds",
            "Exchange duration as the agent saw it.",
            ["provider", "operation", "tool"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.ttfc = Histogram(
            "brownout_time_to_first_chunk_seconds",
            "Request start to first response body bytes.",
            ["provider"],
            buckets=TTFC_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "brownout_tokens", "Tokens reported by providers.", ["provider", "model", "type"], registry=r
        )
        self.cache_tokens = Counter(
            "brownout_prompt_cache_tokens",
            "Prompt tokens read from (read) or written to (write) the provider's prompt cache; part of the input tokens.",
            ["provider", "model", "type"],
            registry=r,
        )
        self.cost = Counter(
            "brownout_cost_usd",
            "What LLM calls cost at list prices (genai-prices table), in US dollars.",
            ["provider", "model"],
            registry=r,
        )
        self.retries = Counter(
            "brownout_retries",
            "Client retries seen on the wire (x-stainless-retry-count > 0).",
            ["provider"],
            registry=r,
        )
        self.internal_errors = Counter(
            "brownout_internal_errors", "Contained internal failures.", ["component"], registry=r
        )
        self.dropped = Counter(
            "brownout_export_dropped", "Records an exporter could not deliver.", ["exporter"], registry=r
        )
        self.checks_dropped = Counter(
            "brownout_invariant_checks_dropped",
            "Exchanges not checked by invariants: the queue of checks on the shared session store was full.",
            registry=r,
        )
        self.ignored = Counter(
            "brownout_ignored_requests", "Requests to proxy.ignore_hosts, passed through untouched.", registry=r
        )
        self.replay = Counter(
            "brownout_replay_requests",
            "Requests met by replay: answered from a cassette (hit), missed, or forwarded upstream on a miss.",
            ["outcome"],
            registry=r,
        )
        self.recorded = Counter("brownout_recorded_exchanges", "Exchanges written to a cassette.", registry=r)
        self.upstream_errors = UpstreamErrors(r)
        self.realtime = RealtimeMetrics(r, self._providers)
        self.state = StateMetrics(r, on_error=self._gauge_failed)
        self.config_reloads = Counter(
            "brownout_config_reloads",
            "Hot reloads of the config file: applied, or rejected with the last good config kept.",
            ["outcome"],
            registry=r,
        )
        self.client_cuts = Counter(
            "brownout_client_connections_cut",
            "Client connections closed by a bound, or requests answered 503 over the connection cap.",
            ["reason"],
            registry=r,
        )
        self.client_connections = GaugeSource(
            "brownout_client_connections", "Client connections open.", None, on_error=self._gauge_failed
        )
        r.register(self.client_connections)
        self.connections_waiting = GaugeSource(
            "brownout_client_connections_waiting",
            "Client connections accepted and waiting to be admitted.",
            None,
            on_error=self._gauge_failed,
        )
        r.register(self.connections_waiting)
        self.connection_wait = Histogram(
            "brownout_client_connection_wait_seconds",
            "How long a new client connection waited to be admitted (proxy.admit_per_tick); only those that waited.",
            buckets=ADMISSION_WAIT_BUCKETS,
            registry=r,
        )
        self.genai = SemconvMetrics(semconv, r, self._child)
        self.mcp_duration = Histogram(
            "mcp_client_operation_duration_seconds",
            "MCP request duration as the client saw it (OTel MCP semconv).",
            [
                "mcp_method_name",
                "gen_ai_tool_name",
                "gen_ai_prompt_name",
                "rpc_response_status_code",
                "error_type",
                "network_transport",
            ],
            buckets=MCP_DURATION_BUCKETS,
            registry=r,
        )
        self.sessions_active = GaugeSource(
            "brownout_sessions_active", "Open agent sessions.", None, on_error=self._gauge_failed
        )
        self.rule_active = GaugeSource(
            "brownout_rule_active",
            "1 when the rule is enabled and its window is open.",
            "rule",
            on_error=self._gauge_failed,
        )
        r.register(self.sessions_active)
        r.register(self.rule_active)
        Info("brownout_build", "brownout build.", registry=r).info({"version": version or _version()})
        # Series that alerts use with rate() exist from the start, so "no data" never hides "zero".
        for component in COMPONENTS:
            self.internal_errors.labels(component)
        for exporter in ("otlp", "jsonl"):
            self.dropped.labels(exporter)
        for reason in CLIENT_CUT_REASONS:
            self.client_cuts.labels(reason)
        self.registry.register(WithoutCreated(r))

    # --- observations -------------------------------------------------------------------

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_exchange(self, exchange: Exchange) -> None:
        """Count one finished exchange: traffic, faults, latency, tokens, retries, semconv metrics."""
        provider = self.provider_label(exchange.provider)
        operation = self.operation_label(exchange.operation)
        tool = self.tool_label(exchange.tool_name)
        status_class = exchange.status_class if exchange.status_class in STATUS_CLASSES else "error"
        self._child(self.requests, provider, operation, tool, status_class).inc()
        for fault in exchange.faults:
            self._child(self.faults, fault.rule, fault.fault).inc()
        if exchange.uninspected is not None:
            self._child(self.uninspected, exchange.uninspected).inc()
        if exchange.parse_error_reason is not None:
            reason = exchange.parse_error_reason
            self._child(self.parse_errors, reason if reason in PARSE_ERROR_REASONS else "other").inc()
        duration = exchange.timings.duration_s
        if duration is not None:
            self._child(self.duration, provider, operation, tool).observe(duration)
            if exchange.mcp_method:
                self._observe_mcp(exchange, tool, duration)
        ttfc = exchange.timings.ttfc_s
        if ttfc is not None:
            self._child(self.ttfc, provider).observe(ttfc)
        if exchange.retry_count:
            self._child(self.retries, provider).inc()
        model = self.model_label(exchange.model)
        usage = exchange.usage
        for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            if count:
                self._child(self.tokens, provider, model, kind).inc(count)
        for kind, count in (("read", usage.cache_read_tokens), ("write", usage.cache_write_tokens)):
            if count:
                self._child(self.cache_tokens, provider, model, kind).inc(count)
        if exchange.cost is not None and exchange.cost.currency == "USD" and exchange.cost.total > 0:
            self._child(self.cost, provider, model).inc(exchange.cost.total)
        # The same gen_ai.* values as the span (one mapping, in brownout.core.span_attributes).
        genai_op = operation_name(exchange)
        if genai_op is None:
            return
        error = self.error_label(error_type(exchange))
        self.genai.observe(genai_op, provider_name(exchange) or "other", model, tool, duration, usage, error)

    def _observe_mcp(self, exchange: Exchange, tool: str, duration: float) -> None:
        method = exchange.mcp_method if exchange.mcp_method in MCP_METHODS else "_OTHER"
        transport = "pipe" if exchange.transport == "stdio" else "tcp"
        prompt = exchange.notes.get("mcp_prompt_name")
        prompt_label = self._capped(self._prompts, prompt) if isinstance(prompt, str) and prompt else ""
        self._child(
            self.mcp_duration,
            method,
            "" if tool == "none" else tool,
            prompt_label,
            mcp_code_label(exchange),
            mcp_error_label(exchange),
            transport,
        ).observe(duration)

    def observe_violation(self, violation: ViolationLike) -> None:
        child = self._child(self.violations, violation.invariant, violation.severity)
        trace_id = getattr(violation, "trace_id", None)
        # The exemplar lets Grafana jump from a violation spike to its trace.
        child.inc(exemplar={"trace_id": trace_id} if trace_id else None)

    def observe_decision(self, decision: DecisionLike) -> None:
        self._child(self.decisions, decision.rule, decision.outcome).inc()

    def _gauge_failed(self, name: str, exc: Exception) -> None:
        self.gauge_failed(name, exc)

    def internal_error(self, component: str) -> None:
        self.internal_errors.labels(component).inc()

    def export_dropped(self, exporter: str, n: int = 1) -> None:
        if n > 0:
            self.dropped.labels(exporter).inc(n)

    def client_cut(self, reason: str) -> None:
        self.client_cuts.labels(reason if reason in CLIENT_CUT_REASONS else "other").inc()

    def watch(
        self,
        *,
        sessions: Callable[[], int] | None = None,
        rules: Callable[[], Mapping[str, bool]] | None = None,
        client_connections: Callable[[], int] | None = None,
        client_connections_waiting: Callable[[], int] | None = None,
    ) -> None:
        """Read the gauges at scrape time from these callables (e.g. engine.active_rules)."""
        if sessions is not None:
            self.sessions_active.source = sessions
        if rules is not None:
            self.rule_active.source = rules
        if client_connections is not None:
            self.client_connections.source = client_connections
        if client_connections_waiting is not None:
            self.connections_waiting.source = client_connections_waiting

    # --- serving ------------------------------------------------------------------------

    def serve(self, listen: str) -> Any:
        """Serve /metrics on its own thread; returns the server (server.server_port, .shutdown())."""
        host, port = parse_listen(listen)
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        server.brownout_thread = thread  # type: ignore[attr-defined]
        log.info("metrics on http://%s:%d/metrics", host, server.server_port)
        return server
