"""Small, dependency-free statistics: Wilson intervals, the two-proportion z-test, percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["Z95", "normal_cdf", "percentile", "two_proportion_z", "wilson_interval"]

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def normal_cdf(x: float) -> float:
    """Standard normal CDF via math.erf."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n is 0."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"successes must be in 0..n, got {successes}/{n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float]:
    """Pooled two-proportion z-test of p1 == p2: (z, two-sided p-value).

    z > 0 means the first proportion is higher. With no variance (both rates 0 or both 1) or an
    empty sample there is no evidence of a difference: (0.0, 1.0).
    """
    if n1 <= 0 or n2 <= 0:
        return (0.0, 1.0)
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return (0.0, 1.0)
    z = (x1 / n1 - x2 / n2) / se
    return (z, math.erfc(abs(z) / math.sqrt(2.0)))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in 0..100, got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
