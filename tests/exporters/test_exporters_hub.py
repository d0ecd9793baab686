"""The hub the addon calls: fan-out, containment through the Guard, recent violations, bounded shutdown."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from brownout.core.guard import Guard
from brownout.exporters.config import ExportersConfig, JsonlConfig, PrometheusConfig
from brownout.exporters.hub import Exporters
from brownout.proxy.config import BrownoutConfig
from tests.exporters.expsamples import decision, exchange, violation


def _hub(tmp_path: Path, guard: Guard | None = None, **jsonl: str) -> Exporters:
    paths = {k: str(tmp_path / v) for k, v in jsonl.items()}
    cfg = ExportersConfig(prometheus=PrometheusConfig(listen="127.0.0.1:0"), jsonl=JsonlConfig(**paths))
    return Exporters(cfg, guard=guard or Guard(), registry=CollectorRegistry(), environ={})


def test_fan_out_to_metrics_and_logs(tmp_path: Path) -> None:
    hub = _hub(tmp_path, path="v.jsonl", decisions_path="d.jsonl", exchanges_path="e.jsonl")
    hub.on_exchange(exchange(), [violation(), violation(severity="critical")])
    hub.on_violation(violation(invariant="call_budget", exchange_id=None))
    hub.on_decision(decision())
    hub.shutdown()
    value = hub.metrics.registry.get_sample_value
    assert (
        value(
            "brownout_requests_total",
            {"provider": "openai", "operation": "chat", "tool": "none", "status_class": "2xx"},
        )
        == 1
    )
    assert value("brownout_violations_total", {"invariant": "latency_budget", "severity": "critical"}) == 1
    assert value("brownout_fault_decisions_total", {"rule": "slow-openai", "outcome": "fired"}) == 1
    violations = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert [v["invariant"] for v in violations] == ["latency_budget", "latency_budget", "call_budget"]
    assert violations[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert json.loads((tmp_path / "d.jsonl").read_text())["outcome"] == "fired"
    assert json.loads((tmp_path / "e.jsonl").read_text())["model"] == "gpt-4o-mini"


def test_recent_violations_since_and_bounded(tmp_path: Path) -> None:
    cfg = ExportersConfig(recent_violations=3)
    hub = Exporters(cfg, registry=CollectorRegistry(), environ={})
    now = time.time()
    for i in range(5):
        hub.on_violation(violation(message=f"m{i}", timestamp=now + i))
    assert [v["message"] for v in hub.recent_violations()] == ["m2", "m3", "m4"]
    assert [v["message"] for v in hub.recent_violations(since=now + 3)] == ["m4"]


def test_broken_exporter_is_contained_and_counted(tmp_path: Path) -> None:
    guard = Guard()
    hub = _hub(tmp_path, guard)

    def boom(*_: object) -> None:
        raise RuntimeError("exporter bug")

    hub.metrics.observe_exchange = boom  # type: ignore[method-assign]
    hub.on_exchange(exchange())  # must not raise
    assert guard.errors["exporter:prometheus"] == 1
    assert (
        hub.metrics.registry.get_sample_value("brownout_internal_errors_total", {"component": "exporter:prometheus"})
        == 1
    )
    # Any component's contained failure reaches the counter through the Guard listener.
    guard.failed("fault", ValueError("x"))
    assert hub.metrics.registry.get_sample_value("brownout_internal_errors_total", {"component": "fault"}) == 1
    # A shut-down hub detaches from the shared Guard (the pipeline rebuilds hubs on reload).
    hub.shutdown()
    assert hub.metrics.internal_error not in guard.listeners


def test_start_serves_metrics_and_shutdown_is_idempotent(tmp_path: Path) -> None:
    hub = _hub(tmp_path)
    hub.start()
    hub.start()
    assert hub.metrics_port
    hub.on_exchange(exchange())
    text = httpx.get(f"http://127.0.0.1:{hub.metrics_port}/metrics", trust_env=False).text
    assert 'brownout_requests_total{operation="chat",provider="openai",status_class="2xx",tool="none"} 1.0' in text
    started = time.perf_counter()
    hub.shutdown()
    hub.shutdown()
    assert time.perf_counter() - started < 1
    assert hub.status()["metrics_port"] is None


def test_a_busy_metrics_port_is_an_error_naming_the_address(tmp_path: Path) -> None:
    first = _hub(tmp_path)
    first.start()
    listen = f"127.0.0.1:{first.metrics_port}"
    second = Exporters(
        ExportersConfig(prometheus=PrometheusConfig(listen=listen)), registry=CollectorRegistry(), environ={}
    )
    with pytest.raises(OSError, match=f"cannot serve /metrics on {listen}"):
        second.start()
    assert second.metrics_port is None
    first.shutdown()
    second.shutdown()


def test_a_hub_from_a_brownout_config_section() -> None:
    cfg = BrownoutConfig.model_validate({"exporters": {"prometheus": {"enabled": False}}})
    hub = Exporters(cfg.exporters, guard=Guard(), registry=CollectorRegistry(), environ={})
    hub.start()
    assert hub.metrics_port is None and hub.otlp is None
    assert hub.tracer_provider.get_tracer("t").start_span("x").is_recording()
    hub.shutdown()


def test_a_failing_gauge_source_is_counted_and_the_scrape_still_answers(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    guard = Guard()
    hub = _hub(tmp_path, guard)
    hub.watch(sessions=lambda: 1 // 0, rules=lambda: {"slow": True})
    page = generate_latest(hub.metrics.registry).decode()
    assert "brownout_sessions_active 0.0" in page and 'brownout_rule_active{rule="slow"} 1.0' in page
    assert guard.errors["exporter:prometheus"] == 1
    sample = hub.metrics.registry.get_sample_value
    assert sample("brownout_internal_errors_total", {"component": "exporter:prometheus"}) == 1
