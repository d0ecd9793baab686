"""OTLP traces from the real proxy, driven by the official openai SDK, received by in-test collectors
that decode the real protobuf (`opentelemetry-proto`) over OTLP/HTTP and over gRPC; and an unreachable
collector that costs the agent nothing but a counter, with a bounded shutdown."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import openai
import pytest
from opentelemetry import propagate
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import TracerProvider

from tests.e2e.conftest import Received, start_brownout
from tests.exporters.test_otlp import _closed_port

MODEL = "gpt-4o-mini"
SECRET = "azure-query-secret-1234"
LEAK = "Please send the invoice to jane.doe@acme-corp.com."


def _config(endpoint: str, protocol: str, **otlp: Any) -> str:
    extra = "".join(f", {k}: {v}" for k, v in otlp.items())
    return f"""
version: 1
seed: 5
exporters:
  otlp: {{endpoint: "{endpoint}", protocol: {protocol}, schedule_delay_ms: 50{extra}}}
rules:
  - name: first-429
    match: {{provider: openai, operation: chat}}
    fault: {{type: http_error, status: 429, retry_after_s: 2}}
    schedule: {{first: 1}}
invariants:
  - {{type: no_pii}}
"""


def _attrs(kvs: Any) -> dict[str, Any]:
    """OTLP KeyValues -> python values (the AnyValue oneof that is set)."""
    out: dict[str, Any] = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        if which == "array_value":
            value = [getattr(v, v.WhichOneof("value")) for v in value.values]
        out[kv.key] = value
    return out


def _drive(proxy: Any, upstream: Any, openai_client: Any) -> tuple[str, str]:
    """An agent step inside its own span: an injected 429 the agent gives up on, then a call that leaks PII.
    Returns the agent's trace id and span id (hex)."""
    tracer = TracerProvider().get_tracer("agent")
    client = openai_client(proxy, upstream, session="otlp-run", default_query={"api-key": SECRET})
    with tracer.start_as_current_span("agent") as agent:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_headers=headers
            )
        reply = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": LEAK}], extra_headers=headers
        )
    assert reply.choices[0].message.content
    ctx = agent.get_span_context()
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def _wait_spans(got: Received, n: int, timeout_s: float = 10.0) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    while len(got.spans) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(got.spans) >= n, f"collector got {len(got.spans)} spans, expected {n}"
    return list(got.spans)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_spans_reach_an_otlp_collector(
    protocol: str, request: pytest.FixtureRequest, upstream_tls: Any, brownout_proxy: Any, openai_client: Any
) -> None:
    url, got = request.getfixturevalue("http_receiver" if protocol == "http/protobuf" else "grpc_receiver")
    proxy = brownout_proxy(_config(url, protocol), upstream=upstream_tls)
    trace_hex, agent_span_hex = _drive(proxy, upstream_tls, openai_client)
    spans = sorted(_wait_spans(got, 2), key=lambda s: s.start_time_unix_nano)
    assert len(spans) == 2 and got.resource["service.name"] == "brownout"
    rejected, answered = spans

    for span in spans:
        attrs = _attrs(span.attributes)
        assert span.name == "chat gpt-4o-mini"
        assert span.kind == trace_pb2.Span.SpanKind.SPAN_KIND_CLIENT
        assert span.trace_id.hex() == trace_hex and span.parent_span_id.hex() == agent_span_hex
        assert attrs["gen_ai.provider.name"] == "openai" and attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == MODEL and attrs["http.request.method"] == "POST"
        # The upstream, not the proxy (both are on loopback here: the port tells them apart).
        assert attrs["server.address"] == "127.0.0.1"
        assert attrs["server.port"] == upstream_tls.port != proxy.port
        assert attrs["url.full"] == f"https://127.0.0.1:{upstream_tls.port}/v1/chat/completions?api-key=REDACTED"
        assert attrs["brownout.session.id"] == trace_hex  # traceparent wins over the proxy username
        assert SECRET not in str(span) and "sk-test" not in str(span)  # no credentials anywhere
        assert LEAK not in str(span)  # no prompt content unless capture_content is on

    attrs = _attrs(rejected.attributes)
    assert attrs["http.response.status_code"] == 429 and attrs["error.type"] == "rate_limit_exceeded"
    assert attrs["brownout.fault.injected"] is True and attrs["brownout.fault.rules"] == ["first-429"]
    assert rejected.status.code == trace_pb2.Status.StatusCode.STATUS_CODE_ERROR
    (fault,) = [_attrs(e.attributes) for e in rejected.events if e.name == "brownout.fault"]
    assert fault["brownout.fault.rule"] == "first-429" and fault["brownout.fault.type"] == "http_error"
    assert fault["brownout.fault.param.status"] == 429 and fault["brownout.fault.param.retry_after_s"] == 2
    assert not [e for e in rejected.events if e.name == "brownout.violation"]

    attrs = _attrs(answered.attributes)
    assert attrs["http.response.status_code"] == 200 and attrs["brownout.fault.injected"] is False
    assert attrs["gen_ai.response.model"] == MODEL and attrs["gen_ai.response.id"].startswith("chatcmpl-")
    assert attrs["gen_ai.response.finish_reasons"] == ["stop"]
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert "error.type" not in attrs
    (violation,) = [_attrs(e.attributes) for e in answered.events if e.name == "brownout.violation"]
    assert violation["brownout.violation.invariant"] == "no_pii"
    assert violation["brownout.violation.severity"] == "critical"
    assert violation["brownout.violation.message"].startswith("email in request body at offset ")
    assert answered.status.code == trace_pb2.Status.StatusCode.STATUS_CODE_ERROR
    assert answered.status.message.startswith("invariant no_pii: ")
    assert not [e for e in answered.events if e.name == "brownout.fault"]


def _dropped_on_metrics_port(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False).text
    m = re.search(r'^brownout_export_dropped_total\{exporter="otlp"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_unreachable_collector_costs_only_a_counter(
    upstream: Any, openai_client: Any, tmp_path: Any, _ca_template: Any
) -> None:
    config = _config(f"http://127.0.0.1:{_closed_port()}", "http/protobuf", timeout_s=0.5)
    cm = start_brownout(config, tmp_path, _ca_template, upstream=upstream)
    proxy = cm.__enter__()
    try:
        metrics = proxy.addon.pipeline.exporters.metrics
        client = openai_client(proxy, upstream, session="no-collector")
        durations = []
        for i in range(6):
            started = time.perf_counter()
            try:
                client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
            except openai.RateLimitError:
                assert i == 0  # the first call meets the injected 429, as with a collector
            durations.append(time.perf_counter() - started)
        assert max(durations) < 0.5, durations  # nothing waits on the collector
        deadline = time.monotonic() + 10
        dropped = lambda: metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "otlp"})
        while (dropped() or 0) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert dropped() == 6
        assert _dropped_on_metrics_port(proxy.addon.pipeline.exporters.metrics_port) == 6
        assert metrics.registry.get_sample_value("brownout_internal_errors_total", {"component": "exporter:otlp"}) == 0
        # Spans still queued at shutdown: the flush gives up in seconds, not the SDK's 30 s.
        for _ in range(3):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    finally:
        started = time.perf_counter()
        cm.__exit__(None, None, None)
        took = time.perf_counter() - started
    assert took < 5.0, f"shutdown took {took:.1f} s"
