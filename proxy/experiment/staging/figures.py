"""brownout's own figures for a fleet, from its metrics in Prometheus: over a window, and as time series.

Counts (exchanges, errors, faults, violations, cost) are the counters' change between the window's
start and end, series by series (every replica, rule, invariant apart), added up: a series born inside
the window counts from zero, which PromQL's `increase()` does not do (its first sample is lost), and a
counter that went down (a replica restarted) counts from zero again. Latency quantiles come from the
request-duration histogram (`histogram_quantile` over the window). `selector` (label matchers, e.g.
`job="brownout"`) narrows every query to the fleet's own series.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from brownout.proxy.experiment.config import SEVERITIES
from brownout.proxy.experiment.staging.promql import Prometheus

__all__ = ["ERRORS", "QUANTILES", "figure", "figures", "fill", "series_queries", "window"]

log = logging.getLogger(__name__)

ERRORS = 'status_class=~"4xx|5xx|error"'  # as the dashboard's error ratio: what the agents got
QUANTILES = {"p50_latency_s": 0.5, "p95_latency_s": 0.95, "p99_latency_s": 0.99}
_COUNTERS = {
    "exchanges": ("brownout_requests_total", ""),
    "errors": ("brownout_requests_total", ERRORS),
    "faults": ("brownout_faults_injected_total", ""),
    "violations": ("brownout_violations_total", ""),
    "cost_usd": ("brownout_cost_usd_total", ""),
}


def window(seconds: float) -> str:
    """A PromQL duration of whole seconds (at least one)."""
    return f"{max(1, round(seconds))}s"


def fill(query: str, window_s: float) -> str:
    """A check's query with `$window` replaced by the window it is judged over."""
    return query.replace("$window", window(window_s))


def _selector(selector: str, *extra: str) -> str:
    return "{" + ", ".join(m for m in (selector, *extra) if m) + "}"


Key = frozenset[tuple[str, str]]


async def _deltas(prom: Prometheus, query: str, start: float, end: float) -> dict[Key, tuple[dict[str, str], float]]:
    before, after = await asyncio.gather(prom.query(query, start), prom.query(query, end))
    first = {frozenset(s.labels.items()): s.value or 0.0 for s in before}
    out: dict[Key, tuple[dict[str, str], float]] = {}
    for s in after:
        key = frozenset(s.labels.items())
        now, then = s.value or 0.0, first.get(key, 0.0)
        out[key] = (s.labels, now - then if now >= then else now)
    return out


async def _count(prom: Prometheus, name: str, selector: str, start: float, end: float) -> float:
    metric, extra = _COUNTERS[name]
    return sum(v for _, v in (await _deltas(prom, metric + _selector(selector, extra), start, end)).values())


async def _quantile(prom: Prometheus, q: float, selector: str, start: float, end: float) -> float | None:
    query = (
        f"histogram_quantile({q}, sum by (le) (increase(brownout_request_duration_seconds_bucket"
        f"{_selector(selector)}[{window(end - start)}])))"
    )
    samples = await prom.query(query, end)
    return samples[0].value if samples else None


async def figure(prom: Prometheus, name: str, selector: str, start: float, end: float) -> float | None:
    """One figure (a check's `metric`) over [start, end]; None when it has no value (no traffic)."""
    if name in QUANTILES:
        return await _quantile(prom, QUANTILES[name], selector, start, end)
    if name == "error_rate":
        total, errors = await asyncio.gather(
            _count(prom, "exchanges", selector, start, end), _count(prom, "errors", selector, start, end)
        )
        return errors / total if total else None
    if name.startswith("violations."):
        sev = name.split(".", 1)[1]
        metric = "brownout_violations_total" + _selector(selector, f'severity="{sev}"')
        return sum(v for _, v in (await _deltas(prom, metric, start, end)).values())
    return await _count(prom, name, selector, start, end)


def _grouped(deltas: dict[Key, tuple[dict[str, str], float]], *labels: str) -> list[dict[str, Any]]:
    out: dict[tuple[str, ...], float] = {}
    for lab, value in deltas.values():
        key = tuple(lab.get(name, "") for name in labels)
        out[key] = out.get(key, 0.0) + value
    rows = [{**dict(zip(labels, key, strict=True)), "count": round(v, 6)} for key, v in out.items() if v > 0]
    return sorted(rows, key=lambda r: (-r["count"], *(r[name] for name in labels)))


async def figures(prom: Prometheus, selector: str, start: float, end: float) -> dict[str, Any]:
    """Every figure over [start, end]: the report's per-phase numbers."""
    sel = _selector(selector)
    jobs: list[Awaitable[Any]] = [
        _deltas(prom, "brownout_requests_total" + sel, start, end),
        _deltas(prom, "brownout_requests_total" + _selector(selector, ERRORS), start, end),
        _deltas(prom, "brownout_faults_injected_total" + sel, start, end),
        _deltas(prom, "brownout_violations_total" + sel, start, end),
        _deltas(prom, "brownout_cost_usd_total" + sel, start, end),
        *(_quantile(prom, q, selector, start, end) for q in QUANTILES.values()),
    ]
    requests, errors, faults, violations, cost, *quantiles = await asyncio.gather(*jobs)
    total = sum(v for _, v in requests.values())
    failed = sum(v for _, v in errors.values())
    by_severity = dict.fromkeys(SEVERITIES, 0.0)
    for row in _grouped(violations, "severity"):
        by_severity[row["severity"]] = row["count"]
    return {
        "exchanges": total,
        "errors": failed,
        "error_rate": failed / total if total else None,
        "faults": sum(v for _, v in faults.values()),
        "faults_by_rule": _grouped(faults, "rule", "fault"),
        "violations": sum(v for _, v in violations.values()),
        "violations_by_severity": by_severity,
        "violations_by_invariant": _grouped(violations, "invariant", "severity"),
        "cost_usd": sum(v for _, v in cost.values()) if cost else None,
        **dict(zip(QUANTILES, quantiles, strict=True)),
    }


def series_queries(selector: str, experiment: str, window_s: float) -> list[tuple[str, str]]:
    """(name, PromQL) of brownout's figures as time series: rates over `window_s`, and the phase applied."""
    sel, w = _selector(selector), window(window_s)
    requests = f"sum(rate(brownout_requests_total{sel}[{w}]))"
    # `or vector(0)`: a counter with no series yet (no error, no fault so far) reads zero, not "no data".
    return [
        ("exchanges/s", requests),
        (
            "error ratio",
            f"(sum(rate(brownout_requests_total{_selector(selector, ERRORS)}[{w}])) or vector(0)) / {requests}",
        ),
        ("faults/s", f"sum(rate(brownout_faults_injected_total{sel}[{w}])) or vector(0)"),
        ("violations/s", f"sum(rate(brownout_violations_total{sel}[{w}])) or vector(0)"),
        (
            "p95 latency (s)",
            f"histogram_quantile(0.95, sum by (le) (rate(brownout_request_duration_seconds_bucket{sel}[{w}])))",
        ),
        (
            "replicas applying the phase",
            f"sum by (phase) (brownout_experiment_phase{_selector(selector, f'experiment={experiment!r}')})",
        ),
    ]
