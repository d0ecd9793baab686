"""What a proxy did, said when it stops: exchanges, faults, violations, and where logs and cassettes went.

The numbers are read from the counters the Prometheus exporter keeps anyway (brownout_requests,
brownout_faults_injected, brownout_violations, ...): nothing is counted twice, and the summary
agrees with /metrics. A proxy that saw no request at all says so, with the usual causes
(`bypass_warning`): a client that silently goes around brownout looks exactly like an agent that
survives every fault.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BYPASS_CAUSES", "WHERE_LABELS", "Summary", "bypass_warning", "destinations", "summarize", "write_json"]

BYPASS_CAUSES = (
    "usual causes: the client ignores HTTP(S)_PROXY (Node before 24's fetch, Go for loopback addresses), "
    "or the host is in NO_PROXY or mitmproxy's ignore_hosts; a client that only takes a base URL needs "
    "reverse mode (brownout run --mode reverse:URL, with the base URL pointed at brownout)"
)

Nested = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Summary:
    """One proxy's life in numbers; `exchanges` by provider and operation, `faults` by rule and fault
    type, `violations` by invariant and severity."""

    duration_s: float
    exchanges: Nested = field(default_factory=dict)
    faults: Nested = field(default_factory=dict)
    violations: Nested = field(default_factory=dict)
    ignored: int = 0  # requests to proxy.ignore_hosts: they reached brownout, nothing else happened
    recorded: int = 0
    replay: dict[str, int] = field(default_factory=dict)  # hit, miss, passthrough
    where: dict[str, str] = field(default_factory=dict)  # see destinations()
    state_skipped: int = 0  # decisions skipped because a fleet's shared store was away
    state_errors: int = 0  # calls to that store that failed

    @property
    def total_exchanges(self) -> int:
        return _total(self.exchanges)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of `--summary-json`."""
        return {
            "duration_s": round(self.duration_s, 3),
            "exchanges": {"total": self.total_exchanges, "by_provider": self.exchanges},
            "faults": {"total": _total(self.faults), "by_rule": self.faults},
            "violations": {"total": _total(self.violations), "by_invariant": self.violations},
            "ignored_requests": self.ignored,
            "cassettes": {"recorded": self.recorded, "replay": self.replay},
            "files": self.where,
            "no_traffic": self.total_exchanges == 0 and self.ignored == 0,
            "state": {"skipped_decisions": self.state_skipped, "failed_calls": self.state_errors},
        }

    def lines(self) -> list[str]:
        """The summary as a few lines for a terminal."""
        out = [
            f"brownout summary ({self.duration_s:.1f} s):",
            f"  exchanges: {_counted(self.exchanges)}",
            f"  faults fired: {_counted(self.faults)}",
            f"  violations: {_counted(self.violations)}",
        ]
        if self.ignored:
            out.append(f"  ignored: {self.ignored} requests to proxy.ignore_hosts, passed through untouched")
        if self.state_skipped or self.state_errors:
            out.append(
                f"  shared state: {self.state_errors} failed calls to the store; {self.state_skipped} decisions of "
                "rules bound by shared counters skipped while it was away"
            )
        for key, path in self.where.items():
            out.append(f"  {WHERE_LABELS[key]}: {path}{self._file_note(key)}")
        return out

    def _file_note(self, key: str) -> str:
        if key == "record_dir":
            return f" ({self.recorded} exchanges)"
        if key == "replay_dir" and self.replay:
            return " (" + ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.replay.items())) + ")"
        return ""


# destinations() keys, as the start-up lines and the summary name them.
WHERE_LABELS = {
    "violation_log": "violation log",
    "decision_log": "decision log",
    "exchange_log": "exchange log",
    "record_dir": "cassettes recorded to",
    "replay_dir": "cassettes replayed from",
}


def _total(nested: Nested) -> int:
    return sum(n for inner in nested.values() for n in inner.values())


def _counted(nested: Nested) -> str:
    """`5 (openai chat 3, http http 2)`; `none` when empty."""
    total = _total(nested)
    if not total:
        return "none"
    parts = [f"{outer} {inner} {n}" for outer, inner_counts in nested.items() for inner, n in inner_counts.items()]
    return f"{total} ({', '.join(parts)})"


def destinations(config: Any) -> dict[str, str]:
    """Where a config's logs and cassettes are, as absolute paths (a config from a file has them
    absolute already; one built in code is relative to the working directory)."""
    jsonl, out = config.exporters.jsonl, {}
    for key, path in (
        ("violation_log", jsonl.path),
        ("decision_log", jsonl.decisions_path),
        ("exchange_log", jsonl.exchanges_path),
        ("record_dir", config.record.dir),
        ("replay_dir", config.replay.dir),
    ):
        if path:
            out[key] = os.path.abspath(path)
    return out


def summarize(addon: Any, *, duration_s: float) -> Summary:
    """The summary of the proxy whose addon (proxy.addon.Brownout) this is."""
    metrics = addon.pipeline.exporters.metrics
    return Summary(
        duration_s=duration_s,
        exchanges=_by(metrics.requests, "provider", "operation"),
        faults=_by(metrics.faults, "rule", "fault"),
        violations=_by(metrics.violations, "invariant", "severity"),
        ignored=int(_sum(metrics.ignored)),
        recorded=int(_sum(metrics.recorded)),
        replay={s.labels["outcome"]: int(s.value) for s in _samples(metrics.replay) if s.value},
        where=destinations(addon.config),
        state_skipped=sum(
            n.get("skipped_state_unavailable", 0) for n in _by(metrics.decisions, "rule", "outcome").values()
        ),
        state_errors=int(_sum(metrics.state.errors)),
    )


def _samples(counter: Any) -> list[Any]:
    return [s for family in counter.collect() for s in family.samples if s.name.endswith("_total")]


def _sum(counter: Any) -> float:
    return float(sum(s.value for s in _samples(counter)))


def _by(counter: Any, outer: str, inner: str) -> Nested:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in _samples(counter):
        if s.value:
            counts[s.labels[outer]][s.labels[inner]] += int(s.value)
    return {k: dict(sorted(v.items())) for k, v in sorted(counts.items())}


def bypass_warning(summary: Summary) -> str | None:
    """The one-line warning for a proxy that saw no exchange, or None when it saw one."""
    if summary.total_exchanges:
        return None
    if summary.ignored:
        return (
            f"all {summary.ignored} requests that reached brownout went to hosts in proxy.ignore_hosts: "
            "passed through untouched, no fault, span or violation"
        )
    return f"no request reached brownout; {BYPASS_CAUSES}"


def write_json(path: str | os.PathLike[str], summary: Summary) -> None:
    """`--summary-json FILE`, the bypass warning included (`warning`, null when traffic flowed)."""
    doc = {**summary.to_json(), "warning": bypass_warning(summary)}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
