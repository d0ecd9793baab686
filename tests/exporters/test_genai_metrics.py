"""The GenAI semconv metrics of each version: names, labels and which exchange goes where."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from brownout.core.exchange import RealtimeInfo, Usage
from brownout.core.semconv import LATEST, PINNED, Semconv
from brownout.exporters.config import ExportersConfig
from brownout.exporters.hub import Exporters
from brownout.exporters.label_bounds import MAX_ERROR_TYPES
from brownout.exporters.metrics import Metrics
from brownout.proxy.configload import ConfigError, parse_config
from tests.exporters.expsamples import exchange


def _metrics(semconv: Semconv) -> Metrics:
    return Metrics(registry=CollectorRegistry(), semconv=semconv)


def _families(metrics: Metrics) -> set[str]:
    """The gen_ai_* names /metrics declares, as the docs list them (counters with `_total`)."""
    text = generate_latest(metrics.registry).decode()
    return {
        f.name + ("_total" if f.type == "counter" else "")
        for f in text_string_to_metric_families(text)
        if f.name.startswith("gen_ai_")
    }


def _traffic(metrics: Metrics) -> None:
    metrics.observe_exchange(exchange(usage=Usage(100, 20, cache_read_tokens=30, cache_write_tokens=0)))
    metrics.observe_exchange(
        exchange(operation="embeddings", path="/v1/embeddings", model="text-embedding-3-small", usage=Usage(8, None))
    )
    metrics.observe_exchange(
        exchange(provider="http", operation="execute_tool", host="tools.local", model=None, tool_name="weather",
                 usage=Usage())
    )  # fmt: skip
    generation = RealtimeInfo(kind="generation", session_id="sess_1", status="completed")
    metrics.observe_exchange(
        exchange(operation="realtime", model="gpt-realtime", realtime=generation, usage=Usage(9, 4))
    )


def test_pinned_keeps_the_names_dashboards_read() -> None:
    metrics = _metrics(PINNED)
    _traffic(metrics)
    assert (
        _families(metrics)
        == {m.prometheus for m in PINNED.metrics.all()}
        == {
            "gen_ai_client_operation_duration_seconds",
            "gen_ai_client_token_usage",
        }
    )
    get = metrics.registry.get_sample_value
    chat = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "openai", "gen_ai_request_model": "gpt-4o-mini"}
    ok = {"error_type": ""}  # error.type only when the operation failed (Prometheus reads "" as no label)
    assert get("gen_ai_client_operation_duration_seconds_count", chat | ok) == 1
    assert get("gen_ai_client_token_usage_sum", {**chat, "gen_ai_token_type": "input"}) == 100
    tool = {"gen_ai_operation_name": "execute_tool", "gen_ai_provider_name": "other", "gen_ai_request_model": "none"}
    assert get("gen_ai_client_operation_duration_seconds_count", tool | ok) == 1


def test_latest_splits_durations_and_counts_tokens() -> None:
    metrics = _metrics(LATEST)
    _traffic(metrics)
    assert _families(metrics) == {m.prometheus for m in LATEST.metrics.all()}
    assert not _families(metrics) & {"gen_ai_client_token_usage"}
    get = metrics.registry.get_sample_value
    chat = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "openai", "gen_ai_request_model": "gpt-4o-mini"}
    unknown = {**chat, "gen_ai_token_modality": "unknown"}
    ok = {"error_type": ""}
    assert get("gen_ai_client_inference_duration_seconds_count", chat | ok) == 1
    assert get("gen_ai_client_operation_duration_seconds_count", chat | ok) is None  # not reported for inference
    assert get("gen_ai_client_inference_usage_input_tokens_total", unknown) == 100
    assert get("gen_ai_client_inference_usage_output_tokens_total", unknown) == 20
    assert get("gen_ai_client_inference_usage_cache_read_input_tokens_total", unknown) == 30
    assert get("gen_ai_client_inference_usage_cache_write_input_tokens_total", unknown) is None  # none written
    assert get("gen_ai_client_inference_operation_input_tokens_sum", chat) == 100
    assert get("gen_ai_client_inference_operation_output_tokens_count", chat) == 1
    embed = {**chat, "gen_ai_operation_name": "embeddings", "gen_ai_request_model": "text-embedding-3-small"}
    assert get("gen_ai_client_embeddings_duration_seconds_count", embed | ok) == 1
    assert get("gen_ai_client_embeddings_operation_input_tokens_sum", embed) == 8
    assert (
        get("gen_ai_client_inference_usage_input_tokens_total", {**embed, "gen_ai_token_modality": "unknown"}) is None
    )
    tool = {"gen_ai_operation_name": "execute_tool", "gen_ai_tool_name": "weather"}
    assert get("gen_ai_execute_tool_duration_seconds_count", tool | ok) == 1
    # A realtime generation is no well-known inference operation: the generic duration, tokens counted.
    realtime = {**chat, "gen_ai_operation_name": "realtime_inference", "gen_ai_request_model": "gpt-realtime"}
    assert get("gen_ai_client_operation_duration_seconds_count", realtime | ok) == 1
    assert (
        get("gen_ai_client_inference_usage_output_tokens_total", {**realtime, "gen_ai_token_modality": "unknown"}) == 4
    )


@pytest.mark.parametrize("semconv", [PINNED, LATEST], ids=lambda s: s.key)
def test_a_failed_operation_carries_its_error_type_bounded(semconv: Semconv) -> None:
    metrics = _metrics(semconv)
    name = semconv.metrics.inference_duration.prometheus + "_count"
    chat = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "openai", "gen_ai_request_model": "gpt-4o-mini"}
    metrics.observe_exchange(exchange(status=429, error_type="rate_limit_exceeded"))
    metrics.observe_exchange(exchange(status=503))  # no provider type: the status, as on the span
    metrics.observe_exchange(exchange(status=None, error_type="connection"))
    for n in range(MAX_ERROR_TYPES + 5):  # an upstream inventing a type per answer cannot grow the series count
        metrics.observe_exchange(exchange(status=400, error_type=f"invented_{n}"))
    metrics.observe_exchange(exchange(status=401, error_type="sk-proj-" + "A1b2C3d4" * 6))  # never a key as a label
    get = metrics.registry.get_sample_value
    assert get(name, chat | {"error_type": "rate_limit_exceeded"}) == 1
    assert get(name, chat | {"error_type": "503"}) == 1
    assert get(name, chat | {"error_type": "connection"}) == 1
    assert get(name, chat | {"error_type": "invented_0"}) == 1
    assert get(name, chat | {"error_type": "_OTHER"}) == 7  # 6 past the cap, and the key-shaped one
    labels = {s.labels["error_type"] for f in metrics.registry.collect() for s in f.samples if s.name == name}
    assert len(labels) == MAX_ERROR_TYPES + 3  # the 503, connection and _OTHER come on top of the cap


def test_each_hub_resolves_its_own_version() -> None:
    """Two hubs in one process, each from its own config and environment: nothing is process-wide."""
    opt_in = {"OTEL_SEMCONV_STABILITY_OPT_IN": "http,gen_ai_latest_experimental"}
    hubs = {
        "env": Exporters(ExportersConfig(), registry=CollectorRegistry(), environ=opt_in),
        "config": Exporters(ExportersConfig(semconv="latest"), registry=CollectorRegistry(), environ={}),
        "default": Exporters(ExportersConfig(), registry=CollectorRegistry(), environ={}),
    }
    try:
        assert hubs["env"].semconv is LATEST and hubs["config"].semconv is LATEST
        assert hubs["default"].semconv is PINNED
        for hub in hubs.values():
            hub.on_exchange(exchange())
        assert "gen_ai_client_inference_duration_seconds" in _families(hubs["env"].metrics)
        assert "gen_ai_client_inference_duration_seconds" not in _families(hubs["default"].metrics)
    finally:
        for hub in hubs.values():
            hub.shutdown(timeout_s=0.1)


def test_a_wrong_version_in_the_config_names_the_field_and_line() -> None:
    text = "version: 1\nexporters:\n  semconv: newest\n"
    with pytest.raises(ConfigError, match=r"chaos.yaml:3: exporters.semconv: .*'pinned' or 'latest'"):
        parse_config(text, "chaos.yaml")
    assert parse_config("exporters: {semconv: latest}\n").exporters.semconv == "latest"
