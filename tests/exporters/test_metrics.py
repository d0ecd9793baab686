"""The metric names and labels of issue 5's table, read back with get_sample_value."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from brownout.core.exchange import Cost, FaultRecord, Usage
from brownout.exporters.metric_labels import GENAI_DURATION_BUCKETS, GENAI_TOKEN_BUCKETS
from brownout.exporters.metrics import Metrics
from tests.exporters.expsamples import decision, exchange, traffic, violation


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(registry=CollectorRegistry(), version="9.9.9")


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_requests_duration_ttfc_tokens(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange())
    metrics.observe_exchange(exchange(status=503))
    assert (
        value(metrics, "brownout_requests_total", provider="openai", operation="chat", tool="none", status_class="2xx")
        == 1
    )
    assert (
        value(metrics, "brownout_requests_total", provider="openai", operation="chat", tool="none", status_class="5xx")
        == 1
    )
    assert (
        value(metrics, "brownout_request_duration_seconds_count", provider="openai", operation="chat", tool="none") == 2
    )
    assert (
        value(
            metrics,
            "brownout_request_duration_seconds_bucket",
            provider="openai",
            operation="chat",
            tool="none",
            le="1.0",
        )
        == 0
    )
    assert (
        value(
            metrics,
            "brownout_request_duration_seconds_bucket",
            provider="openai",
            operation="chat",
            tool="none",
            le="2.5",
        )
        == 2
    )
    assert value(metrics, "brownout_time_to_first_chunk_seconds_count", provider="openai") == 2
    assert value(metrics, "brownout_tokens_total", provider="openai", model="gpt-4o-mini", type="input") == 24
    assert value(metrics, "brownout_tokens_total", provider="openai", model="gpt-4o-mini", type="output") == 68


def test_prompt_cache_tokens_are_counted_apart_as_part_of_the_input(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(usage=Usage(100, 5, cache_read_tokens=80, cache_write_tokens=15)))
    metrics.observe_exchange(exchange(usage=Usage(10, 5)))  # no cache reported: no series moves
    labels = {"provider": "openai", "model": "gpt-4o-mini"}
    assert value(metrics, "brownout_prompt_cache_tokens_total", **labels, type="read") == 80
    assert value(metrics, "brownout_prompt_cache_tokens_total", **labels, type="write") == 15
    assert value(metrics, "brownout_tokens_total", **labels, type="input") == 110  # cached ones included


def test_cost_in_dollars_with_bounded_model_labels(metrics: Metrics) -> None:
    priced = exchange()
    priced.cost = Cost(total=0.25, input=0.05, output=0.2, currency="USD", model="gpt-4o-mini", provider="openai")
    metrics.observe_exchange(priced)
    metrics.observe_exchange(priced)
    odd = exchange(model="someone-elses-model-7b")
    odd.cost = Cost(total=0.5, input=0.5, output=0.0, currency="USD", model="x", provider="openai")
    metrics.observe_exchange(odd)
    metrics.observe_exchange(exchange())  # unpriced: adds nothing
    assert value(metrics, "brownout_cost_usd_total", provider="openai", model="gpt-4o-mini") == 0.5
    assert value(metrics, "brownout_cost_usd_total", provider="openai", model="other") == 0.5


def test_duration_buckets_reach_minutes(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(provider="ollama", model="llama3.2"))
    assert (
        value(
            metrics,
            "brownout_request_duration_seconds_bucket",
            provider="ollama",
            operation="chat",
            tool="none",
            le="300.0",
        )
        == 1
    )
    assert (
        value(
            metrics,
            "brownout_request_duration_seconds_bucket",
            provider="ollama",
            operation="chat",
            tool="none",
            le="600.0",
        )
        == 1
    )


def test_faults_decisions_violations(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(faults=[FaultRecord("slow", "latency"), FaultRecord("cut", "truncate")]))
    metrics.observe_decision(decision(rule="slow", outcome="fired"))
    metrics.observe_decision(decision(rule="slow", outcome="skipped_probability"))
    metrics.observe_violation(violation(invariant="loop", severity="critical"))
    assert value(metrics, "brownout_faults_injected_total", rule="slow", fault="latency") == 1
    assert value(metrics, "brownout_faults_injected_total", rule="cut", fault="truncate") == 1
    assert value(metrics, "brownout_fault_decisions_total", rule="slow", outcome="fired") == 1
    assert value(metrics, "brownout_fault_decisions_total", rule="slow", outcome="skipped_probability") == 1
    assert value(metrics, "brownout_violations_total", invariant="loop", severity="critical") == 1


def test_retries_count_only_retried_exchanges(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(retry_count=0))
    metrics.observe_exchange(exchange(retry_count=None))
    metrics.observe_exchange(exchange(retry_count=2))
    assert value(metrics, "brownout_retries_total", provider="openai") == 1


def test_labels_are_bounded(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(model="ft:my-org:secret-123", provider="weird", operation="/v9/x"))
    assert (
        value(metrics, "brownout_requests_total", provider="other", operation="other", tool="none", status_class="2xx")
        == 1
    )
    assert value(metrics, "brownout_tokens_total", provider="other", model="other", type="input") == 12
    capped = Metrics(registry=CollectorRegistry(), max_models=2)
    assert [capped.model_label(f"gpt-{i}") for i in range(4)] == ["gpt-0", "gpt-1", "other", "other"]
    assert capped.model_label("gpt-0") == "gpt-0"


def test_genai_semconv_histograms(metrics: Metrics) -> None:
    metrics.observe_exchange(
        exchange(provider="gemini", operation="generate_content", model="gemini-2.0-flash", usage=Usage(50, 3))
    )
    labels = {
        "gen_ai_operation_name": "generate_content",
        "gen_ai_provider_name": "gcp.gemini",
        "gen_ai_request_model": "gemini-2.0-flash",
    }
    assert value(metrics, "gen_ai_client_operation_duration_seconds_count", **labels, error_type="") == 1
    assert value(metrics, "gen_ai_client_operation_duration_seconds_bucket", **labels, error_type="", le="81.92") == 1
    assert value(metrics, "gen_ai_client_token_usage_bucket", **labels, gen_ai_token_type="input", le="64.0") == 1
    assert value(metrics, "gen_ai_client_token_usage_bucket", **labels, gen_ai_token_type="input", le="16.0") == 0
    assert value(metrics, "gen_ai_client_token_usage_sum", **labels, gen_ai_token_type="output") == 3
    assert GENAI_DURATION_BUCKETS[0] == 0.01 and GENAI_DURATION_BUCKETS[-1] == pytest.approx(81.92)
    assert GENAI_TOKEN_BUCKETS[:3] == (1, 4, 16) and GENAI_TOKEN_BUCKETS[-1] == 67108864
    # Plain HTTP is not a GenAI operation.
    metrics.observe_exchange(exchange(provider="http", operation="http", model=None))
    assert (
        value(
            metrics,
            "gen_ai_client_operation_duration_seconds_count",
            gen_ai_operation_name="http",
            gen_ai_provider_name="other",
            gen_ai_request_model="none",
            error_type="",
        )
        is None
    )


def test_gauges_errors_drops_build_info(metrics: Metrics) -> None:
    metrics.watch(sessions=lambda: 3, rules=lambda: {"slow": True, "cut": False})
    metrics.internal_error("exporter:otlp")
    metrics.export_dropped("otlp", 5)
    metrics.export_dropped("jsonl", 0)
    assert value(metrics, "brownout_sessions_active") == 3
    assert value(metrics, "brownout_rule_active", rule="slow") == 1
    assert value(metrics, "brownout_rule_active", rule="cut") == 0
    assert value(metrics, "brownout_internal_errors_total", component="exporter:otlp") == 1
    assert value(metrics, "brownout_export_dropped_total", exporter="otlp") == 5
    assert value(metrics, "brownout_export_dropped_total", exporter="jsonl") == 0
    assert value(metrics, "brownout_build_info", version="9.9.9") == 1
    metrics.watch(sessions=lambda: 7, rules=lambda: {"slow": False})
    assert value(metrics, "brownout_sessions_active") == 7
    assert value(metrics, "brownout_rule_active", rule="slow") == 0


def test_no_created_series_and_serve_on_port_zero(metrics: Metrics) -> None:
    for ex in traffic():
        metrics.observe_exchange(ex)
    server = metrics.serve("127.0.0.1:0")
    try:
        text = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", trust_env=False).text
    finally:
        server.shutdown()
        server.server_close()
    assert "brownout_requests_total{" in text and "_created" not in text
    assert 'model="my-secret-finetune-xyz"' not in text


def test_parse_errors_are_counted_by_their_bounded_reason(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(parse_error="response: JSONDecodeError: ...", parse_error_reason="invalid_json"))
    metrics.observe_exchange(exchange(parse_error="response: ...", parse_error_reason="a reason from a plugin"))
    metrics.observe_exchange(exchange())
    assert value(metrics, "brownout_parse_errors_total", reason="invalid_json") == 1
    assert value(metrics, "brownout_parse_errors_total", reason="other") == 1


def test_created_series_are_left_out_of_brownouts_metrics_only() -> None:
    # prometheus_client can drop `_created` series only process-wide; brownout drops its own, on its
    # registry, and a host program's metrics sharing that registry keep theirs.
    registry = CollectorRegistry()
    host = Counter("host_jobs", "A counter of the program embedding brownout.", registry=registry)
    metrics = Metrics(registry=registry)
    host.inc()
    for ex in traffic():
        metrics.observe_exchange(ex)
    text = generate_latest(registry).decode()
    assert "host_jobs_total 1.0" in text and "host_jobs_created" in text
    assert "brownout_requests_total{" in text and "brownout_request_duration_seconds_bucket{" in text
    assert not [line for line in text.splitlines() if line.startswith("brownout_") and "_created" in line]
    assert registry.get_sample_value(
        "brownout_requests_total", {"provider": "openai", "operation": "chat", "tool": "none", "status_class": "2xx"}
    )
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("brownout_requests", "A clash with brownout's own.", registry=registry)


def test_uninspected_bodies_and_skipped_faults(metrics: Metrics) -> None:
    skipped = FaultRecord("bad", "malformed_json", {"skipped": "the body is not JSON"})
    metrics.observe_exchange(exchange(uninspected="decoded_too_large", faults_skipped=[skipped]))
    metrics.observe_exchange(exchange())
    assert value(metrics, "brownout_uninspected_total", reason="decoded_too_large") == 1
    assert value(metrics, "brownout_faults_injected_total", rule="bad", fault="malformed_json") is None
