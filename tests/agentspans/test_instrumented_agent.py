"""A real agent (the OpenAI Agents SDK, instrumented by opentelemetry-instrumentation-openai-agents-v2,
exporting over OTLP/HTTP) runs through brownout against the mock upstream, with brownout's OTLP receiver
and the invariants that need both sides: a faulted tool call the agent papers over is claimed_success, a
call from a client no instrumentation wraps is missing_span, and a clean run raises nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.invariants.records import Violation
from brownout.proxy.endpoints import endpoint_env
from tests.e2e.conftest import Spans, Violations

pytest.importorskip("opentelemetry.instrumentation.openai_agents")
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "agent-spans" / "weather_agent.py"
EXAMPLE = ROOT / "examples" / "chaos" / "agent-spans.yaml"  # docs/telemetry.md's worked example


def _config(*, tool_down: bool) -> str:
    """The example config as it is, but on a free port, settling sooner, logs off, and with or without its fault."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["agent_spans"] |= {"receiver": {"listen": "127.0.0.1:0"}, "join_wait_s": 8, "settle_s": 2}
    config.pop("exporters")
    if not tool_down:
        config.pop("rules")
    return yaml.safe_dump(config)


def _run(proxy: Any, upstream: Any, mode: str, session: str) -> tuple[Violations, Spans]:
    violations = Violations()
    proxy.addon.pipeline.violation_listeners.append(violations)
    spans = Spans(proxy)
    # What `brownout exec` hands the agent: the proxy, the CA bundle and OTEL_EXPORTER_OTLP_* for the receiver.
    own = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("OTEL_")}
    env = {**own, **proxy.env_for(session), **endpoint_env(proxy), "DEMO_UPSTREAM": upstream.url}
    done = subprocess.run([sys.executable, str(AGENT), mode], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ANSWER:" in done.stdout
    return violations, spans


def _settled(proxy: Any, violations: Violations, timeout_s: float = 30.0) -> list[Violation]:
    """Every violation, once the join holds nothing more (no call waiting, no trace unjudged)."""
    join = proxy.addon.pipeline.join
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (join.waiting or len(join.store)):
        time.sleep(0.1)
    assert not join.waiting and not len(join.store), "the join did not settle"
    return violations.all()


def test_a_clean_run_raises_nothing(brownout_proxy: Any, upstream: Any) -> None:
    proxy = brownout_proxy(_config(tool_down=False))
    violations, spans = _run(proxy, upstream, "clean", "clean-run")
    assert _settled(proxy, violations) == []
    wire = [s for s in spans.all() if (s.attributes or {}).get("brownout.session.id") == "clean-run"]
    assert len(wire) == 3  # two model calls and the weather tool, each joined to the agent's span
    assert all(s.attributes.get("brownout.agent.join") == "time" for s in wire)
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert registry.get_sample_value("brownout_agent_joins_total", {"how": "time"}) == 3
    assert registry.get_sample_value("brownout_agent_spans_received_total", {"source": "receiver"}) > 5


def test_a_faulted_tool_call_the_agent_papers_over_is_claimed_success(brownout_proxy: Any, upstream: Any) -> None:
    proxy = brownout_proxy(_config(tool_down=True))
    violations, _ = _run(proxy, upstream, "clean", "tool-down")
    found = _settled(proxy, violations)
    assert [v.invariant for v in found] == ["claimed_success"]
    (v,) = found
    assert v.tool == "weather" and v.fault == "http_error" and v.rule == "weather-down" and v.session_id == "tool-down"
    assert "tool call 'weather'" in v.message and "failed and was not retried successfully" in v.message
    # the tool's own span (status OK), then the agent runs above it, nearest first
    assert v.details["claimed_by"][0] == v.details["agent_span_id"] and len(v.details["claimed_by"]) >= 3
    assert "('execute_tool get_weather' (" in v.message


def test_a_call_from_an_uninstrumented_client_is_missing_span(brownout_proxy: Any, upstream: Any) -> None:
    proxy = brownout_proxy(_config(tool_down=False))
    violations, _ = _run(proxy, upstream, "raw-client", "raw")
    found = _settled(proxy, violations)
    assert [v.invariant for v in found] == ["missing_span"]
    assert (
        found[0].message.startswith("LLM call gpt-4o-mini") and "has no span in the agent's trace" in found[0].message
    )
