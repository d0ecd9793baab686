"""The versions of the OpenTelemetry GenAI semantic conventions brownout emits, and every GenAI name in each.

brownout emits one pinned version by default: semantic-conventions v1.41.0, the last release of the
GenAI conventions in the main repository. With `gen_ai_latest_experimental` in
`OTEL_SEMCONV_STABILITY_OPT_IN` (or `exporters.semconv: latest`) it emits the newest it knows:
semantic-conventions-genai v0.1.0, the first release of the repository the conventions moved to.
That is the switch OpenTelemetry's own GenAI instrumentations offer, so one variable moves an
agent's instrumentation and brownout together.

Each version is one `Semconv` below; the span builder, the Prometheus exporter and the docs test all
read their names from it, so no GenAI name is spelled anywhere else. The choice belongs to an
instance (the exporters hub resolves it once, from its config and its environment): two proxies in
one process may emit different versions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal

__all__ = [
    "INFERENCE_OPERATIONS",
    "LATEST",
    "OPT_IN_ENV",
    "OPT_IN_LATEST",
    "PINNED",
    "SEMCONV_KEYS",
    "VERSIONS",
    "Metric",
    "MetricNames",
    "Semconv",
    "SemconvKey",
    "SpanNames",
    "opted_in",
    "resolve_semconv",
]

SemconvKey = Literal["pinned", "latest"]
SEMCONV_KEYS: tuple[SemconvKey, ...] = ("pinned", "latest")
OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
OPT_IN_LATEST = "gen_ai_latest_experimental"
# The operations the conventions call inference (their own duration metric in v0.1.0).
INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})

_OP = "gen_ai.operation.name"
_PROVIDER = "gen_ai.provider.name"
_MODEL = "gen_ai.request.model"
# Conditionally required on every duration metric: set when the operation ended in an error.
_ERROR = "error.type"


@dataclass(frozen=True, slots=True)
class SpanNames:
    """GenAI span attribute and span event names, one field per neutral key."""

    provider_name: str
    operation_name: str
    request_model: str
    request_stream: str
    response_model: str
    response_id: str
    response_finish_reasons: str
    response_time_to_first_chunk: str
    usage_input_tokens: str
    usage_output_tokens: str
    usage_cache_read_input_tokens: str
    usage_cache_write_input_tokens: str
    input_messages: str
    output_messages: str
    tool_name: str
    tool_call_id: str
    tool_call_arguments: str
    tool_call_result: str
    prompt_name: str
    live_session_id: str
    live_session_started_event: str
    live_session_ended_event: str


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric instrument: its OpenTelemetry name, kind, UCUM unit and attributes (labels)."""

    name: str
    instrument: Literal["histogram", "counter"]
    unit: str
    attributes: tuple[str, ...]

    @property
    def prometheus(self) -> str:
        """The name on /metrics, as OpenTelemetry maps it to Prometheus: dots to underscores, `_seconds`
        for a unit of seconds, `_total` on a counter (a `{token}` annotation adds no suffix)."""
        name = self.name.replace(".", "_") + ("_seconds" if self.unit == "s" else "")
        return name + "_total" if self.instrument == "counter" else name

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(a.replace(".", "_") for a in self.attributes)


@dataclass(frozen=True, slots=True)
class MetricNames:
    """The GenAI metrics of a version, by role; a role the version lacks is None."""

    inference_duration: Metric  # chat, text_completion, generate_content
    embeddings_duration: Metric
    tool_duration: Metric  # execute_tool
    operation_duration: Metric  # any other GenAI operation (realtime generations)
    token_usage: Metric | None  # one histogram, input and output told apart by a token-type attribute
    input_tokens: Metric | None  # counters of tokens spent, by modality
    output_tokens: Metric | None
    cache_read_input_tokens: Metric | None
    cache_write_input_tokens: Metric | None
    operation_input_tokens: Metric | None  # per-operation histograms
    operation_output_tokens: Metric | None
    embeddings_input_tokens: Metric | None

    def all(self) -> tuple[Metric, ...]:
        """Each distinct metric once (roles may share one)."""
        found: dict[str, Metric] = {}
        for role in fields(self):
            metric = getattr(self, role.name)
            if metric is not None:
                found.setdefault(metric.name, metric)
        return tuple(found.values())


@dataclass(frozen=True, slots=True)
class Semconv:
    """One version of the GenAI conventions as brownout emits it."""

    key: SemconvKey
    release: str  # the repository and release the names come from
    schema_url: str  # the instrumentation scope's schema_url on every span
    spans: SpanNames
    metrics: MetricNames
    output_finish_reason: bool  # gen_ai.output.messages carry finish_reason (deprecated after v1.41.0)
    token_modality: str | None  # the value of gen_ai.token.modality, when the version counts by modality


