"""The dose-response fit over every run of a search, and the breaking point's confidence interval.

The model is logistic in the search coordinate u (the log of the value on a log scale), written so that
its parameter is the breaking point itself:

    P(good | u) = expit(logit(target) + slope * (theta - u)),  slope >= 0

theta is where the curve crosses the goal's target. The estimate is its maximum-likelihood value, and
the interval is the union of two:
- the profile-likelihood interval: every theta whose profile deviance 2 (l_max - l_p(theta)) stays under
  the chi-square(1) quantile of the confidence (Venzon and Moolgavkar 1988). The slope is bounded, so an
  agent that fails like a step (every run passes below a threshold, every run fails above it: complete
  separation, where the unbounded maximum likelihood does not exist) gets the whole gap between its
  last passing and first failing level as the flat top of the profile, and its interval just outside it;
- the equal-tailed posterior interval of theta, with a flat prior on theta over the range and a
  log-uniform one on the slope. A search places its levels close to the breaking point and stops each
  one on a sequential test, so the slope is weakly known and the profile, which takes the best slope
  at each theta, is too sure of itself there (in simulation it covered the truth 86% of the time at a
  nominal 95%); integrating the slope out restores the coverage (95% for a logistic truth).

When the deviance goodness-of-fit test rejects the logistic curve (at 5%), the fit falls back to an
isotonic regression (pool adjacent violators, monotone only) for the estimate, and the interval widens
to take in the one of one-sided Wilson bounds: theta lies above every level whose share is confidently
above the target and below every level whose share is confidently below it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from brownout.proxy.experiment.stats import wilson_interval

__all__ = ["GOF_LEVEL", "Fit", "fit_levels"]

logger = logging.getLogger(__name__)

GOF_LEVEL = 0.05  # below this goodness-of-fit p-value the logistic curve is not trusted
_THETAS = np.linspace(0.0, 1.0, 1001)
_FLAT = 1e-4
_BISECTIONS = 48
_SLOPES = 150  # log-spaced slopes the posterior integrates over  # deviance within this of the maximum: the flat top of a separated profile


@dataclass(frozen=True)
class Fit:
    """The fitted curve and the crossing of the target, all in u; `curve` is (u, P(good)) for the chart."""

    method: str  # "logistic" or "isotonic"
    estimate: float
    interval: tuple[float, float]
    slope: float | None = None
    gof_p_value: float | None = None
    curve: list[tuple[float, float]] = field(default_factory=list)


class _Data:
    def __init__(self, us: Sequence[float], ns: Sequence[int], ks: Sequence[int], target: float, step: float) -> None:
        self.u = np.asarray(us, dtype=float)
        self.n = np.asarray(ns, dtype=float)
        self.k = np.asarray(ks, dtype=float)
        self.c = math.log(target / (1 - target))
        # steep enough to be a step between two levels one resolution apart
        self.slope_max = 200.0 / max(step, 1e-6)

    def loglik(self, theta: np.ndarray, slope: np.ndarray) -> np.ndarray:
        """Log-likelihood for each pair of theta and slope (1-D arrays of one length)."""
        eta = self.c + slope[:, None] * (theta[:, None] - self.u[None, :])
        return np.sum(self.k * special.log_expit(eta) + (self.n - self.k) * special.log_expit(-eta), axis=1)

    def profile(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(profile log-likelihood, its slope) at each theta.

        The log-likelihood is concave in the slope, so its derivative falls as the slope grows: the
        maximum is where the derivative changes sign, found by bisection (on the log of the slope, all
        thetas at once), or at an end of [0, slope_max].
        """
        x = theta[:, None] - self.u[None, :]
        lo = np.full(theta.shape, math.log(1e-3))
        hi = np.full(theta.shape, math.log(self.slope_max))
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2
            p = special.expit(self.c + np.exp(mid)[:, None] * x)
            rising = np.sum((self.k - self.n * p) * x, axis=1) > 0
            lo, hi = np.where(rising, mid, lo), np.where(rising, hi, mid)
        candidates = [np.zeros(theta.shape), np.exp((lo + hi) / 2), np.full(theta.shape, self.slope_max)]
        values = np.stack([self.loglik(theta, s) for s in candidates])
        best = values.argmax(axis=0)
        pick = np.arange(len(theta))
        return values[best, pick], np.stack(candidates)[best, pick]

    def best_slope(self, theta: float) -> tuple[float, float]:
        ll, slope = self.profile(np.array([theta]))
        return float(ll[0]), float(slope[0])


