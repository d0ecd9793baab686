"""Statistics against independent references: scipy and numpy over grids of small samples, and published values."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.stats as scipy_stats

from brownout.proxy.experiment.analysis import success_comparison
from brownout.proxy.experiment.stats import fisher_exact, percentile, wilson_interval
from tests.experiment.builders import run

SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 13, 20)


def test_fisher_published_values() -> None:
    # Where the pooled z-test said p = 0.025 and 0.038 (both "significant"), the exact test does not.
    assert fisher_exact(10, 10, 6, 10) == pytest.approx(0.0867, abs=5e-5)
    assert fisher_exact(5, 5, 2, 5) == pytest.approx(0.1667, abs=5e-5)
    # 10/10 vs 8/10: tables with 18 successes have weights 45, 100, 45 out of C(20, 18) = 190.
    assert fisher_exact(10, 10, 8, 10) == pytest.approx(90 / 190, rel=1e-12)


@pytest.mark.parametrize("n1", SIZES)
def test_fisher_matches_scipy_on_every_small_table(n1: int) -> None:
    for n2 in SIZES:
        for x1 in range(n1 + 1):
            for x2 in range(n2 + 1):
                ref = scipy_stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]], alternative="two-sided").pvalue
                got = fisher_exact(x1, n1, x2, n2)
                assert got == pytest.approx(ref, rel=1e-9, abs=1e-15), (x1, n1, x2, n2)
                assert got == fisher_exact(x2, n2, x1, n1)  # the test is symmetric in the samples


def test_fisher_degenerate_and_invalid() -> None:
    assert fisher_exact(0, 0, 3, 5) == 1.0 == fisher_exact(2, 4, 0, 0)
    assert fisher_exact(5, 5, 7, 7) == 1.0  # no failures anywhere: no evidence of a difference
    with pytest.raises(ValueError, match="first sample"):
        fisher_exact(6, 5, 1, 5)
    with pytest.raises(ValueError, match="second sample"):
        fisher_exact(1, 5, -1, 5)


def test_small_drop_is_not_significant_but_a_large_one_is() -> None:
    base = [run("baseline", i, "passed") for i in range(10)]
    six = [run("chaos", i, "passed" if i < 6 else "failed") for i in range(10)]
    vs = success_comparison(base, six)
    assert vs["drop"] == pytest.approx(0.4)
    assert vs["p_value"] == pytest.approx(0.0867, abs=5e-5) and vs["significant"] is False
    two = [run("chaos", i, "passed" if i < 2 else "failed") for i in range(10)]
    vs = success_comparison(base, two)
    ref = scipy_stats.fisher_exact([[10, 0], [2, 8]]).pvalue
    assert vs["p_value"] == pytest.approx(ref, rel=1e-9) and vs["significant"] is True


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 15, 20, 30])
def test_wilson_matches_scipy(n: int) -> None:
    for k in range(n + 1):
        ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = wilson_interval(k, n)
        assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12), (k, n)
        ci90 = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="wilson")
        assert wilson_interval(k, n, confidence=0.9) == pytest.approx((ci90.low, ci90.high), abs=1e-12)


def test_wilson_published_and_edges() -> None:
    # By hand, z = 1.96: 8/10 has center (0.8 + z²/20)/(1 + z²/10) = 0.71674 and half-width 0.22658.
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(1, 10, confidence=1.0)


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(1)
    for size in range(1, 16):
        xs = [round(rng.uniform(0, 30), 3) for _ in range(size)]
        for q in range(101):
            assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12, abs=1e-12), (xs, q)
    assert percentile([float(i) for i in range(1, 11)], 95) == pytest.approx(9.55)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    with pytest.raises(ValueError):
        percentile([1.0, 2.0], 101)
    with pytest.raises(ValueError):
        percentile([1.0, 2.0], 2.5)  # type: ignore[arg-type]
