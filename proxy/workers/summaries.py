"""The stop summary of a fleet of workers: each worker sends its counts when it has drained; the sum is
the fleet's (proxy/summary.py says what one proxy did, this adds them up)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from brownout.proxy.summary import Nested, Summary

__all__ = ["merged", "summary_counts"]

_NESTED = ("exchanges", "faults", "violations")


def summary_counts(summary: Summary) -> dict[str, Any]:
    """What one worker sends the supervisor at its stop (JSON-ready)."""
    return {
        "exchanges": summary.exchanges,
        "faults": summary.faults,
        "violations": summary.violations,
        "ignored": summary.ignored,
        "recorded": summary.recorded,
        "replay": summary.replay,
    }


def merged(counts: Iterable[Mapping[str, Any]], *, duration_s: float, where: dict[str, str]) -> Summary:
    """The summary of every worker's counts together."""
    nested: dict[str, dict[str, dict[str, int]]] = {k: defaultdict(lambda: defaultdict(int)) for k in _NESTED}
    ignored = recorded = 0
    replay: dict[str, int] = defaultdict(int)
    for c in counts:
        for key in _NESTED:
            for outer, inner_counts in c.get(key, {}).items():
                for inner, n in inner_counts.items():
                    nested[key][outer][inner] += int(n)
        ignored += int(c.get("ignored", 0))
        recorded += int(c.get("recorded", 0))
        for outcome, n in c.get("replay", {}).items():
            replay[outcome] += int(n)
    return Summary(
        duration_s=duration_s,
        exchanges=_sorted(nested["exchanges"]),
        faults=_sorted(nested["faults"]),
        violations=_sorted(nested["violations"]),
        ignored=ignored,
        recorded=recorded,
        replay=dict(sorted(replay.items())),
        where=where,
    )


def _sorted(counts: Mapping[str, Mapping[str, int]]) -> Nested:
    return {k: dict(sorted(v.items())) for k, v in sorted(counts.items())}
