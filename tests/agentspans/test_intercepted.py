"""An agent's OTLP exporter that goes through brownout (HTTP_PROXY): its exports are the agent's telemetry,
recognised as `otlp`, forwarded untouched, faulted only by a rule that names them, never a tool call."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from brownout.core.exchange import Exchange
from tests.agentspans.collector import collector
from tests.agentspans.otlpdata import AgentTracer, json_bytes, proto_bytes


def _agent_spans() -> Any:
    agent = AgentTracer()
    with agent.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}):
        with agent.span("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
            pass
    return agent.finished()


def _exporter(proxy: Any, url: str) -> OTLPSpanExporter:
    session = requests.Session()
    session.proxies = {"http": proxy.url, "https": proxy.url}
    return OTLPSpanExporter(endpoint=f"{url}/v1/traces", session=session, timeout=5)


CHAOS_EVERYWHERE = """
rules:
  - name: everything-fails
    match: {}
    fault: {type: http_error, status: 503}
    schedule: {probability: 1.0}
agent_spans: {}
"""


def _wait_for(seen: list[Exchange], n: int) -> None:
    for _ in range(250):
        if len(seen) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{len(seen)} exchanges, not {n}")


def test_an_export_through_the_proxy_reaches_the_collector_untouched(brownout_proxy: Any) -> None:
    seen: list[Exchange] = []
    spans = _agent_spans()
    with collector() as got:
        proxy = brownout_proxy(CHAOS_EVERYWHERE, on_exchange=seen.append)
        assert _exporter(proxy, got.url).export(spans) is SpanExportResult.SUCCESS  # the rule never fired
        (posted,) = got.wait()
        # JSON the way a JavaScript or collector exporter sends it: the generic format took it for a tool call.
        body = json_bytes(spans)
        answer = requests.post(
            f"{got.url}/v1/traces",
            data=body,
            headers={"content-type": "application/json"},
            proxies={"http": proxy.url},
            timeout=5,
        )
        assert answer.status_code == 200
        got.wait(2)
        _wait_for(seen, 2)
    assert posted.body == proto_bytes(spans) and posted.content_type == "application/x-protobuf"
    assert got.posted[1].body == body
    assert [(e.provider, e.operation) for e in seen] == [("otlp", "export_traces")] * 2
    assert all(not e.faults and not e.tool_calls and e.tool_name is None for e in seen)
    join = proxy.addon.pipeline.join
    assert join is not None
    spans_of, _ = join.store.spans_of(f"{spans[0].context.trace_id:032x}")
    assert sorted(s.name for s in spans_of.values()) == ["chat gpt-4o", "invoke_agent"]
    metrics = proxy.addon.pipeline.exporters.metrics.registry
    assert metrics.get_sample_value("brownout_agent_spans_received_total", {"source": "proxy"}) == 4


def test_no_span_or_invariant_looks_at_an_export(brownout_proxy: Any) -> None:
    """A tool policy that denies every tool: a JSON export was a tool call `traces` to it before."""
    config = """
invariants:
  - {type: tool_policy, deny: ["*"]}
"""
    seen: list[Exchange] = []
    with collector() as got:
        proxy = brownout_proxy(config, on_exchange=seen.append)
        finished: list[Any] = []
        proxy.addon.pipeline.exporters.add_span_processor(_Keep(finished))
        assert _exporter(proxy, got.url).export(_agent_spans()) is SpanExportResult.SUCCESS
        requests.post(
            f"{got.url}/v1/traces",
            data=json_bytes(_agent_spans()),
            headers={"content-type": "application/json"},
            proxies={"http": proxy.url},
            timeout=5,
        )
        _wait_for(seen, 2)
    assert proxy.addon.pipeline.exporters.recent_violations() == []
    assert finished == []  # brownout built no span of its own for the agent's telemetry


def test_a_rule_that_names_otlp_faults_the_export(brownout_proxy: Any) -> None:
    config = """
rules:
  - name: collector-down
    match: {provider: otlp}
    fault: {type: http_error, status: 400}
    schedule: {probability: 1.0}
"""
    with collector() as got:
        proxy = brownout_proxy(config)
        assert _exporter(proxy, got.url).export(_agent_spans()) is SpanExportResult.FAILURE
        assert got.posted == []


class _Keep:
    """A span processor that keeps every span brownout ends."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: Any) -> None:
        self.into.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 0) -> bool:
        return True


pytestmark = pytest.mark.timeout(60)


def test_recording_and_replaying_leave_the_agents_exports_to_its_collector(brownout_proxy: Any, tmp_path: Any) -> None:
    """A cassette holds the agent's work, not its telemetry: an export is neither written nor answered from one."""
    from tests.record.support import player, recorder

    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    spans = _agent_spans()
    with collector() as got:
        seen: list[Exchange] = []
        rec = recorder(brownout_proxy, cassettes, on_exchange=seen.append)
        assert _exporter(rec, got.url).export(spans) is SpanExportResult.SUCCESS
        got.wait()
        _wait_for(seen, 1)
        writer = rec.addon.tape.writer
        assert writer is not None and writer.flush(5)
        assert writer.written == 0 and not list(cassettes.iterdir())  # the export was the only exchange
        # A replay that fails every miss: the export is no miss, it reaches the collector.
        play = player(brownout_proxy, cassettes, miss="error")
        assert _exporter(play, got.url).export(spans) is SpanExportResult.SUCCESS
        got.wait(2)
    assert play.addon.tape.counts == {"hit": 0, "miss": 0, "passthrough": 0, "repeated": 0}
