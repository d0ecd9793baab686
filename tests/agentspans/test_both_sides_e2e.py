"""The invariants that need both sides, through the real proxy: the agent's spans (exported as a real
agent's are, batched over OTLP/HTTP) joined to the wire, each settled trace judged once."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from brownout.invariants.records import Violation
from tests.agentspans.otlpdata import ExportingAgent
from tests.e2e.conftest import Spans, Violations

CONFIG = """
agent_spans:
  receiver: {listen: "127.0.0.1:0"}
  join_wait_s: 5
  settle_s: 1
rules:
  - name: weather-down
    match: {path: "/tools/weather*"}
    fault: {type: http_error, status: 500}
    schedule: {probability: 1.0}
invariants:
  - {type: claimed_success}
  - {type: missing_span}
"""


def _wait(violations: Violations, invariant: str, timeout_s: float = 15.0) -> list[Violation]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [v for v in violations.all() if v.invariant == invariant]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {invariant} violation: {violations.all()}")


def test_a_tool_failure_the_agent_papers_over(brownout_proxy: Any, upstream: Any) -> None:
    proxy = brownout_proxy(CONFIG)
    violations = Violations()
    proxy.addon.pipeline.violation_listeners.append(violations)
    spans = Spans(proxy)
    agent = ExportingAgent(str(proxy.addon.pipeline.join.receiver.endpoint), delay_ms=200)
    http = httpx.Client(proxy=proxy.url)
    with agent.span("invoke_agent helper", {"gen_ai.operation.name": "invoke_agent"}) as run:
        with agent.span(
            "execute_tool get_weather", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
        ):
            answer = http.get(f"{upstream.url}/tools/weather?city=Oslo")
            assert answer.status_code == 500
            # ... and the tool says it is sunny anyway
    (v,) = _wait(violations, "claimed_success")
    assert v.details["claimed_by"] == [f"{run.get_span_context().span_id:016x}"]
    assert v.tool == "weather" and v.fault == "http_error"
    late = [s for s in spans.all() if s.name == "brownout.violation claimed_success"]
    assert late and late[0].parent is not None and f"{late[0].parent.span_id:016x}" == v.span_id
    time.sleep(1.5)  # settled and judged once: nothing more comes of it
    assert [x.invariant for x in violations.all()] == ["claimed_success"]
    agent.close()


def test_a_call_the_agents_instrumentation_missed(brownout_proxy: Any, upstream: Any, openai_client: Any) -> None:
    proxy = brownout_proxy(CONFIG)
    violations = Violations()
    proxy.addon.pipeline.violation_listeners.append(violations)
    agent = ExportingAgent(str(proxy.addon.pipeline.join.receiver.endpoint), delay_ms=200)
    with agent.span("invoke_agent helper", {"gen_ai.operation.name": "invoke_agent"}, ok=False):
        openai_client(proxy, upstream).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    (v,) = _wait(violations, "missing_span")
    assert v.message.startswith("LLM call gpt-4o-mini") and v.exchange_id is not None
    agent.close()


pytestmark = pytest.mark.timeout(90)