def _logistic(data: _Data, confidence: float) -> Fit:
    profile = data.profile(_THETAS)[0]
    best = float(profile.max())
    top = np.flatnonzero(best - profile <= _FLAT)
    if top[-1] - top[0] > 2:  # a flat top (separation): its middle
        theta = float((_THETAS[top[0]] + _THETAS[top[-1]]) / 2)
    else:
        i = int(profile.argmax())
        lo, hi = _THETAS[max(i - 1, 0)], _THETAS[min(i + 1, len(_THETAS) - 1)]
        res = optimize.minimize_scalar(lambda t: -data.best_slope(t)[0], bounds=(lo, hi), method="bounded")
        theta = float(res.x)
    l_max, slope = data.best_slope(theta)
    l_max = max(l_max, best)
    limit = float(stats.chi2.ppf(confidence, 1))
    inside = np.flatnonzero(2 * (l_max - profile) <= limit)
    dev = lambda t: 2 * (l_max - data.best_slope(t)[0]) - limit

    def edge(i: int, outward: int) -> float:
        j = i + outward
        if j < 0 or j >= len(_THETAS):
            return float(_THETAS[i])  # the range's end: the interval is open beyond it
        a, b = sorted((float(_THETAS[i]), float(_THETAS[j])))
        if dev(a) * dev(b) > 0:
            return float(_THETAS[i])
        return float(optimize.brentq(dev, a, b, xtol=1e-7))

    low, high = edge(int(inside[0]), -1), edge(int(inside[-1]), 1)
    post_low, post_high = _posterior_interval(data, confidence)
    low, high = min(low, post_low, theta), max(high, post_high, theta)
    fitted = np.clip(special.expit(data.c + slope * (theta - data.u)), 1e-12, 1 - 1e-12)
    gof = _gof(data, fitted)
    curve = [(float(u), float(special.expit(data.c + slope * (theta - u)))) for u in np.linspace(0, 1, 101)]
    return Fit("logistic", theta, (low, high), slope, gof, curve)


def _posterior_interval(data: _Data, confidence: float) -> tuple[float, float]:
    """The equal-tailed interval of theta's marginal posterior (flat on theta, log-uniform on the slope)."""
    slopes = np.geomspace(0.1, data.slope_max, _SLOPES)
    grid = np.zeros((len(_THETAS), len(slopes)))
    for u, n, k in zip(data.u, data.n, data.k, strict=True):
        eta = data.c + slopes[None, :] * (_THETAS[:, None] - u)
        grid += k * special.log_expit(eta) + (n - k) * special.log_expit(-eta)
    cdf = np.cumsum(np.exp(grid - grid.max()).sum(axis=1))
    cdf /= cdf[-1]
    tail = (1 - confidence) / 2
    low = int(np.searchsorted(cdf, tail))
    high = min(int(np.searchsorted(cdf, 1 - tail)), len(_THETAS) - 1)
    return float(_THETAS[low]), float(_THETAS[high])


def _gof(data: _Data, fitted: np.ndarray) -> float | None:
    """p-value of the deviance goodness-of-fit test (df = levels - 2), None without degrees of freedom."""
    df = len(data.u) - 2
    if df < 1:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        g2 = 2 * np.sum(
            special.xlogy(data.k, data.k / (data.n * fitted))
            + special.xlogy(data.n - data.k, (data.n - data.k) / (data.n * (1 - fitted)))
        )
    return float(stats.chi2.sf(max(float(g2), 0.0), df))


def _isotonic(data: _Data, target: float, confidence: float) -> Fit:
    order = np.argsort(data.u)
    u, n, k = data.u[order], data.n[order], data.k[order]
    shares = optimize.isotonic_regression(k / n, weights=n, increasing=False).x
    below = np.flatnonzero(shares < target)
    if len(below) == 0:
        theta = 1.0
    elif below[0] == 0:
        theta = 0.0
    else:
        i = int(below[0])
        s0, s1 = shares[i - 1], shares[i]
        theta = float(u[i - 1] + (u[i] - u[i - 1]) * (s0 - target) / (s0 - s1))
    one_sided = 2 * confidence - 1  # the two-sided level whose each end is a one-sided bound at `confidence`
    bounds = [wilson_interval(int(kk), int(nn), one_sided) for kk, nn in zip(k, n, strict=True)]
    above = [float(uu) for uu, (lo, _) in zip(u, bounds, strict=True) if lo > target]
    under = [float(uu) for uu, (_, hi) in zip(u, bounds, strict=True) if hi < target]
    low, high = max([0.0, *above]), min([1.0, *under])
    curve = [(float(uu), float(s)) for uu, s in zip(u, shares, strict=True)]
    return Fit("isotonic", theta, (min(low, theta), max(high, theta)), None, None, curve)


def fit_levels(
    us: Sequence[float], ns: Sequence[int], ks: Sequence[int], *, target: float, confidence: float, step: float
) -> Fit:
    """Fit every level's (u, runs, good runs); `step` is the search's resolution in u."""
    data = _Data(us, ns, ks, target, step)
    fit = _logistic(data, confidence)
    if fit.gof_p_value is not None and fit.gof_p_value < GOF_LEVEL:
        logger.info("logistic fit rejected (goodness of fit p=%.3g): isotonic fallback", fit.gof_p_value)
        iso = _isotonic(data, target, confidence)
        # A poor fit can still be right about where the crossing is: keep its interval in the union.
        interval = (min(iso.interval[0], fit.interval[0]), max(iso.interval[1], fit.interval[1]))
        return Fit(iso.method, iso.estimate, interval, None, fit.gof_p_value, iso.curve)
    return fit
