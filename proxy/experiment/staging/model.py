"""What a staging experiment did: phases with their probes and gate results, events, the abort."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from brownout.proxy.experiment.staging.config import Check
from brownout.proxy.experiment.verdict import OPS

__all__ = ["OPS", "PhaseRecord", "Probe", "StagingResult", "judge"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Probe:
    """One evaluation of a check: when, the value (the worst series'), whether it held (None: no data)."""

    t: float
    value: float | None
    ok: bool | None
    judged: bool  # after the phase's warm-up


@dataclass(slots=True)
class PhaseRecord:
    """What happened in one phase."""

    name: str
    chaos: bool
    warmup_s: float
    duration_s: float
    status: str = "skipped"  # completed, aborted, skipped
    started_at: float | None = None
    finished_at: float | None = None
    rules: list[str] = field(default_factory=list)
    applied_at: float | None = None
    acknowledged: dict[str, str] = field(default_factory=dict)
    acknowledged_after_s: float | None = None  # every live replica had it this long after it was applied
    removed_at: float | None = None
    probes: dict[int, list[Probe]] = field(default_factory=dict)  # steady_state index -> probes
    gate: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StagingResult:
    """Everything the report reads."""

    name: str
    run_id: str
    target: dict[str, Any]
    started_at: float
    finished_at: float = 0.0
    status: str = "completed"
    error: str | None = None
    interrupted: bool = False
    abort: dict[str, Any] | None = None
    skipped_chaos: str | None = None  # why the chaos phases did not run
    phases: list[PhaseRecord] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def event(self, what: str, **extra: Any) -> None:
        self.events.append({"t": time.time(), "event": what, **extra})
        log.warning("%s", what)


def judge(check: Check, values: list[float | None]) -> tuple[float | None, bool | None]:
    """The worst value among a query's series and whether every series held; (None, None) for no data."""
    present = [v for v in values if v is not None]
    if not present:
        return None, (False if check.no_data == "breach" else None)
    failing = [v for v in present if not OPS[check.op](v, check.threshold)]
    if failing:
        return (max(failing) if check.op in ("<", "<=") else min(failing)), False
    return (max(present) if check.op in ("<", "<=") else min(present)), True
