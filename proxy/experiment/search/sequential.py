"""Wald's sequential probability ratio test at one level, and the fixed-sample test it is compared with.

At a level the search asks one question: does the share of good runs reach the goal's target? Wald's
SPRT (Wald 1945, *Sequential tests of statistical hypotheses*) weighs "holds" (p = target + delta)
against "fails" (p = target - delta) run by run and stops as soon as the evidence crosses either
boundary, so a level far from the breaking point is decided in a handful of runs. It is truncated at
the sample size of the fixed-sample test with the same error rates: a level inside the indifference
zone never costs more than one level of a grid would.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from scipy import stats

__all__ = ["MAX_FIXED_N", "Decision", "Sprt"]

logger = logging.getLogger(__name__)

MAX_FIXED_N = 10_000
Decision = Literal["holds", "fails"]


@dataclass(frozen=True)
class Sprt:
    """The test for a goal of `target` (a share of good runs), error rates alpha = beta = 1 - confidence."""

    target: float
    tolerance: float = 0.05
    confidence: float = 0.95

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def p_holds(self) -> float:
        """The share under "holds": target + tolerance, kept inside (0, 1) by at most half the room left."""
        return self.target + min(self.tolerance, (1.0 - self.target) / 2)

    @property
    def p_fails(self) -> float:
        return self.target - min(self.tolerance, self.target / 2)

    def llr(self, good: int, n: int) -> float:
        """log L(holds) / L(fails) of `good` good runs out of `n`."""
        ph, pf = self.p_holds, self.p_fails
        return good * math.log(ph / pf) + (n - good) * math.log((1 - ph) / (1 - pf))

    def decide(self, good: int, n: int) -> Decision | None:
        """The decision after n runs, or None to run more; at `fixed_n` runs it decides by the sign of the LLR."""
        upper = math.log((1 - self.alpha) / self.alpha)
        llr = self.llr(good, n)
        if llr >= upper:
            return "holds"
        if llr <= -upper:
            return "fails"
        if n >= self.fixed_n:
            return "holds" if llr > 0 else "fails"
        return None

    @cached_property
    def fixed_n(self) -> int:
        """The smallest n whose exact one-sided binomial test tells p_fails from p_holds with these error rates.

        With c the least count of good runs that rejects "fails" at level alpha, the test also needs
        P(good < c | p_holds) <= beta (= alpha): what every level of a fixed grid has to spend.
        """
        for n in range(1, MAX_FIXED_N + 1):
            c = int(stats.binom.isf(self.alpha, n, self.p_fails)) + 1  # P(K >= c | fails) <= alpha
            if c <= n and stats.binom.cdf(c - 1, n, self.p_holds) <= self.alpha:
                return n
        return MAX_FIXED_N
