"""no_pii scans what the exchange keeps (proxy.capture_max_bytes per body): a larger body is scanned up
to that bound and its span says the rest went unchecked; raising the bound scans more.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brownout.invariants.no_pii import PARTIAL_EVENT

EMAIL = "alice.liddell@example.org"


def run(brownout_proxy: Any, upstream: Any, capture: int, content: str) -> tuple[list[Any], list[Any]]:
    """One chat request through the proxy; its violations and its finished spans."""
    config = f"version: 1\nproxy: {{capture_max_bytes: {capture}}}\ninvariants:\n  - {{type: no_pii}}\n"
    proxy = brownout_proxy(config, mode="reverse", upstream=upstream)
    spans = InMemorySpanExporter()
    violations: list[Any] = []

    def listen() -> None:
        proxy.addon.pipeline.exporters.add_span_processor(SimpleSpanProcessor(spans))
        proxy.addon.pipeline.violation_listeners.append(violations.append)

    proxy.call(listen)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    with httpx.Client(base_url=proxy.url, trust_env=False, timeout=30) as client:
        assert client.post("/v1/chat/completions", json=body).status_code == 200
    deadline = time.monotonic() + 10
    while not spans.get_finished_spans() and time.monotonic() < deadline:
        time.sleep(0.02)
    # The span is exported mid-way through the exchange's completion, before its violations are announced:
    # a hop onto the loop runs after the rest of it.
    proxy.call(lambda: None)
    return violations, list(spans.get_finished_spans())


def partial_events(spans: list[Any]) -> list[dict[str, Any]]:
    return [dict(e.attributes) for s in spans for e in s.events if e.name == PARTIAL_EVENT]


@pytest.mark.timeout(60)
def test_pii_beyond_the_capture_bound_is_not_scanned_and_the_span_says_so(upstream: Any, brownout_proxy: Any) -> None:
    content = "x" * 2_500_000 + f" write to {EMAIL}"  # the address sits past the first MiB
    violations, spans = run(brownout_proxy, upstream, 1_048_576, content)
    assert violations == []
    [event] = partial_events(spans)
    assert event["brownout.no_pii.direction"] == "request"
    assert event["brownout.no_pii.scanned_bytes"] == 1_048_576
    assert event["brownout.no_pii.body_bytes"] > 2_500_000


@pytest.mark.timeout(60)
def test_a_larger_capture_bound_scans_the_whole_body(upstream: Any, brownout_proxy: Any) -> None:
    content = "x" * 2_500_000 + f" write to {EMAIL}"
    violations, spans = run(brownout_proxy, upstream, 4_194_304, content)
    assert [v.details["kind"] for v in violations] == ["email"]
    assert partial_events(spans) == []


@pytest.mark.timeout(60)
def test_a_body_within_the_bound_is_scanned_whole_without_a_note(upstream: Any, brownout_proxy: Any) -> None:
    violations, spans = run(brownout_proxy, upstream, 1_048_576, "x" * 500_000 + f" {EMAIL}")
    assert [v.details["kind"] for v in violations] == ["email"]
    assert spans and partial_events(spans) == []
