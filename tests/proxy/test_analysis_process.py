"""`proxy.analysis: process`: spans, invariants and OTLP export in a child process, through the real
proxy with the official openai SDK as the agent, spans received by a collector decoding the real
protobuf, and what the proxy serves (/metrics, the violation ring, listeners) checked as inline.
Also what happens when the child dies, stalls or is full: traffic goes on, nothing is lost silently.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from brownout.proxy.configload import ConfigError, parse_config
from tests.e2e.conftest import Violations
from tests.exporters.test_otlp import Received, http_receiver  # noqa: F401 - fixture

MODEL = "gpt-4o-mini"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _config(otlp: str, **proxy: Any) -> str:
    settings = {"analysis": "process", **proxy}
    return f"""
version: 1
seed: 3
proxy: {json.dumps(settings)}
rules:
  - name: bad-args
    match: {{session: "bad-*", provider: openai}}
    fault: {{type: malformed_json, target: tool_arguments}}
invariants:
  - {{type: tool_arguments_json, severity: error}}
  - {{type: call_budget, max_calls: 2, severity: warning}}
exporters:
  otlp: {{endpoint: "{otlp}", protocol: http/protobuf, schedule_delay_ms: 50}}
"""


def _until(check: Callable[[], Any], what: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _metric(proxy: Any, name: str, **labels: str) -> float:
    port = proxy.addon.pipeline.exporters.metrics_port
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"{name}(?:{{(.*)}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def _ask(proxy: Any, upstream: Any, openai_client: Any, session: str) -> str:
    client = openai_client(proxy, upstream, session=session)
    msg = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER]
    )
    return str(msg.choices[0].message.tool_calls[0].function.arguments)


def _proxy(brownout_proxy: Any, upstream: Any, config: str) -> tuple[Any, Violations]:
    proxy = brownout_proxy(config, upstream=upstream)
    seen = Violations()
    proxy.addon.pipeline.violation_listeners.append(seen)
    return proxy, seen


def test_the_child_judges_and_exports_and_the_proxy_reports(
    brownout_proxy: Any, upstream: Any, openai_client: Any, http_receiver: tuple[str, Received]
) -> None:
    url, received = http_receiver
    proxy, seen = _proxy(brownout_proxy, upstream, _config(url))
    analysis = proxy.addon.pipeline.analysis
    assert analysis is not None and analysis.proc.pid != os.getpid()

    arguments = _ask(proxy, upstream, openai_client, "bad-1")
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)  # the fault reached the agent's SDK
    v = seen.wait("bad-1", "tool_arguments_json", timeout_s=10)[0]
    assert v.severity == "error" and v.rule == "bad-args" and v.fault == "malformed_json" and v.trace_id

    # Sessions live in the child: the third call of a session breaks its call budget, a fresh session's does not.
    for _ in range(3):
        json.loads(_ask(proxy, upstream, openai_client, "good-1"))
    budget = seen.wait("good-1", "call_budget", timeout_s=10)[0]
    assert budget.details["calls"] == 3
    assert [v.invariant for v in seen.all() if v.session_id == "good-1"] == ["call_budget"]

    # What the proxy serves: the violation ring, /metrics, the open sessions the child counts.
    kept = proxy.addon.pipeline.exporters.recent_violations()
    assert {(r["session_id"], r["invariant"]) for r in kept} == {
        ("bad-1", "tool_arguments_json"),
        ("good-1", "call_budget"),
    }
    assert _metric(proxy, "brownout_violations_total", invariant="tool_arguments_json") == 1
    assert _metric(proxy, "brownout_requests_total") == 4
    _until(lambda: _metric(proxy, "brownout_sessions_active") == 2, "two open sessions")
    assert _metric(proxy, "brownout_invariant_checks_dropped_total") == 0

    # The child's spans reach the collector, the violation on the span it is about.
    spans = _until(lambda: len(received.spans) >= 4 and received.spans, "four spans")
    (bad,) = [s for s in spans if s.trace_id.hex() == v.trace_id]
    assert bad.span_id.hex() == v.span_id
    assert [e.name for e in bad.events if e.name == "brownout.violation"] == ["brownout.violation"]
    assert _until(lambda: proxy.addon.pipeline.exporters.status()["otlp"]["exported"] >= 4, "exported count")


@pytest.mark.contained_errors
def test_a_dead_child_leaves_traffic_alone_and_judging_goes_on_inline(
    brownout_proxy: Any, upstream: Any, openai_client: Any, http_receiver: tuple[str, Received]
) -> None:
    url, _ = http_receiver
    proxy, seen = _proxy(brownout_proxy, upstream, _config(url))
    pipeline = proxy.addon.pipeline
    _ask(proxy, upstream, openai_client, "good-2")
    _until(lambda: pipeline.analysis.judged == 1, "the first exchange judged")
    pipeline.analysis.proc.kill()
    _until(lambda: pipeline.analysis is None, "the proxy to notice")
    assert _metric(proxy, "brownout_internal_errors_total", component="analysis") == 1
    assert _metric(proxy, "brownout_invariant_checks_dropped_total") == 0  # it had judged all it got

    _ask(proxy, upstream, openai_client, "bad-2")
    assert seen.wait("bad-2", "tool_arguments_json", timeout_s=10)[0].severity == "error"


@pytest.mark.contained_errors
def test_a_full_queue_counts_what_it_passes_unjudged(
    brownout_proxy: Any, upstream: Any, openai_client: Any, http_receiver: tuple[str, Received]
) -> None:
    url, _ = http_receiver
    proxy, seen = _proxy(brownout_proxy, upstream, _config(url, analysis_max_queued=1))
    analysis = proxy.addon.pipeline.analysis
    _until(lambda: analysis.ready, "the child to start")
    os.kill(analysis.proc.pid, signal.SIGSTOP)  # it stalls: exchanges wait for it
    try:
        for _ in range(3):
            _ask(proxy, upstream, openai_client, "bad-3")
        # All three are counted and logged at once; one waits to be judged, two never will be.
        _until(lambda: _metric(proxy, "brownout_requests_total") == 3, "three counted")
        assert _metric(proxy, "brownout_invariant_checks_dropped_total") == 2
        assert proxy.addon.pipeline.judging == 1 and not seen.all()
    finally:
        os.kill(analysis.proc.pid, signal.SIGCONT)
    assert seen.wait("bad-3", "tool_arguments_json", timeout_s=10)[0].severity == "error"  # the one that waited
    _until(lambda: proxy.addon.pipeline.judging == 0, "the waiting one judged")
    assert len([v for v in seen.all() if v.session_id == "bad-3"]) == 1


def test_a_reload_reaches_the_child(
    brownout_proxy: Any, upstream: Any, openai_client: Any, http_receiver: tuple[str, Received]
) -> None:
    url, _ = http_receiver
    proxy, seen = _proxy(brownout_proxy, upstream, _config(url))
    stricter = parse_config(_config(url).replace("max_calls: 2", "max_calls: 1"), source="reload.yaml")
    proxy.call(proxy.addon.pipeline.reload, stricter)
    for _ in range(2):
        _ask(proxy, upstream, openai_client, "good-4")
    assert seen.wait("good-4", "call_budget", timeout_s=10)[0].details == {"calls": 2, "max_calls": 1}


def test_idle_sessions_close_in_the_child(
    brownout_proxy: Any, upstream: Any, openai_client: Any, http_receiver: tuple[str, Received]
) -> None:
    url, _ = http_receiver
    proxy, _ = _proxy(brownout_proxy, upstream, _config(url, session_idle_s=0.5))
    _ask(proxy, upstream, openai_client, "good-5")
    _until(lambda: _metric(proxy, "brownout_sessions_active") == 1, "one open session")
    _until(lambda: _metric(proxy, "brownout_sessions_active") == 0, "the session closed", timeout_s=5)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("agent_spans: {}", "agent_spans"),
        ("state: {backend: redis, url: 'redis://127.0.0.1:1'}", "state.backend"),
    ],
)
def test_what_the_child_cannot_carry_is_a_config_error(extra: str, field: str) -> None:
    with pytest.raises(ConfigError, match=rf"proxy.analysis 'process' cannot be used with {re.escape(field)}"):
        parse_config(f"version: 1\nproxy: {{analysis: process}}\n{extra}\n", source="bad.yaml")


def test_a_child_that_cannot_start_hands_everything_back_to_judge_inline(tmp_path: Any) -> None:
    """Its config validates here but not there (the custom invariant's file is gone): nothing was judged
    in it, so what it was handed is judged inline, not dropped."""
    import asyncio

    from brownout.core.exchange import Exchange
    from brownout.core.guard import Guard
    from brownout.proxy.analysis import AnalysisProcess

    check = tmp_path / "checks.py"
    check.write_text("def check(span, session):\n    return []\n")
    config = parse_config(
        "version: 1\nproxy: {analysis: process}\ninvariants:\n  - {type: custom, callable: 'checks.py:check'}\n",
        source="c.yaml",
        base_dir=tmp_path,
    )
    check.unlink()
    back: list[tuple[list[Exchange], int]] = []
    exchange = Exchange(id="x1", session="s")

    async def run() -> AnalysisProcess:
        done = asyncio.Event()

        def lost(exchanges: list[Exchange], unjudged: int) -> None:
            back.append((exchanges, unjudged))
            done.set()

        analysis = AnalysisProcess(config, guard=Guard(), found=lambda _: None, lost=lost, dropped=lambda _: None)
        analysis.start()
        assert analysis.submit(exchange)
        await asyncio.wait_for(done.wait(), 30)
        return analysis

    analysis = asyncio.run(run())
    assert back == [([exchange], 0)] and not analysis.ready and not analysis.alive
    assert not analysis.submit(Exchange(id="x2", session="s"))


@pytest.mark.contained_errors
def test_what_a_child_that_never_started_was_handed_is_judged_inline(
    brownout_proxy: Any,
    upstream: Any,
    openai_client: Any,
    http_receiver: tuple[str, Received],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child that is no brownout (it sleeps two seconds and exits, never ready): what the proxy handed
    it meanwhile is judged inline once it is gone, and so is everything after."""
    url, _ = http_receiver
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 2\n")
    fake.chmod(0o755)
    monkeypatch.setattr("brownout.proxy.analysis.sys.executable", str(fake))
    proxy, seen = _proxy(brownout_proxy, upstream, _config(url))
    pipeline = proxy.addon.pipeline
    assert pipeline.analysis is not None and not pipeline.analysis.ready
    _ask(proxy, upstream, openai_client, "bad-6")  # handed to the child that will never answer
    _until(lambda: pipeline.analysis is None, "the child to be gone")
    assert seen.wait("bad-6", "tool_arguments_json", timeout_s=10)[0].severity == "error"
    _ask(proxy, upstream, openai_client, "bad-7")  # inline from now on
    assert seen.wait("bad-7", "tool_arguments_json", timeout_s=10)[0].severity == "error"
    assert _metric(proxy, "brownout_invariant_checks_dropped_total") == 0
