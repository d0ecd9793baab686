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
    """Per phase label in both reports and for the pooled chaos phases: success rate A vs B, Fisher's exact test."""
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
