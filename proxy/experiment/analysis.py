"""Per-phase and cross-phase statistics of an experiment, as a JSON-ready dict.

Definitions (also in the README):
- success rate: passed runs / runs, with a Wilson 95% interval;
- success drop: baseline rate minus chaos rate, with Fisher's exact test (two-sided p): phases of 5-20
  runs are too small for a z-test's normal approximation;
- recovery rate: chaos runs that met at least one fault and still passed / chaos runs that met one;
- cost of chaos: exchanges the client marked as retries (`x-stainless-retry-count` > 0), attributed
  to the fault type of the latest faulted exchange before them in the same run, with their tokens
  and their cost; plus the extra calls, tokens and cost per run of runs that met the fault type, over
  the baseline mean. Costs are in US dollars at list prices (the genai-prices table); a phase with
  no priced exchange has no cost (None), not a cost of zero;
- robustness: sum(passed * difficulty) / sum(difficulty) over chaos runs that met a fault, where a
  run's difficulty is the sum of the weights of the distinct fault types it met;
- per-fault breakdown: per fault type and target (tool name, else provider), runs that met it and
  how many of them did not pass.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from brownout.proxy.experiment.causes import group_violations
from brownout.proxy.experiment.config import SEVERITIES, ExperimentConfig
from brownout.proxy.experiment.model import ExperimentResult, RunResult
from brownout.proxy.experiment.stats import fisher_exact, percentile, wilson_interval

__all__ = ["analyze", "phase_stats", "robustness", "success_comparison"]

logger = logging.getLogger(__name__)

SIGNIFICANCE = 0.05


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _cost_per_run(runs: list[RunResult]) -> float | None:
    """Mean cost per run in US dollars, or None when none of the runs' exchanges was priced."""
    return _mean([r.cost_usd for r in runs]) if any(r.priced for r in runs) else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _rate(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(k, n)
    return {"n": n, "k": k, "rate": (k / n) if n else None, "ci95": [lo, hi]}


def phase_stats(label: str, runs: list[RunResult]) -> dict[str, Any]:
    """Success, duration, calls, tokens, violations and faults of one phase execution."""
    n = len(runs)
    statuses = Counter(r.status for r in runs)
    passed = statuses.get("passed", 0)
    durations = [r.duration_s for r in runs]
    by_sev: Counter[str] = Counter(dict.fromkeys(SEVERITIES, 0))
    by_inv: dict[str, Counter[str]] = defaultdict(Counter)
    faults_per_rule: Counter[str] = Counter()
    for r in runs:
        for v in r.violations:
            sev = str(v.get("severity", "error"))
            by_sev[sev] += 1
            by_inv[str(v.get("invariant", "?"))][sev] += 1
        for ex in r.exchanges:
            for f in ex.faults:
                faults_per_rule[f["rule"]] += 1
    lo, hi = wilson_interval(passed, n)
    return {
        "label": label,
        "runs": n,
        "statuses": {s: statuses.get(s, 0) for s in ("passed", "failed", "error", "timeout")},
        "passed": passed,
        "success_rate": passed / n if n else None,
        "success_ci95": [lo, hi],
        "error_rate": statuses.get("error", 0) / n if n else None,
        "timeout_rate": statuses.get("timeout", 0) / n if n else None,
        "duration_s": {
            "p50": percentile(durations, 50),
            "p95": percentile(durations, 95),
            "mean": _mean(durations),
            "values": [round(d, 4) for d in durations],
        },
        "calls_per_run": _mean([float(r.calls) for r in runs]),
        "llm_calls_per_run": _mean([float(r.llm_calls) for r in runs]),
        "tokens_per_run": _mean([float(r.tokens) for r in runs]),
        "cost_usd_per_run": _cost_per_run(runs),
        "cost_usd": sum(r.cost_usd for r in runs) if any(r.priced for r in runs) else None,
        "violations": {
            "total": sum(by_sev.values()),
            "by_severity": dict(by_sev),
            "by_invariant": {k: dict(v) for k, v in sorted(by_inv.items())},
            "invariants": group_violations((r.run_id, v) for r in runs for v in r.violations),
        },
        "faults": sum(faults_per_rule.values()),
        "faults_per_rule": dict(sorted(faults_per_rule.items())),
    }


def success_comparison(base: Iterable[RunResult], other: Iterable[RunResult]) -> dict[str, Any]:
    """Success drop of `other` vs `base`, with the two-sided p-value of Fisher's exact test."""
    b, o = list(base), list(other)
    bk, ok = sum(r.passed for r in b), sum(r.passed for r in o)
    p = fisher_exact(bk, len(b), ok, len(o))
    brate = bk / len(b) if b else None
    orate = ok / len(o) if o else None
    drop = None if brate is None or orate is None else brate - orate
    return {
        "baseline_rate": brate,
        "rate": orate,
        "drop": drop,
        "test": "fisher_exact",
        "p_value": p,
        "significant": bool(drop is not None and drop > 0 and p < SIGNIFICANCE),
    }


def robustness(runs: Iterable[RunResult], weights: dict[str, float], default_weight: float = 1.0) -> dict[str, Any]:
    """Chaos-run successes weighted by the difficulty of the faults they met."""
    total = won = 0.0
    considered = 0
    used: dict[str, float] = {}
    for r in runs:
        kinds = r.fault_types
        if not kinds:
            continue
        difficulty = 0.0
        for k in kinds:
            used[k] = weights.get(k, default_weight)
            difficulty += used[k]
        considered += 1
        total += difficulty
        won += difficulty if r.passed else 0.0
    return {
        "score": (won / total) if total > 0 else None,
        "runs_considered": considered,
        "weighted_passed": won,
        "weighted_total": total,
        "weights_used": dict(sorted(used.items())),
    }


def _cost_of_chaos(chaos: list[RunResult], baseline: list[RunResult]) -> dict[str, Any]:
    retried: Counter[str] = Counter()
    retry_tokens: Counter[str] = Counter()
    retry_cost: dict[str, float] = {}
    faulted: Counter[str] = Counter()
    for r in chaos:
        last: list[str] = []
        for ex in sorted(r.exchanges, key=lambda e: e.at):
            if ex.retry_count > 0 and last:
                for kind in last:
                    retried[kind] += 1
                    retry_tokens[kind] += ex.input_tokens + ex.output_tokens
                    if ex.cost_usd is not None:
                        retry_cost[kind] = retry_cost.get(kind, 0.0) + ex.cost_usd
            if ex.faults:
                last = sorted({f["fault"] for f in ex.faults})
                for kind in last:
                    faulted[kind] += 1
    base_calls = _mean([float(r.calls) for r in baseline])
    base_tokens = _mean([float(r.tokens) for r in baseline])
    base_cost = _cost_per_run(baseline)
    out: dict[str, Any] = {}
    for kind in sorted(faulted):
        met = [r for r in chaos if kind in r.fault_types]
        calls = _mean([float(r.calls) for r in met])
        tokens = _mean([float(r.tokens) for r in met])
        out[kind] = {
            "faulted_exchanges": faulted[kind],
            "retried_exchanges": retried[kind],
            "retry_tokens": retry_tokens[kind],
            "extra_calls_per_run": None if calls is None or base_calls is None else calls - base_calls,
            "extra_tokens_per_run": None if tokens is None or base_tokens is None else tokens - base_tokens,
            "retry_cost_usd": retry_cost.get(kind),
            "extra_cost_usd_per_run": _minus(_cost_per_run(met), base_cost),
        }
    return out


def _fault_breakdown(chaos: list[RunResult]) -> list[dict[str, Any]]:
    met: dict[tuple[str, str], set[str]] = defaultdict(set)
    by_id = {r.run_id: r for r in chaos}
    for r in chaos:
        for ex in r.exchanges:
            for f in ex.faults:
                met[(f["fault"], ex.tool or ex.provider)].add(r.run_id)
    rows = []
    for (kind, target), ids in sorted(met.items()):
        failed = sum(1 for i in ids if not by_id[i].passed)
        rows.append({"fault": kind, "target": target, **_rate(failed, len(ids)), "failed": failed, "runs": len(ids)})
    return rows


def _violation_timeline(result: ExperimentResult) -> list[dict[str, Any]]:
    out = []
    for r in result.runs:
        for v in r.violations:
            ts = float(v.get("timestamp") or r.started_at)
            out.append(
                {
                    "t_s": max(0.0, ts - result.started_at),
                    "severity": v.get("severity"),
                    "invariant": v.get("invariant"),
                    "label": r.label,
                    "run_id": r.run_id,
                }
            )
    return sorted(out, key=lambda x: x["t_s"])


def analyze(result: ExperimentResult, config: ExperimentConfig) -> dict[str, Any]:
    """Everything the reports show, except the verdict (see `proxy.experiment.verdict`)."""
    by_label: dict[str, list[RunResult]] = defaultdict(list)
    for r in result.runs:
        by_label[r.label].append(r)
    baseline_name = config.baseline_phase
    baseline = [r for r in result.runs if r.phase == baseline_name]
    chaos_labels = [p.label for p in result.phases if p.chaos]
    chaos = [r for r in result.runs if r.label in set(chaos_labels)]
    phases = []
    for p in result.phases:
        entry = {
            "name": p.name,
            "repeat_index": p.repeat_index,
            "chaos": p.chaos,
            "config_sha256": p.config_sha256,
            **phase_stats(p.label, by_label.get(p.label, [])),
            "exchanges": p.exchanges_seen,
        }
        if p.chaos and baseline:
            entry["vs_baseline"] = success_comparison(baseline, by_label.get(p.label, []))
        phases.append(entry)
    faulted = [r for r in chaos if r.fault_types]
    recovered = sum(r.passed for r in faulted)
    return {
        "baseline": baseline_name,
        "phases": phases,
        "chaos_pooled": {
            **_rate(sum(r.passed for r in chaos), len(chaos)),
            **({"vs_baseline": success_comparison(baseline, chaos)} if baseline and chaos else {}),
        },
        "recovery": _rate(recovered, len(faulted)),
        "cost_of_chaos": _cost_of_chaos(chaos, baseline),
        "cost_usd": {
            "baseline_per_run": _cost_per_run(baseline),
            "chaos_per_run": _cost_per_run(chaos),
            "extra_per_run": _minus(_cost_per_run(chaos), _cost_per_run(baseline)),
            "chaos_total": sum(r.cost_usd for r in chaos) if any(r.priced for r in chaos) else None,
        },
        "robustness": robustness(chaos, config.weight_table()),
        "fault_breakdown": _fault_breakdown(chaos),
        "violation_timeline": _violation_timeline(result),
        "violations_total": dict(Counter(str(v.get("severity")) for r in result.runs for v in r.violations)),
    }
