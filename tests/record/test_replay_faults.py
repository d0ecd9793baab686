"""Faults act on replayed answers as on live ones, and the same seed and config give the same decisions and
the same bytes to the client, run after run. Spans say the answer was replayed."""

from __future__ import annotations

import json
import ssl
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brownout.proxy.embed import ProxyHandle
from tests.record.support import mock_upstream, player, recorder, wait_exchanges, wait_recorded

CHAOS = """
seed: 7
rules:
  - name: slow
    match: {provider: openai}
    fault: {type: latency, delay_ms: 10}
    schedule: {probability: 0.5}
  - name: limited
    match: {provider: openai, stream: false}
    fault: {type: http_error, status: 429, retry_after_s: 0}
    schedule: {probability: 0.3}
  - name: cut
    match: {provider: openai, stream: true}
    fault: {type: truncate, after_events: 2}
    schedule: {probability: 0.4}
  - name: bad-args
    match: {provider: openai, tool: get_weather}
    fault: {type: malformed_json, target: tool_arguments}
    schedule: {probability: 0.5}
  - name: stall
    match: {provider: openai, stream: true}
    fault: {type: stall, after_events: 1, pause_ms: 30}
    schedule: {probability: 0.5}
invariants:
  - {type: tool_arguments_json}
"""
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CITIES = ["Paris", "Oslo", "Lima", "Pune", "Kyiv", "Rome", "Bern", "Doha"]


def requests() -> list[dict[str, Any]]:
    out = []
    for city in CITIES:
        messages = [{"role": "user", "content": f"What is the weather in {city}?"}]
        out.append({"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS})
        out.append({"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "stream": True})
    return out


def send_all(proxy: ProxyHandle, base: str) -> list[tuple[int, bytes]]:
    """Each request once, in order, in one session; (status, body bytes as the client got them)."""
    verify = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    got = []
    with httpx.Client(proxy=proxy.proxy_url("agent-7"), verify=verify, timeout=10) as client:
        for body in requests():
            try:
                r = client.post(f"{base}/v1/chat/completions", json=body)
                got.append((r.status_code, r.content))
            except httpx.TransportError as e:  # a reset is an outcome too
                got.append((0, type(e).__name__.encode()))
    return got


def decisions(proxy: ProxyHandle) -> list[tuple[str, str, str, int]]:
    return [(d.session, d.rule, d.outcome, d.index) for d in proxy.addon.engine.decisions.recent()]


def test_faults_on_replay_are_reproducible_run_after_run(brownout_proxy, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        live = send_all(recorder(brownout_proxy, cassettes), up.url)
        url = up.url
    assert all(status == 200 for status, _ in live)

    runs = []
    for _ in range(2):
        exchanges: list[Any] = []
        proxy = player(brownout_proxy, cassettes, CHAOS, on_exchange=exchanges.append)
        spans, violations = InMemorySpanExporter(), []

        def listen(proxy: ProxyHandle = proxy, spans: Any = spans, violations: list[Any] = violations) -> None:
            proxy.addon.pipeline.exporters.add_span_processor(SimpleSpanProcessor(spans))
            proxy.addon.pipeline.violation_listeners.append(violations.append)

        proxy.call(listen)
        got = send_all(proxy, url)
        wait_exchanges(exchanges, len(got))
        proxy.call(lambda: None)  # listeners hear of an exchange before its violations are announced: after them
        runs.append((got, decisions(proxy), exchanges, spans, violations))
    (first, first_decisions, exchanges, spans, violations), (second, second_decisions, _, _, again) = runs
    assert first == second
    assert first_decisions == second_decisions
    fired = {rule for _, rule, outcome, _ in first_decisions if outcome == "fired"}
    assert {"limited", "cut", "bad-args", "stall"} <= fired, fired
    # The faults changed what the client got from the recording, and only where they fired.
    assert any(status == 429 for status, _ in first)
    assert first != live
    cut = [body for (status, body), req in zip(first, requests(), strict=True) if req.get("stream") and status == 200]
    assert any(b"[DONE]" not in body for body in cut) and any(b"[DONE]" in body for body in cut)

    replayed = [ex for ex in exchanges if ex.replayed]
    assert replayed
    # Spans and invariants work on replayed traffic as on live: each span says it was replayed, and the tool
    # arguments the bad-args fault broke in replayed answers are violations, the same in both runs.
    deadline = time.monotonic() + 10
    while len(spans.get_finished_spans()) < len(exchanges) and time.monotonic() < deadline:
        time.sleep(0.02)
    marked = [s for s in spans.get_finished_spans() if (s.attributes or {}).get("brownout.replayed") is True]
    assert len(marked) == len(replayed)
    by_id = {ex.id: ex for ex in exchanges}
    broken = [v for v in violations if v.invariant == "tool_arguments_json"]
    assert broken and all(by_id[v.exchange_id].replayed for v in broken)
    assert all("bad-args" in {f.rule for f in by_id[v.exchange_id].faults} for v in broken)
    assert [v.message for v in again] == [v.message for v in violations]
    # A 429 answered before the upstream consumed no recording: the exchange was never replayed.
    assert all(not ex.replayed for ex in exchanges if ex.status == 429 and ex.faults)


def test_a_fault_that_answers_first_leaves_the_recorded_sequence_in_place(brownout_proxy, tmp_path: Path) -> None:
    """After an injected 429 the SDK's retry gets the recording the first attempt would have had."""
    cassettes = tmp_path / "cassettes"
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    with mock_upstream() as up:
        proxy = recorder(brownout_proxy, cassettes)
        with httpx.Client(proxy=proxy.proxy_url("s"), timeout=10) as client:
            recorded = [client.post(f"{up.url}/v1/chat/completions", json=body).json()["id"] for _ in range(2)]
        wait_recorded(proxy, 2)
        url = up.url
    first_429 = """
seed: 1
rules:
  - name: first-fails
    match: {provider: openai}
    fault: {type: http_error, status: 429}
    schedule: {first: 1}
"""
    proxy = player(brownout_proxy, cassettes, first_429)
    with httpx.Client(proxy=proxy.proxy_url("s"), timeout=10) as client:
        got = [client.post(f"{url}/v1/chat/completions", json=body) for _ in range(4)]
    assert [r.status_code for r in got] == [429, 200, 200, 200]
    # Recorded order, then the last recording again for a request seen more often than recorded.
    assert [json.loads(r.content)["id"] for r in got[1:]] == [recorded[0], recorded[1], recorded[1]]
    assert proxy.addon.tape.counts == {"hit": 3, "miss": 0, "passthrough": 0, "repeated": 1}
