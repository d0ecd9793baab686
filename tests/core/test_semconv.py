"""The GenAI convention versions: which one an instance picks, and what each names.

The pinned table is checked against an independent source: opentelemetry-semantic-conventions (the
Python package of the main repository, whose gen_ai registry stopped at v1.41.0 when the conventions
moved). The latest table is checked against docs/telemetry.md by tests/docs/test_semconv_doc.py and
against real exported spans by tests/e2e/test_semconv_e2e.py.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.schemas import Schemas

from brownout.core.exchange import Exchange, Timings, Usage
from brownout.core.semconv import LATEST, PINNED, VERSIONS, Metric, Semconv, opted_in, resolve_semconv
from brownout.core.span_attributes import exchange_attributes
from brownout.core.spans import SpanBuilder

# brownout's realtime names come from the realtime conventions drafted after v1.41.0, in both versions.
REALTIME = {"live_session_id", "live_session_started_event", "live_session_ended_event"}


@pytest.mark.parametrize(
    ("value", "latest"),
    [
        (None, False),
        ("", False),
        ("gen_ai_latest_experimental", True),
        ("http, gen_ai_latest_experimental ,database/dup", True),  # a list, entries stripped
        ("http/dup,database", False),  # other categories' values are not this one
        ("gen_ai_latest_experimental_x", False),  # matched exactly, not as a prefix
        ("GEN_AI_LATEST_EXPERIMENTAL", False),  # the instrumentations compare case-sensitively too
    ],
)
def test_the_variable_opts_in_as_the_instrumentations_read_it(value: str | None, latest: bool) -> None:
    env = {} if value is None else {"OTEL_SEMCONV_STABILITY_OPT_IN": value}
    assert opted_in(env) is latest
    assert resolve_semconv("pinned", env) is (LATEST if latest else PINNED)


def test_config_asks_for_latest_and_the_variable_wins_over_pinned() -> None:
    assert resolve_semconv("latest", {}) is LATEST
    assert resolve_semconv("pinned", {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}) is LATEST
    assert resolve_semconv("pinned", {"OTEL_SEMCONV_STABILITY_OPT_IN": "http"}) is PINNED


def test_resolution_reads_the_environment_it_is_given_or_the_process_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    assert resolve_semconv() is LATEST
    assert resolve_semconv(environ={}) is PINNED  # an instance given its own environment is not swayed


def _registry_names() -> set[str]:
    return {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}


def test_pinned_names_are_those_of_the_main_repository_registry() -> None:
    registry = _registry_names()
    spans = dataclasses.asdict(PINNED.spans)
    missing = {k: v for k, v in spans.items() if k not in REALTIME and v not in registry}
    assert not missing, missing
    metric_names = {v for k, v in vars(gen_ai_metrics).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    for metric in PINNED.metrics.all():
        assert metric.name in metric_names
        assert set(metric.attributes) <= registry | {ERROR_TYPE}  # error.type: the general registry's
    assert PINNED.schema_url == Schemas.V1_41_0.value
    assert PINNED.release == "semantic-conventions v1.41.0"


def test_latest_differs_where_the_conventions_moved() -> None:
    assert "gen_ai.usage.cache_write.input_tokens" not in _registry_names()  # new since v1.41.0
    assert LATEST.spans.usage_cache_write_input_tokens == "gen_ai.usage.cache_write.input_tokens"
    changed = {k for k, v in dataclasses.asdict(LATEST.spans).items() if v != dataclasses.asdict(PINNED.spans)[k]}
    assert changed == {"usage_cache_write_input_tokens"}
    latest = {m.name for m in LATEST.metrics.all()}
    assert "gen_ai.client.token.usage" not in latest  # removed: counters and histograms instead
    assert {"gen_ai.client.inference.duration", "gen_ai.client.inference.usage.input_tokens"} <= latest
    assert LATEST.metrics.operation_duration == PINNED.metrics.operation_duration  # kept for other operations
    assert LATEST.schema_url != PINNED.schema_url
    assert set(VERSIONS) == {"pinned", "latest"}


def test_prometheus_names_follow_the_otel_mapping() -> None:
    assert Metric("a.b.duration", "histogram", "s", ()).prometheus == "a_b_duration_seconds"
    assert Metric("a.b.usage", "histogram", "{token}", ()).prometheus == "a_b_usage"
    assert Metric("a.b.tokens", "counter", "{token}", ("x.y",)).prometheus == "a_b_tokens_total"
    assert Metric("a.b.tokens", "counter", "{token}", ("x.y", "z")).labels == ("x_y", "z")


def _anthropic(**over: object) -> Exchange:
    now = time.time()
    fields: dict[str, object] = {
        "id": "ex-1",
        "session": "s-1",
        "method": "POST",
        "scheme": "https",
        "host": "api.anthropic.com",
        "port": 443,
        "path": "/v1/messages",
        "provider": "anthropic",
        "gen_ai_provider": "anthropic",
        "operation": "messages",
        "model": "claude-sonnet-4-5",
        "status": 200,
        "usage": Usage(120, 7, cache_read_tokens=40, cache_write_tokens=60),
        "finish_reasons": ["end_turn"],
        "output_text": "hello",
        "timings": Timings(start=now - 1, first_upstream_byte=now - 0.9, end=now),
    }
    fields.update(over)
    return Exchange(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("semconv", [PINNED, LATEST], ids=["pinned", "latest"])
def test_span_attributes_use_the_version_names(semconv: Semconv) -> None:
    attrs = exchange_attributes(_anthropic(), capture_content=True, semconv=semconv)
    cache_write = semconv.spans.usage_cache_write_input_tokens
    other = (LATEST if semconv is PINNED else PINNED).spans.usage_cache_write_input_tokens
    assert attrs[cache_write] == 60 and other not in attrs
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 40
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    (message,) = json.loads(attrs["gen_ai.output.messages"])
    # finish_reason inside the output messages is deprecated after v1.41.0 (the span attribute stays).
    assert ("finish_reason" in message) is (semconv is PINNED)


@pytest.mark.parametrize("semconv", [PINNED, LATEST], ids=["pinned", "latest"])
def test_the_span_scope_carries_the_version_schema_url(semconv: Semconv) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    SpanBuilder(provider, semconv=semconv).build(_anthropic())
    (span,) = memory.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.schema_url == semconv.schema_url
    assert span.instrumentation_scope.name == "brownout"