def _same_spans(**changed: str) -> SpanNames:
    base = {
        "provider_name": _PROVIDER,
        "operation_name": _OP,
        "request_model": _MODEL,
        "request_stream": "gen_ai.request.stream",
        "response_model": "gen_ai.response.model",
        "response_id": "gen_ai.response.id",
        "response_finish_reasons": "gen_ai.response.finish_reasons",
        "response_time_to_first_chunk": "gen_ai.response.time_to_first_chunk",
        "usage_input_tokens": "gen_ai.usage.input_tokens",
        "usage_output_tokens": "gen_ai.usage.output_tokens",
        "usage_cache_read_input_tokens": "gen_ai.usage.cache_read.input_tokens",
        "usage_cache_write_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
        "input_messages": "gen_ai.input.messages",
        "output_messages": "gen_ai.output.messages",
        "tool_name": "gen_ai.tool.name",
        "tool_call_id": "gen_ai.tool.call.id",
        "tool_call_arguments": "gen_ai.tool.call.arguments",
        "tool_call_result": "gen_ai.tool.call.result",
        "prompt_name": "gen_ai.prompt.name",
        # Not in v1.41.0: the realtime conventions drafted in semantic-conventions-genai, in both versions.
        "live_session_id": "gen_ai.live_session.id",
        "live_session_started_event": "gen_ai.client.live_session.started",
        "live_session_ended_event": "gen_ai.client.live_session.ended",
    }
    return SpanNames(**{**base, **changed})


_OPERATION_DURATION = Metric("gen_ai.client.operation.duration", "histogram", "s", (_OP, _PROVIDER, _MODEL, _ERROR))

PINNED = Semconv(
    key="pinned",
    release="semantic-conventions v1.41.0",
    schema_url="https://opentelemetry.io/schemas/1.41.0",
    spans=_same_spans(),
    metrics=MetricNames(
        inference_duration=_OPERATION_DURATION,
        embeddings_duration=_OPERATION_DURATION,
        tool_duration=_OPERATION_DURATION,
        operation_duration=_OPERATION_DURATION,
        token_usage=Metric(
            "gen_ai.client.token.usage", "histogram", "{token}", (_OP, _PROVIDER, _MODEL, "gen_ai.token.type")
        ),
        input_tokens=None,
        output_tokens=None,
        cache_read_input_tokens=None,
        cache_write_input_tokens=None,
        operation_input_tokens=None,
        operation_output_tokens=None,
        embeddings_input_tokens=None,
    ),
    output_finish_reason=True,
    token_modality=None,
)


def _usage_counter(name: str) -> Metric:
    return Metric(name, "counter", "{token}", (_OP, _PROVIDER, _MODEL, "gen_ai.token.modality"))


def _tokens_histogram(name: str) -> Metric:
    return Metric(name, "histogram", "{token}", (_OP, _PROVIDER, _MODEL))


LATEST = Semconv(
    key="latest",
    release="semantic-conventions-genai v0.1.0",
    schema_url="https://opentelemetry.io/schemas/gen-ai/0.1.0",
    spans=_same_spans(usage_cache_write_input_tokens="gen_ai.usage.cache_write.input_tokens"),
    metrics=MetricNames(
        inference_duration=Metric(
            "gen_ai.client.inference.duration", "histogram", "s", (_OP, _PROVIDER, _MODEL, _ERROR)
        ),
        embeddings_duration=Metric(
            "gen_ai.client.embeddings.duration", "histogram", "s", (_OP, _PROVIDER, _MODEL, _ERROR)
        ),
        tool_duration=Metric("gen_ai.execute_tool.duration", "histogram", "s", (_OP, "gen_ai.tool.name", _ERROR)),
        operation_duration=_OPERATION_DURATION,
        token_usage=None,
        input_tokens=_usage_counter("gen_ai.client.inference.usage.input_tokens"),
        output_tokens=_usage_counter("gen_ai.client.inference.usage.output_tokens"),
        cache_read_input_tokens=_usage_counter("gen_ai.client.inference.usage.cache_read.input_tokens"),
        cache_write_input_tokens=_usage_counter("gen_ai.client.inference.usage.cache_write.input_tokens"),
        operation_input_tokens=_tokens_histogram("gen_ai.client.inference.operation.input_tokens"),
        operation_output_tokens=_tokens_histogram("gen_ai.client.inference.operation.output_tokens"),
        embeddings_input_tokens=_tokens_histogram("gen_ai.client.embeddings.operation.input_tokens"),
    ),
    output_finish_reason=False,
    # Providers report usage for the whole call, not per modality: the conventions' value for that.
    token_modality="unknown",
)

VERSIONS: Mapping[SemconvKey, Semconv] = {"pinned": PINNED, "latest": LATEST}


def opted_in(environ: Mapping[str, str]) -> bool:
    """OTEL_SEMCONV_STABILITY_OPT_IN lists gen_ai_latest_experimental (a comma-separated list, each
    entry stripped, matched exactly: as opentelemetry-instrumentation's stability helper reads it)."""
    return OPT_IN_LATEST in (part.strip() for part in environ.get(OPT_IN_ENV, "").split(","))


def resolve_semconv(configured: SemconvKey = "pinned", environ: Mapping[str, str] | None = None) -> Semconv:
    """The version an instance emits: the latest when the environment opts in (the variable wins over
    a config that says pinned, as it does for OpenTelemetry's instrumentations) or the config asks for
    it; otherwise the pinned one. The variable only opts in: there is no value that opts out."""
    env = os.environ if environ is None else environ
    return LATEST if configured == "latest" or opted_in(env) else PINNED
