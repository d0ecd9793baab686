"""Small-sample statistics: Wilson intervals, Fisher's exact test, percentiles.

Phases run 5 to 20 times, too few for normal approximations of a difference in proportions, so
the success comparison uses Fisher's exact test; the standard library supplies the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, quantiles

__all__ = ["fisher_exact", "percentile", "wilson_interval"]

_NORMAL = NormalDist()


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n is 0."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"successes must be in 0..n, got {successes}/{n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return (0.0, 1.0)
    z = _NORMAL.inv_cdf(0.5 + confidence / 2)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


def fisher_exact(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that x1/n1 and x2/n2 share one success probability.

    Conditioning on both margins, the successes of the first sample follow a hypergeometric law; the
    p-value sums the probabilities of every table no more likely than the observed one. The weights
    C(n1, k) * C(n2, K - k) are exact integers, so ties are compared exactly (no float tolerance).
    An empty sample carries no evidence: 1.0.
    """
    for x, n, which in ((x1, n1, "first"), (x2, n2, "second")):
        if n < 0 or not 0 <= x <= max(n, 0):
            raise ValueError(f"{which} sample: successes must be in 0..n, got {x}/{n}")
    if n1 == 0 or n2 == 0:
        return 1.0
    k_total = x1 + x2
    weights = {
        k: math.comb(n1, k) * math.comb(n2, k_total - k) for k in range(max(0, k_total - n2), min(n1, k_total) + 1)
    }
    observed = weights[x1]
    tail = sum(w for w in weights.values() if w <= observed)
    return tail / math.comb(n1 + n2, k_total)


def percentile(values: Sequence[float], q: int) -> float | None:
    """The q-th percentile (integer 0..100), interpolated linearly between ranks as numpy does by default."""
    if not 0 <= q <= 100 or int(q) != q:
        raise ValueError(f"q must be an integer in 0..100, got {q}")
    if not values:
        return None
    if q in (0, 100) or len(values) == 1:  # quantiles() gives only the 99 inner cut points
        return float(min(values) if q == 0 else max(values))
    # method="inclusive" is R's type 7, numpy's "linear": the sample's min and max are the 0th and 100th.
    return quantiles(values, n=100, method="inclusive")[int(q) - 1]
