"""Shared helpers for the Prometheus tests: realistic feeding and the PromQL found in deploy/."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.exporters.metrics import Metrics
from tests.exporters.expsamples import decision, traffic, violation

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "brownout.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
# Grafana's variables, as a user would have them: all providers, a 1m rate window.
GRAFANA_VARS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
    "$provider": ".*",
    "${provider}": ".*",
}
_COMPARISON = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*-?[0-9.]+(e[+-]?[0-9]+)?\s*$")

needs_promtool = pytest.mark.skipif(
    not Path(PROMTOOL).exists(), reason="promtool absent: `make test` installs the Debian package prometheus"
)
needs_prometheus = pytest.mark.skipif(
    not Path(PROMETHEUS).exists(), reason="prometheus absent: `make test` installs the Debian package prometheus"
)


def _walk_targets(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for panel in panels:
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield panel["title"], target["expr"]
        yield from _walk_targets(panel.get("panels", []))  # rows nest panels


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana variables substituted) for every dashboard query."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for title, expr in _walk_targets(dash["panels"]):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"unsubstituted Grafana variable in {title!r}: {expr}"
        out.append((title, expr))
    return out


def alert_exprs() -> list[tuple[str, str, str | None]]:
    """(alert name, expr, expr without its threshold comparison or None when there is none)."""
    out = []
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            expr = rule["expr"].strip()
            stripped = _COMPARISON.sub("", expr)
            out.append((rule["alert"], expr, stripped if stripped != expr else None))
    return out


def feed(metrics: Metrics, rounds: int = 1) -> None:
    """One slice of a chaos run: mixed traffic, faults, violations of every severity, decisions, gauges."""
    for _ in range(rounds):
        for ex in traffic():
            metrics.observe_exchange(ex)
        for severity in ("warning", "error", "critical"):
            metrics.observe_violation(violation(severity=severity))
        metrics.observe_violation(violation(invariant="loop_detection", severity="error", trace_id=None))
        for outcome in (
            "fired",
            "skipped_probability",
            "skipped_schedule",
            "skipped_blast_radius",
            "skipped_paused",
            "skipped_state_unavailable",
        ):
            metrics.observe_decision(decision(outcome=outcome))
        metrics.internal_error("exporter:otlp")
        metrics.config_reloads.labels("rejected").inc()
        metrics.export_dropped("otlp", 3)
        metrics.upstream_errors.observe("api.openai.com", "dns")
    metrics.watch(sessions=lambda: 4, rules=lambda: {"slow-openai": True, "anthropic-overload": False})
    # A fleet on Redis: the store answers, three replicas, one config (absent with the memory backend).
    metrics.state.watch(up=lambda: True, config_mismatch=lambda: 0, replicas=lambda: 3)
    metrics.state.error("schedule")
