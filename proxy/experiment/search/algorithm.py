"""The adaptive search: bracket the breaking point, bisect it with a sequential test per level, fit.

1. Bracket: the safe end of the range (u = 0) and its harsh end (u = 1) are tested first. A goal that
   fails at the safe end, or holds at the harsh end, has no breaking point inside the range: the search
   says so and stops.
2. Refine: the bracket is bisected in u (geometrically on a log scale). Each level runs in batches
   until Wald's SPRT decides it (`sequential.py`); "holds" moves the bracket's safe side up to it,
   "fails" its harsh side down. It stops once the bracket is narrower than the resolution, or when the
   budget of runs is spent.
3. Fit: a monotone dose-response curve over every run at every level (`fit.py`) gives the estimate and
   its interval; the levels only decide where runs are spent.

Decisions depend only on the counts of each finished batch, never on timing, so the same seed and the
same agent behaviour give the same levels, in the same order, and the same estimate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from brownout.proxy.experiment.search.fit import Fit, fit_levels
from brownout.proxy.experiment.search.scale import Scale
from brownout.proxy.experiment.search.sequential import Decision, Sprt

__all__ = ["OUTCOMES", "Level", "Oracle", "Search", "SearchResult"]

logger = logging.getLogger(__name__)

# found: the breaking point is inside the range; holds_across_range / fails_across_range: the goal holds
# at the harsh end / fails at the safe end; budget: runs ran out before a bracket; stopped: aborted.
OUTCOMES = ("found", "holds_across_range", "fails_across_range", "budget", "stopped")


@dataclass
class Level:
    """One level of the parameter, in the order the search first ran it."""

    index: int
    u: float
    value: float
    outcomes: list[bool] = field(default_factory=list)  # per run: was it good
    decision: Decision | None = None

    @property
    def runs(self) -> int:
        return len(self.outcomes)

    @property
    def good(self) -> int:
        return sum(self.outcomes)


# Runs `n` more runs at a level (the level knows how many it has had) and says which were good;
# None when the experiment was stopped (abort, Ctrl-C).
Oracle = Callable[[Level, int], list[bool] | None]


@dataclass
class SearchResult:
    outcome: str
    levels: list[Level]
    fit: Fit | None
    runs: int
    bracket: tuple[float, float] | None  # (u holds, u fails) at the end


class Search:
    """One search over `scale` for a goal tested by `sprt`, spending at most `max_runs`, `batch` at a time."""

    def __init__(
        self,
        scale: Scale,
        sprt: Sprt,
        *,
        max_runs: int,
        batch: int,
        on_batch: Callable[[Search, Level], None] | None = None,
    ) -> None:
        self.scale, self.sprt = scale, sprt
        self.max_runs, self.batch = max_runs, max(1, batch)
        self.on_batch = on_batch
        self.levels: list[Level] = []
        self.bracket: tuple[float, float] | None = None
        self._stopped = False

    @property
    def spent(self) -> int:
        return sum(level.runs for level in self.levels)

    def _level(self, u: float) -> Level:
        value = self.scale.value(u)
        for level in self.levels:
            if level.value == value:
                return level
        level = Level(len(self.levels), self.scale.u(value), value)
        self.levels.append(level)
        return level

    def _decide(self, level: Level, oracle: Oracle) -> Decision | None:
        while level.decision is None:
            room = min(self.batch, self.max_runs - self.spent, self.sprt.fixed_n - level.runs)
            if room <= 0:
                return None
            got = oracle(level, room)
            if got is None:
                self._stopped = True
                return None
            level.outcomes.extend(got)
            level.decision = self.sprt.decide(level.good, level.runs)
            if self.on_batch is not None:
                self.on_batch(self, level)
        return level.decision

    def run(self, oracle: Oracle) -> SearchResult:
        safe = self._decide(self._level(0.0), oracle)
        if safe == "fails":
            return self.finish("fails_across_range")
        harsh = self._decide(self._level(1.0), oracle) if safe is not None else None
        if harsh == "holds":
            return self.finish("holds_across_range")
        if safe is None or harsh is None:
            return self.finish("stopped" if self._stopped else "budget")
        lo, hi = self.levels[0], self.levels[1]
        self.bracket = (lo.u, hi.u)
        outcome = "found"
        while hi.u - lo.u > self.scale.step + 1e-12:
            mid = self._level((lo.u + hi.u) / 2)
            if mid is lo or mid is hi:
                break  # integer levels next to each other
            decision = self._decide(mid, oracle)
            if decision is None:
                outcome = "stopped" if self._stopped else "budget"
                break
            lo, hi = (mid, hi) if decision == "holds" else (lo, mid)
            self.bracket = (lo.u, hi.u)
        return self.finish(outcome)

    def estimate(self) -> Fit | None:
        """The fit of the runs so far, once both a holding and a failing level are known."""
        decided = {level.decision for level in self.levels}
        if not {"holds", "fails"} <= decided:
            return None
        levels = [level for level in self.levels if level.runs]
        return fit_levels(
            [level.u for level in levels],
            [level.runs for level in levels],
            [level.good for level in levels],
            target=self.sprt.target,
            confidence=self.sprt.confidence,
            step=self.scale.step,
        )

    def finish(self, outcome: str) -> SearchResult:
        """The result as it stands, ending with `outcome`."""
        fit = self.estimate() if outcome in ("found", "budget", "stopped") else None
        return SearchResult(outcome, list(self.levels), fit, self.spent, self.bracket)
