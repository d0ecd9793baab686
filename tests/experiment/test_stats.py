"""Statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from brownout.proxy.experiment.stats import normal_cdf, percentile, two_proportion_z, wilson_interval


def test_wilson_8_of_10() -> None:
    # p=0.8, z=1.96: center (0.8 + z²/20)/(1 + z²/10) = 0.71674, half-width 0.22658
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4)
    assert hi == pytest.approx(0.9433, abs=1e-4)


def test_wilson_edges() -> None:
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.7225, abs=1e-4) and hi == pytest.approx(1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_two_proportion_known_counts() -> None:
    # 45/50 vs 30/50: pooled 0.75, se sqrt(.75*.25*(2/50)) = 0.08660, z = 0.3/0.0866 = 3.4641
    z, p = two_proportion_z(45, 50, 30, 50)
    assert z == pytest.approx(3.4641, abs=1e-4)
    assert p == pytest.approx(2 * (1 - normal_cdf(3.4641016)), rel=1e-6)
    assert p == pytest.approx(0.000532, abs=1e-6)
    # 10/10 vs 8/10: pooled 0.9, se 0.13416, z 1.4907, p 0.1360
    z, p = two_proportion_z(10, 10, 8, 10)
    assert z == pytest.approx(1.4907, abs=1e-4) and p == pytest.approx(0.1360, abs=1e-4)


def test_two_proportion_degenerate() -> None:
    assert two_proportion_z(5, 5, 7, 7) == (0.0, 1.0)
    assert two_proportion_z(0, 0, 1, 2) == (0.0, 1.0)


def test_percentile_linear() -> None:
    xs = [float(i) for i in range(1, 11)]
    assert percentile(xs, 50) == 5.5
    assert percentile(xs, 95) == pytest.approx(9.55)
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0


def test_normal_cdf() -> None:
    assert normal_cdf(0) == 0.5
    assert normal_cdf(1.959963984540054) == pytest.approx(0.975)
    assert math.isclose(normal_cdf(-1) + normal_cdf(1), 1.0)
