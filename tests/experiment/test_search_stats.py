"""The search's statistics: Wald's SPRT and the fixed-sample test it is compared with, the scale, the fit."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from brownout.proxy.experiment.search.fit import GOF_LEVEL, fit_levels
from brownout.proxy.experiment.search.scale import LOG_FLOOR, Scale
from brownout.proxy.experiment.search.sequential import Sprt


def _test_at(sprt: Sprt, n: int) -> tuple[float, float]:
    """(P(reject fails | p_fails), P(accept fails | p_holds)) of the best one-sided test with n runs."""
    c = int(stats.binom.isf(sprt.alpha, n, sprt.p_fails)) + 1
    return float(stats.binom.sf(c - 1, n, sprt.p_fails)), float(stats.binom.cdf(c - 1, n, sprt.p_holds))


@pytest.mark.parametrize(("target", "tolerance"), [(0.9, 0.05), (0.9, 0.1), (0.5, 0.1), (0.99, 0.05)])
def test_the_grid_sample_size_is_the_least_with_both_error_rates(target: float, tolerance: float) -> None:
    sprt = Sprt(target, tolerance)
    alpha, beta = _test_at(sprt, sprt.fixed_n)
    assert alpha <= sprt.alpha and beta <= sprt.alpha
    assert max(_test_at(sprt, sprt.fixed_n - 1)) > sprt.alpha


def test_the_indifference_zone_stays_inside_zero_and_one() -> None:
    near_one = Sprt(0.99, 0.05)
    assert near_one.p_fails == pytest.approx(0.94) and near_one.p_holds == pytest.approx(0.995)


def test_wald_boundaries_decide_and_truncation_falls_back_to_the_sign() -> None:
    sprt = Sprt(0.9, 0.05)  # ln(19) / ln(0.95 / 0.85) = 26.4 successes; ln(19) / ln(0.15 / 0.05) = 2.7 failures
    assert sprt.decide(26, 26) is None and sprt.decide(27, 27) == "holds"
    assert sprt.decide(0, 2) is None and sprt.decide(0, 3) == "fails"
    n = sprt.fixed_n
    assert sprt.decide(n - 10, n) == "fails" and sprt.decide(math.ceil(0.91 * n), n) == "holds"


def test_a_log_scale_bisects_geometrically_and_a_log_range_from_zero_starts_above_it() -> None:
    scale = Scale(100, 10_000, "log")
    assert scale.value(0.5) == pytest.approx(1000)
    assert scale.u(scale.value(0.3)) == pytest.approx(0.3)
    assert scale.step == pytest.approx(math.log(1.05) / math.log(100))
    assert Scale(0, 20_000, "log").bottom == 20_000 * LOG_FLOOR
    lower = Scale(0, 20, "linear", harsher="lower", integer=True)
    assert lower.value(0) == 20 and lower.value(1) == 0 and lower.value(0.49) == 10
    assert Scale(0, 1, "linear", resolution=0.05).grid_levels == 21


def test_a_step_response_gets_the_gap_between_its_last_pass_and_first_failure() -> None:
    us, ns, ks = [0, 1, 0.5, 0.25, 0.375, 0.3125, 0.34375], [18, 6, 6, 18, 6, 18, 18], [18, 0, 0, 18, 0, 18, 18]
    fit = fit_levels(us, ns, ks, target=0.9, confidence=0.95, step=0.03)
    assert fit.method == "logistic"
    assert fit.estimate == pytest.approx((0.34375 + 0.375) / 2, abs=1e-3)
    low, high = fit.interval
    assert 0.33 < low <= 0.34375 + 1e-3 and 0.375 - 1e-3 <= high < 0.39


def test_the_posterior_widens_a_profile_that_the_crowded_levels_make_too_sure() -> None:
    # A search for 1 - p^3 (seed 6): the profile-likelihood interval alone is 0.393..0.463 and misses 0.464.
    us = [0, 1, 0.5, 0.25, 0.375, 0.4375, 0.40625]
    fit = fit_levels(
        us, [28, 4, 12, 40, 28, 76, 72], [28, 0, 8, 39, 28, 66, 68], target=0.9, confidence=0.95, step=0.05
    )
    low, high = fit.interval
    assert low < 0.1 ** (1 / 3) < high


def test_a_curve_the_logistic_cannot_follow_falls_back_to_isotonic() -> None:
    # a plateau at 50% between two cliffs: monotone, but no logistic curve
    us, n = [0, 0.2, 0.4, 0.6, 0.8, 1.0], 60
    ks = [60, 30, 30, 30, 0, 0]
    fit = fit_levels(us, [n] * 6, ks, target=0.9, confidence=0.95, step=0.05)
    assert fit.gof_p_value is not None and fit.gof_p_value < GOF_LEVEL
    assert fit.method == "isotonic"
    assert 0 < fit.estimate < 0.2  # 100% at 0, 50% from 0.2: crosses 90% a fifth of the way
    assert fit.interval[0] <= fit.estimate <= fit.interval[1] <= 0.2 + 1e-9
