"""Profile-likelihood intervals: the linear-regime limit, the threshold at the end points,
asymmetric and open-ended intervals, and the curve-value profile behind forecast's "profile"."""

import math
import warnings

import numpy as np
import pytest
from scipy.stats import t as student_t

from rlcurves import RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.forecast import forecast
from rlcurves.profile import _Problem, profile, profile_prediction


@pytest.fixture(scope="module")
def easy_fit():
    rng = np.random.default_rng(7)
    c = np.linspace(100, 16000, 100)
    y = sigmoid(c, 0.61, 1.92, 2542.0, 0.30) + rng.normal(0, 0.005, c.size)
    return fit_sigmoid(c, y)


@pytest.fixture(scope="module")
def early_fit():
    """A run stopped before its midpoint (32k-generation parameters, half budget)."""
    c = np.linspace(0, 8000, 41)
    y = sigmoid(c, 0.645, 1.89, 11272.0, 0.3) + np.random.default_rng(4).normal(0, 0.01, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, y, min_compute=1500, r0=0.3)


def test_linear_regime_matches_the_t_interval(easy_fit):
    # Where the model is nearly linear in its parameters the profile interval is the Wald t
    # interval: the width within 3%; each end within 6% of the half-width, the slight
    # asymmetry the curvature left in this curve gives (measured: 4% on A's lower side).
    pr = easy_fit.profile(level=0.9)
    q = student_t.ppf(0.95, easy_fit.dof)
    for row in pr.ci().itertuples():
        half = q * easy_fit.stderr[row.parameter]
        assert row.upper - row.lower == pytest.approx(2 * half, rel=0.03), row.parameter
        assert row.lower == pytest.approx(row.estimate - half, abs=0.06 * half), row.parameter
        assert row.upper == pytest.approx(row.estimate + half, abs=0.06 * half), row.parameter
        assert not row.lower_open and not row.upper_open


def test_end_points_sit_on_the_threshold(easy_fit):
    pr = profile(easy_fit, ["B"], level=0.8)
    problem = _Problem(easy_fit)
    s2 = easy_fit.rss / easy_fit.dof
    for end in ("lower", "upper"):
        value = math.log(pr.ci().loc[0, end])
        rss, _ = problem.profile_point("B", value, problem.start("B"), None)
        assert (rss - easy_fit.rss) / s2 == pytest.approx(pr.threshold, rel=0.01)
    trace = pr.traces["B"]
    assert (trace.statistic >= -1e-6).all() and trace.statistic.max() >= pr.threshold


def test_early_run_gives_asymmetric_and_open_intervals(early_fit):
    pr = early_fit.profile(level=0.9)
    ci = pr.ci().set_index("parameter")
    # A sits on its bound 1 and nothing in the data caps it: open upward, reported as such
    assert ci.loc["A", "upper_open"] and ci.loc["A", "upper"] == 1.0
    assert not ci.loc["A", "lower_open"] and ci.loc["A", "lower"] < 0.6
    assert any("A's upper side" in note for note in pr.notes)
    # C_mid: far more room below the estimate than above (the A bound caps it above)
    c = ci.loc["C_mid"]
    assert (c.estimate - c.lower) > 2 * (c.upper - c.estimate)
    # a wider level never gives a narrower interval
    wide = early_fit.profile(["B"], level=0.95).ci().iloc[0]
    assert wide.lower <= ci.loc["B", "lower"] and wide.upper >= ci.loc["B", "upper"]


def test_curve_value_profile(easy_fit, early_fit):
    # inside the data on the easy curve: the delta-method t interval (linear regime, 5%)
    at = np.array([3000.0, 12000.0])
    fc = forecast(easy_fit, at, method="profile", progress=False)
    p = easy_fit.params
    h = 1e-6
    grads = []
    for name in ("A", "B", "C_mid", "R0"):
        q = dict(p, **{name: p[name] * (1 + h)})
        grads.append((sigmoid(at, **q) - sigmoid(at, **p)) / (p[name] * h))
    g = np.array(grads).T
    se = np.sqrt(np.einsum("ki,ij,kj->k", g, easy_fit.cov.to_numpy(), g))
    half = student_t.ppf(0.95, easy_fit.dof) * se
    np.testing.assert_allclose(fc.upper - fc.lower, 2 * half, rtol=0.05)
    assert np.all(fc.lower < fc.mean) and np.all(fc.mean < fc.upper)
    assert fc.samples is None and np.all(fc.prediction_lower < fc.lower)
    # extrapolating an early run: the interval widens and stays inside [0, 1]
    lo2, hi2 = profile_prediction(early_fit, [8000.0, 16000.0], level=0.9)
    assert (hi2[1] - lo2[1]) > 3 * (hi2[0] - lo2[0])
    assert np.all((lo2 >= 0) & (hi2 <= 1))


def test_bad_input(easy_fit):
    with pytest.raises(RLCurvesError, match="can profile only"):
        easy_fit.profile(["R0"])
    pr = easy_fit.profile(["A"], level=0.9)
    with pytest.raises(RLCurvesError, match="computed at level"):
        pr.ci(0.5)
    with pytest.raises(RLCurvesError, match="level"):
        easy_fit.profile(level=0)


def test_regression_open_ends_reach_forecast(early_fit):
    """profile_prediction dropped its open-ended flags, so forecast(method="profile") reported
    an unbounded end as finite: the early run's far forecast is open upward (A uncapped)."""
    fc = forecast(early_fit, [4000.0, 1e8], method="profile", progress=False)
    assert fc.info["upper_open"].tolist() == [False, True]
    assert fc.upper[1] == 1.0  # the open end is the metric's bound, and is flagged as such
    band = profile_prediction(early_fit, [4000.0], level=0.9)
    lo, hi = band  # still unpacks as (lower, upper)
    assert not band.upper_open[0] and lo[0] < hi[0]


def test_regression_every_threshold_crossing_is_found():
    """Only the first crossing was found: a profile that rises above the threshold and dips
    below it again further out lost the outer part of its interval."""
    from rlcurves.profile import _beyond, _scan

    class TwoDips:
        # statistic: v^2 near 0, and a second dip (to 1.0) centred at v = 6
        def start(self, target):
            return np.zeros(1)

        def profile_point(self, target, v, z0, at_x):
            return min(v * v, 1.0 + 4 * (v - 6.0) ** 2), z0

    thr = 2.706  # chi2_1 at 90%
    problem = TwoDips()
    end, is_open, trace = _scan(problem, "B", 0.0, 1.0, 50.0, +1, thr, lambda r: r, None)
    assert end == pytest.approx(math.sqrt(thr), rel=1e-3) and not is_open  # the first crossing
    outer, is_open = _beyond(problem, "B", 0.0, end, 1.0, 50.0, +1, thr, lambda r: r, None, trace)
    # the second dip's outer crossing: 1 + 4 (v - 6)^2 = thr
    assert outer == pytest.approx(6.0 + math.sqrt((thr - 1.0) / 4), rel=1e-3) and not is_open
