"""Compare two report.json files (before/after an agent change) and flag significant regressions."""

from __future__ import annotations

import logging
from typing import Any

from brownout.proxy.experiment.stats import fisher_exact

__all__ = ["ALPHA", "compare_reports"]

logger = logging.getLogger(__name__)

ALPHA = 0.05


def _row(label: str, a: tuple[int, int], b: tuple[int, int]) -> dict[str, Any]:
    (ak, an), (bk, bn) = a, b
    p = fisher_exact(ak, an, bk, bn)
    ra = ak / an if an else None
    rb = bk / bn if bn else None
    delta = None if ra is None or rb is None else rb - ra
    return {
        "phase": label,
        "a": {"k": ak, "n": an, "rate": ra},
        "b": {"k": bk, "n": bn, "rate": rb},
        "delta": delta,
        "p_value": p,
        "regression": bool(delta is not None and delta < 0 and p < ALPHA),
        "improvement": bool(delta is not None and delta > 0 and p < ALPHA),
    }


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per phase label in both reports and for the pooled chaos phases: success rate A vs B, Fisher's exact test.

    Two staging reports compare by their exchanges instead (see `_compare_staging`); a staging report and a
    command experiment's do not compare (ValueError)."""
    kind_a, kind_b = a.get("kind", "experiment"), b.get("kind", "experiment")
    if kind_a != kind_b:
        staged = "A" if kind_a == "staging" else "B"
        raise ValueError(f"only {staged} is a staging experiment's report: compare two reports of one kind")
    if kind_a == "staging":
        return _compare_staging(a, b)
    rows = []
    pa = {p["label"]: p for p in a["phases"]}
    for p in b["phases"]:
        q = pa.get(p["label"])
        if q is not None:
            rows.append(_row(p["label"], (q["passed"], q["runs"]), (p["passed"], p["runs"])))
    ca, cb = a["chaos_pooled"], b["chaos_pooled"]
    if ca["n"] and cb["n"]:
        rows.append(_row("chaos (pooled)", (ca["k"], ca["n"]), (cb["k"], cb["n"])))
    ra, rb = a["robustness"]["score"], b["robustness"]["score"]
    return {
        "alpha": ALPHA,
        "test": "fisher_exact",
        "phases": rows,
        "robustness": {"a": ra, "b": rb, "delta": None if ra is None or rb is None else rb - ra},
        "only_in_a": sorted(set(pa) - {p["label"] for p in b["phases"]}),
        "only_in_b": sorted({p["label"] for p in b["phases"]} - set(pa)),
        "regression": any(r["regression"] for r in rows),
    }


def _answered(phase: dict[str, Any]) -> tuple[int, int] | None:
    """(exchanges without an error, exchanges) of a staging phase, from its figures; None without figures."""
    figs = phase.get("figures")
    if not figs or figs.get("exchanges") is None:
        return None
    total = round(figs["exchanges"])
    return max(0, total - round(figs.get("errors") or 0)), total


def _summed(counts: list[tuple[int, int]]) -> tuple[int, int]:
    return sum(k for k, _ in counts), sum(n for _, n in counts)


def _compare_staging(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two staging reports of a fleet: per phase label in both, the share of exchanges answered without an error
    (the fleet's own counters, from Prometheus) A vs B with Fisher's exact test, and the pooled chaos phases;
    and each steady-state check per phase, a `regression` when it held in A and broke in B. Exchanges of one
    agent are not independent trials: the test's p is a guide, the checks are what the experiment promised."""
    rows = []
    pa = {p["label"]: p for p in a["phases"]}
    pooled_a: list[tuple[int, int]] = []
    pooled_b: list[tuple[int, int]] = []
    for p in b["phases"]:
        q = pa.get(p["label"])
        if q is None or (got_a := _answered(q)) is None or (got_b := _answered(p)) is None:
            continue
        rows.append(_row(p["label"], got_a, got_b))
        if p.get("chaos") and q.get("chaos"):
            pooled_a.append(got_a)
            pooled_b.append(got_b)
    total_a, total_b = _summed(pooled_a), _summed(pooled_b)
    if total_a[1] and total_b[1]:
        rows.append(_row("chaos (pooled)", total_a, total_b))
    checks = []
    held_a = {(h["hypothesis"], c["label"]): c for h in a.get("hypotheses", []) for c in h["checks"]}
    for h in b.get("hypotheses", []):
        for c in h["checks"]:
            before = held_a.get((h["hypothesis"], c["label"]))
            if before is None:
                continue
            checks.append(
                {
                    "hypothesis": h["hypothesis"],
                    "phase": c["label"],
                    "a": {"value": before["value"], "ok": before["ok"]},
                    "b": {"value": c["value"], "ok": c["ok"]},
                    "regression": before["ok"] is True and c["ok"] is False,
                }
            )
    labels_b = {p["label"] for p in b["phases"]}
    return {
        "alpha": ALPHA,
        "test": "fisher_exact",
        "kind": "staging",
        "measure": "exchanges answered without an error",
        "phases": rows,
        "checks": checks,
        "robustness": {"a": None, "b": None, "delta": None},
        "only_in_a": sorted(set(pa) - labels_b),
        "only_in_b": sorted(labels_b - set(pa)),
        "regression": any(r["regression"] for r in rows) or any(c["regression"] for c in checks),
    }
