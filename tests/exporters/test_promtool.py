"""promtool on a live scrape and on deploy/prometheus (config, rules, rule unit tests)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from brownout.exporters.metrics import Metrics
from tests.exporters.promsupport import ALERTS, DEPLOY, PROMTOOL, alert_exprs, dashboard_exprs, feed, needs_promtool


def _promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60)


@needs_promtool
def test_check_metrics_on_a_live_scrape() -> None:
    metrics = Metrics(registry=CollectorRegistry())
    feed(metrics, rounds=3)
    server = metrics.serve("127.0.0.1:0")
    try:
        text = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", trust_env=False).text
    finally:
        server.shutdown()
        server.server_close()
    assert "gen_ai_client_token_usage_bucket" in text and "brownout_rule_active" in text
    result = _promtool("check", "metrics", stdin=text)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


@needs_promtool
def test_check_config_and_rules() -> None:
    result = _promtool("check", "config", str(DEPLOY / "prometheus" / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    result = _promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0 and f"{len(alert_exprs())} rules found" in result.stdout, (
        result.stdout + result.stderr
    )


@needs_promtool
def test_every_alert_has_a_passing_unit_test() -> None:
    tests = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))
    tested = {
        line.split(":", 1)[1].strip()
        for t in tests
        for line in t.read_text().splitlines()
        if line.strip().startswith("alertname:")
    }
    assert tested == {name for name, _, _ in alert_exprs()}
    result = _promtool("test", "rules", *map(str, tests))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    """The unit tests can fail: the same series with a wrong expected label is rejected."""
    src = (DEPLOY / "prometheus" / "tests" / "brownout_down_test.yml").read_text()
    bad = tmp_path / "bad_test.yml"
    bad.write_text(src.replace("../alerts.yml", str(ALERTS)).replace("severity: critical", "severity: info"))
    assert _promtool("test", "rules", str(bad)).returncode != 0


def test_dashboard_queries_use_only_brownout_metric_names() -> None:
    names = {
        "brownout_requests_total",
        "brownout_faults_injected_total",
        "brownout_fault_decisions_total",
        "brownout_violations_total",
        "brownout_request_duration_seconds_bucket",
        "brownout_time_to_first_chunk_seconds_bucket",
        "brownout_tokens_total",
        "brownout_cost_usd_total",
        "brownout_retries_total",
        "brownout_sessions_active",
        "brownout_rule_active",
        "brownout_internal_errors_total",
        "brownout_export_dropped_total",
        "brownout_build_info",
        "brownout_experiment_phase",
        "brownout_state_store_up",
        "brownout_state_errors_total",
        "brownout_state_replicas",
        "brownout_state_config_mismatch",
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_inference_duration_seconds_bucket",  # the same duration, as the latest conventions name it
        "up",
    }
    used = {m for _, expr in dashboard_exprs() for m in re.findall(r"\b(brownout_\w+|gen_ai_client_\w+|up)\b", expr)}
    assert used <= names, used - names
    # The panels the issue lists are there.
    assert {
        "brownout_requests_total",
        "brownout_faults_injected_total",
        "brownout_violations_total",
        "brownout_request_duration_seconds_bucket",
        "brownout_time_to_first_chunk_seconds_bucket",
        "brownout_tokens_total",
        "brownout_cost_usd_total",
        "brownout_retries_total",
        "brownout_rule_active",
        "brownout_internal_errors_total",
        "brownout_export_dropped_total",
    } <= used
