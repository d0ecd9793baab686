"""Promise 1, fail open, through the real proxy: every component raises in turn (a test-only
plugin, tests/reliability/failing_plugin.py), and in each case the agent's exchange completes
exactly as upstream answered it, the failure is logged once with context, and it is counted in
brownout_internal_errors_total{component}.

The only failures not planted by the plugin are environmental: a full disk under the JSONL log
and an OTLP collector refusing spans. Those are export drops by design (brownout_export_dropped_total).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx
import pytest

from brownout.core.exchange import PARSE_ERROR_REASONS
from tests.proxy.test_passthrough import collect, wait_for
from tests.reliability.failing_plugin import BUGGY_WIRE_HEADER, FAULT_PHASES, Planted

pytestmark = pytest.mark.contained_errors  # every test here makes a component fail on purpose

PLUGIN = "tests.reliability.failing_plugin"
MSG = [{"role": "user", "content": "weather in Paris?"}]
SSE = "/sse?events=5&delay_ms=0"


def config(plugin: str, body: str = "") -> str:
    return f"version: 1\nseed: 1\nplugins: ['{PLUGIN}:{plugin}']\n{body}"


def internal_errors(handle: Any, component: str) -> float:
    registry = handle.addon.pipeline.exporters.metrics.registry
    return registry.get_sample_value("brownout_internal_errors_total", {"component": component}) or 0.0


def failure_logs(caplog: pytest.LogCaptureFixture, component: str) -> list[logging.LogRecord]:
    """Guard's first-failure records for `component` (later ones go to debug)."""
    return [
        r
        for r in caplog.records
        if r.name == "brownout.core.guard"
        and r.levelno >= logging.WARNING
        and f"brownout {component} failed" in r.getMessage()
    ]


def assert_logged_once(caplog: pytest.LogCaptureFixture, component: str, exc_type: type = Planted) -> None:
    records = failure_logs(caplog, component)
    assert len(records) == 1, [r.getMessage() for r in records]
    record = records[0]
    # Context: the component in the message, and the exception with its traceback.
    assert record.exc_info is not None and isinstance(record.exc_info[1], exc_type)


# --- traffic: each call returns what the agent saw, for comparison with a direct call ----------


def _no_id(obj: Any) -> dict[str, Any]:
    # The mock numbers its completion ids per call; everything else must match exactly.
    return {k: v for k, v in obj.model_dump().items() if k != "id"}


def openai_chat(client: Any, stream: bool) -> Any:
    if stream:
        return [_no_id(c) for c in client.chat.completions.create(model="gpt-4o", messages=MSG, stream=True)]
    return _no_id(client.chat.completions.create(model="gpt-4o", messages=MSG))


def http_call(client: httpx.Client, base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    r = client.get(f"{base}{path}", headers=headers or {})
    return r.status_code, r.content


def agent_run(proxy: Any, upstream: Any, openai_client: Any, headers: dict[str, str] | None = None) -> list[Any]:
    """The agent's view of one LLM call (plain and streamed) and two tool API calls (JSON, SSE)."""
    via = proxy is not None
    client = (
        openai_client(proxy, upstream)
        if via
        else openai_client(None, upstream, http_client=httpx.Client(trust_env=False))
    )
    out: list[Any] = [openai_chat(client, False), openai_chat(client, True)]
    with httpx.Client(proxy=proxy.proxy_url() if via else None, trust_env=False) as raw:
        out.append(http_call(raw, upstream.url, "/tools/weather?city=Oslo", headers))
        out.append(http_call(raw, upstream.url, SSE, headers))
    return out


@pytest.fixture
def direct(upstream: Any, openai_client: Any) -> list[Any]:
    """What the same traffic gets straight from upstream, without brownout."""
    return agent_run(None, upstream, openai_client)


# --- faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", FAULT_PHASES)
def test_failing_fault_leaves_traffic_unaltered(phase, upstream, brownout_proxy, openai_client, direct, caplog):
    rules = f"rules:\n  - {{name: boom, match: {{}}, fault: {{type: explode, phase: {phase}}}}}\n"
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("faults_plugin", rules), upstream=upstream, on_exchange=on_exchange)
    for _ in range(2):  # several failing exchanges, one log line
        assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 8)
    assert internal_errors(proxy, "fault:explode") >= 2
    assert_logged_once(caplog, "fault:explode")


