"""The join: a wire call becomes the child of the agent span it belongs to (by trace context, else by time,
provider and model), and its span and exchange-log line carry that span's id; a call without trace context
waits, bounded, for the agent's batched spans."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import propagate

from brownout.core.exchange import Exchange
from tests.agentspans.otlpdata import ExportingAgent
from tests.e2e.conftest import Spans

MODEL = "gpt-4o-mini"
CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": MODEL}


def _config(tmp_path: Path, wait_s: float) -> str:
    return f"""
agent_spans:
  receiver: {{listen: "127.0.0.1:0"}}
  join_wait_s: {wait_s}
exporters:
  jsonl: {{exchanges_path: "{tmp_path / "exchanges.jsonl"}"}}
"""


class Seen:
    def __init__(self) -> None:
        self.items: list[tuple[float, Exchange]] = []

    def __call__(self, exchange: Exchange) -> None:
        self.items.append((time.monotonic(), exchange))

    def wait(self, n: int = 1, timeout_s: float = 15.0) -> list[tuple[float, Exchange]]:
        deadline = time.monotonic() + timeout_s
        while len(self.items) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.items) >= n, f"{len(self.items)} exchanges, not {n}"
        return self.items


def _receiver(proxy: Any) -> str:
    return str(proxy.addon.pipeline.join.receiver.endpoint)


def _log_line(tmp_path: Path, exchange_id: str) -> dict[str, Any]:
    path = tmp_path / "exchanges.jsonl"
    for _ in range(250):
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        found = [x for x in lines if x["id"] == exchange_id]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no exchange-log line for {exchange_id}")


def test_a_call_without_trace_context_waits_for_its_agent_span_and_becomes_its_child(
    tmp_path: Path, brownout_proxy: Any, upstream: Any, openai_client: Any
) -> None:
    seen = Seen()
    proxy = brownout_proxy(_config(tmp_path, 8), on_exchange=seen)
    spans = Spans(proxy)
    agent = ExportingAgent(_receiver(proxy), delay_ms=500)
    client = openai_client(proxy, upstream)
    with agent.span("invoke_agent helper", {"gen_ai.operation.name": "invoke_agent"}):
        with agent.span(f"chat {MODEL}", CHAT) as chat:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    sent = time.monotonic()
    chat_ctx = chat.get_span_context()
    ((done, exchange),) = seen.wait()
    assert done - sent < 6  # released by the agent span's arrival, not by the 8 s bound
    assert (exchange.agent_join, exchange.agent_span_id) == ("time", f"{chat_ctx.span_id:016x}")
    (wire,) = spans.all()
    assert wire.context.trace_id == chat_ctx.trace_id  # the agent's trace
    assert wire.parent is not None and wire.parent.span_id == chat_ctx.span_id  # under its chat span
    assert wire.attributes["brownout.agent.span_id"] == f"{chat_ctx.span_id:016x}"
    assert wire.attributes["brownout.agent.join"] == "time"
    line = _log_line(tmp_path, exchange.id)
    assert (line["agent_span_id"], line["agent_join"]) == (f"{chat_ctx.span_id:016x}", "time")
    assert line["agent_trace_id"] == f"{chat_ctx.trace_id:032x}"
    agent.close()


def test_a_call_with_trace_context_is_joined_at_once(
    tmp_path: Path, brownout_proxy: Any, upstream: Any, openai_client: Any
) -> None:
    seen = Seen()
    proxy = brownout_proxy(_config(tmp_path, 30), on_exchange=seen)
    agent = ExportingAgent(_receiver(proxy), delay_ms=60_000)  # its spans would come far too late to wait for
    client = openai_client(proxy, upstream)
    with agent.span(f"chat {MODEL}", CHAT) as chat:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        started = time.monotonic()
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_headers=carrier)
    ((done, exchange),) = seen.wait()
    assert done - started < 5
    assert (exchange.agent_join, exchange.agent_span_id) == ("trace_context", f"{chat.get_span_context().span_id:016x}")
    assert _log_line(tmp_path, exchange.id)["agent_join"] == "trace_context"
    agent.close()


def test_a_call_no_agent_span_claims_goes_on_after_the_wait(
    tmp_path: Path, brownout_proxy: Any, upstream: Any, openai_client: Any
) -> None:
    seen = Seen()
    proxy = brownout_proxy(_config(tmp_path, 0.5), on_exchange=seen)
    spans = Spans(proxy)
    started = time.monotonic()
    openai_client(proxy, upstream).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    ((done, exchange),) = seen.wait()
    assert 0.4 < done - started < 5
    assert exchange.agent_span_id is None
    (wire,) = spans.all()
    assert "brownout.agent.span_id" not in (wire.attributes or {})
    assert "agent_span_id" not in _log_line(tmp_path, exchange.id)
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert registry.get_sample_value("brownout_agent_joins_total", {"how": "none"}) == 1


pytestmark = pytest.mark.timeout(90)
