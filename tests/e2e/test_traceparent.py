"""brownout's span joins the agent's trace: the official openai SDK called inside an agent span whose
context travels as W3C traceparent (`opentelemetry.propagate.inject` into the SDK's `extra_headers`;
openai SDK v3 uses its own httpx fork, so no httpx instrumentation is involved)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from brownout.core.spans import session_trace_context
from tests.e2e.conftest import Spans, start_brownout

MSG = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture(scope="module")
def proxy(module_upstream: Any, module_workdir: Any, _ca_template: Any) -> Iterator[tuple[Any, Spans]]:
    with start_brownout("version: 1\nseed: 1\n", module_workdir, _ca_template, upstream=module_upstream) as handle:
        yield handle, Spans(handle)


@pytest.fixture
def agent_tracer() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """The agent's own OpenTelemetry SDK setup (not brownout's)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("agent"), exporter
    provider.shutdown()


def test_brownout_span_is_a_child_of_the_agent_span(proxy, module_upstream, openai_client, agent_tracer) -> None:
    handle, spans = proxy
    tracer, agent_exporter = agent_tracer
    client = openai_client(handle, module_upstream, session="agent-run-1")  # the username loses to traceparent
    with tracer.start_as_current_span("agent") as agent_span:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        assert headers["traceparent"].startswith("00-")
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=MSG, extra_headers=headers)
        streamed = list(
            client.chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True, extra_headers=headers)
        )
        # A plain httpx tool call from the same agent step carries the same context.
        with httpx.Client(proxy=handle.proxy_url("agent-run-1"), trust_env=False) as tools:
            assert tools.get(f"{module_upstream.url}/tools/weather?city=Paris", headers=headers).status_code == 200
    assert reply.choices[0].message.content and streamed

    agent_ctx = agent_span.get_span_context()
    trace_hex = f"{agent_ctx.trace_id:032x}"
    ours = spans.wait(trace_hex, 3)  # the exchange's session is the agent's trace id
    assert {s.name for s in ours} == {"chat gpt-4o-mini", "execute_tool weather"}
    for span in ours:
        assert span.context.trace_id == agent_ctx.trace_id
        assert span.parent is not None and span.parent.span_id == agent_ctx.span_id
        assert span.parent.is_remote
        assert span.kind is SpanKind.CLIENT
        assert span.attributes["brownout.session.id"] == trace_hex
    # The agent's span is the root its own exporter saw; brownout's spans hang under it.
    (exported_agent,) = agent_exporter.get_finished_spans()
    assert exported_agent.name == "agent" and exported_agent.parent is None
    assert all(exported_agent.start_time <= s.start_time and s.end_time <= exported_agent.end_time for s in ours)


def test_unsampled_agent_context_keeps_the_session_and_the_agents_sampling(
    proxy, module_upstream, openai_client
) -> None:
    """traceparent flags 00 (sampled out by the agent): the session is still the trace id; no span is exported."""
    handle, spans = proxy
    trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736"
    seen: list[Any] = []
    handle.addon.pipeline.listeners.append(seen.append)
    try:
        client = openai_client(handle, module_upstream)
        client.chat.completions.create(
            model="gpt-4o-mini", messages=MSG, extra_headers={"traceparent": f"00-{trace_hex}-00f067aa0ba902b7-00"}
        )
        _wait(lambda: any(ex.session == trace_hex for ex in seen))
        # Listeners run after the span ended: had it been sampled, the exporter would have it now.
        assert spans.of(trace_hex) == []
    finally:
        handle.addon.pipeline.listeners.remove(seen.append)


def test_without_traceparent_a_session_is_one_trace(proxy, module_upstream, openai_client) -> None:
    handle, spans = proxy
    a = openai_client(handle, module_upstream, session="no-tp-a")
    b = openai_client(handle, module_upstream, session="no-tp-b")
    for _ in range(2):
        a.chat.completions.create(model="gpt-4o-mini", messages=MSG)
    b.chat.completions.create(model="gpt-4o-mini", messages=MSG)
    first, second = spans.wait("no-tp-a", 2)
    (other,) = spans.wait("no-tp-b", 1)
    assert first.context.trace_id == second.context.trace_id != other.context.trace_id
    assert first.context.span_id != second.context.span_id
    # The trace id is derived from the session id: stable across restarts and replicas.
    expected = trace.get_current_span(session_trace_context("no-tp-a")).get_span_context()
    assert first.context.trace_id == expected.trace_id
    assert first.parent is not None and first.parent.span_id == expected.span_id


def _wait(cond: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cond()