def test_status_and_metrics_report_the_one_guard_count(upstream, brownout_proxy, openai_client, direct):
    """Every contained failure is counted once, by the proxy's guard: GET /status and
    brownout_internal_errors_total show the same numbers, whichever component failed."""
    rules = (
        "rules:\n  - {name: boom, match: {path: '/v1/*'}, fault: {type: explode, phase: before_upstream}}\n"
        "invariants:\n  - {type: explode, where: span}\n"
        "control: {token: status-t0ken}\n"
    )
    plugins = f"version: 1\nseed: 1\nplugins: ['{PLUGIN}:faults_plugin', '{PLUGIN}:invariants_plugin']\n"
    seen, on_exchange = collect()
    proxy = brownout_proxy(plugins + rules, upstream=upstream, on_exchange=on_exchange)
    assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 4)
    status = httpx.get(
        f"http://127.0.0.1:{proxy.addon.control.port}/status", headers={"Authorization": "Bearer status-t0ken"}
    ).json()
    counted = {c: internal_errors(proxy, c) for c in status["internal_errors"]}
    assert status["internal_errors"] == proxy.addon.guard.snapshot() == counted
    assert counted == {"fault:explode": 2, "invariant:explode": 4}  # two LLM calls; four exchanges checked


# --- invariants -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["span", "session"])
def test_failing_invariant_leaves_traffic_unaltered(where, upstream, brownout_proxy, openai_client, direct, caplog):
    body = f"invariants:\n  - {{type: explode, where: {where}}}\n  - {{type: latency_budget, total_ms: 60000}}\n"
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("invariants_plugin", body), upstream=upstream, on_exchange=on_exchange)
    for _ in range(2):
        assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 8)
    assert internal_errors(proxy, "invariant:explode") == 8
    assert_logged_once(caplog, "invariant:explode")
    # The other invariant still ran on every exchange.
    assert proxy.addon.pipeline.invariants.sessions_active >= 1


# --- span builder and exporters -------------------------------------------------------------


def test_failing_span_builder_leaves_traffic_unaltered(upstream, brownout_proxy, openai_client, direct, caplog):
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("span_plugin"), upstream=upstream, on_exchange=on_exchange)
    for _ in range(2):
        assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 8)
    assert internal_errors(proxy, "spans") == 8
    assert_logged_once(caplog, "spans")
    # Metrics still saw every exchange: one failing step does not skip the next ones.
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert (
        sum(
            s.value
            for m in registry.collect()
            if m.name == "brownout_requests"
            for s in m.samples
            if s.name == "brownout_requests_total"
        )
        == 8
    )


def test_failing_plugin_exporter_leaves_traffic_unaltered(upstream, brownout_proxy, openai_client, direct, caplog):
    # A fault that fires (decision hook) and an invariant that is violated (violation hook) on
    # every exchange, so each of the exporter's hooks raises.
    body = (
        "rules:\n  - {name: slow, match: {}, fault: {type: latency, delay_ms: 1}}\n"
        "invariants:\n  - {type: latency_budget, total_ms: 0.001, severity: error}\n"
    )
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("exporter_plugin", body), upstream=upstream, on_exchange=on_exchange)
    for _ in range(2):
        assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 8)
    assert internal_errors(proxy, "exporter:exploding") >= 8 * 3  # on_exchange, on_violation, on_decision
    assert_logged_once(caplog, "exporter:exploding")
    # The built-in exporters beside it carried on.
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert (
        registry.get_sample_value("brownout_violations_total", {"invariant": "latency_budget", "severity": "error"})
        == 8
    )


def test_prometheus_exporter_failing_on_garbage_usage_leaves_traffic_unaltered(
    upstream, brownout_proxy, openai_client, caplog
):
    # A wire parser that believes garbage (a negative token count) makes the metrics exporter raise.
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("wire_plugin"), upstream=upstream, on_exchange=on_exchange)
    headers = {"x-garbage-wire": "usage"}
    with httpx.Client(trust_env=False) as plain, httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as via:
        expected = http_call(plain, upstream.url, "/tools/weather?city=Oslo", headers)
        for _ in range(3):
            assert http_call(via, upstream.url, "/tools/weather?city=Oslo", headers) == expected
    wait_for(seen, 3)
    assert seen[0].usage.input_tokens == -7
    assert internal_errors(proxy, "exporter:prometheus") == 3
    assert_logged_once(caplog, "exporter:prometheus", ValueError)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_jsonl_on_a_full_disk_leaves_traffic_unaltered(upstream, brownout_proxy, openai_client, direct, caplog):
    body = "exporters:\n  jsonl: {path: /dev/full, exchanges_path: /dev/full, decisions_path: /dev/full}\n"
    seen, on_exchange = collect()
    proxy = brownout_proxy(f"version: 1\n{body}", upstream=upstream, on_exchange=on_exchange)
    for _ in range(2):
        assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 8)
    hub = proxy.addon.pipeline.exporters
    assert hub.flush_logs()  # the lines are written off the event loop
    # An I/O failure is an export drop (the record is lost), not a brownout bug.
    assert hub.metrics.registry.get_sample_value("brownout_export_dropped_total", {"exporter": "jsonl"}) == 8
    assert proxy.addon.guard.snapshot() == {}
    records = [r for r in caplog.records if r.name == "brownout.core.guard" and r.levelno >= logging.ERROR]
    assert len(records) == 1 and "/dev/full" in records[0].getMessage()  # once per file: all three are /dev/full


# --- wire formats ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "path"),
    [
        ("recognise", "/tools/weather?city=Oslo"),
        ("request", "/tools/weather?city=Oslo"),
        ("response", "/tools/weather?city=Oslo"),
        ("stream", SSE),
        ("stream_end", SSE),
    ],
)
def test_failing_wire_parser_leaves_traffic_unaltered(mode, path, upstream, brownout_proxy, caplog):
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("wire_plugin"), upstream=upstream, on_exchange=on_exchange)
    headers = {"x-garbage-wire": mode}
    with httpx.Client(trust_env=False) as plain, httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as via:
        expected = http_call(plain, upstream.url, path, headers)
        assert expected[0] == 200
        for _ in range(3):
            assert http_call(via, upstream.url, path, headers) == expected
    wait_for(seen, 3)
    assert internal_errors(proxy, "wire") == 3
    assert_logged_once(caplog, "wire")
    # recognise() raised: the generic format took the exchange; otherwise the garbage one kept it.
    assert seen[0].provider == ("http" if mode == "recognise" else "garbage")


@pytest.mark.parametrize(
    ("hook", "path"),
    [
        ("request", "/tools/weather?city=Oslo"),
        ("response", "/tools/weather?city=Oslo"),
        ("stream", SSE),
        ("stream_end", SSE),
    ],
)
def test_a_bug_inside_a_parsers_decoding_hook_is_an_internal_error_not_a_parse_error(
    hook, path, upstream, brownout_proxy, caplog
):
    # The boundary that records malformed bytes as a parse error must let a parser's own bug through
    # to the guard: counted, logged with its traceback, raised by a strict guard.
    seen, on_exchange = collect()
    proxy = brownout_proxy(config("buggy_wire_plugin"), upstream=upstream, on_exchange=on_exchange)
    headers = {BUGGY_WIRE_HEADER: hook}
    with httpx.Client(trust_env=False) as plain, httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as via:
        expected = plain.post(f"{upstream.url}{path}", json={"city": "Oslo"}, headers=headers)
        assert expected.status_code == 200
        for _ in range(3):
            got = via.post(f"{upstream.url}{path}", json={"city": "Oslo"}, headers=headers)
            assert (got.status_code, got.content) == (expected.status_code, expected.content)
    wait_for(seen, 3)
    assert internal_errors(proxy, "wire") == 3
    assert_logged_once(caplog, "wire")
    assert {(ex.provider, ex.parse_error) for ex in seen} == {("buggy", None)}
    registry = proxy.addon.pipeline.exporters.metrics.registry
    assert not any(registry.get_sample_value("brownout_parse_errors_total", {"reason": r}) for r in PARSE_ERROR_REASONS)


def test_otlp_collector_failing_leaves_traffic_unaltered(upstream, brownout_proxy, openai_client, direct):
    # The mock upstream plays a broken collector: every POST /v1/traces gets its 404 JSON.
    body = f"exporters:\n  otlp: {{endpoint: '{upstream.url}', timeout_s: 0.5, schedule_delay_ms: 50}}\n"
    seen, on_exchange = collect()
    proxy = brownout_proxy(f"version: 1\n{body}", upstream=upstream, on_exchange=on_exchange)
    assert agent_run(proxy, upstream, openai_client) == direct
    wait_for(seen, 4)
    registry = proxy.addon.pipeline.exporters.metrics.registry
    deadline = time.monotonic() + 10
    while (registry.get_sample_value("brownout_export_dropped_total", {"exporter": "otlp"}) or 0) < 4:
        assert time.monotonic() < deadline, "the collector's refusals were not counted"
        time.sleep(0.05)
