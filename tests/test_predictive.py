"""The forecast's predictive distribution and the decision probabilities computed from it."""

import numpy as np
import pytest

from rlcurves import RLCurvesError, fit_sigmoid, forecast, sigmoid
from rlcurves.decide import prob_above, prob_best
from rlcurves.predictive import Predictive


@pytest.fixture(scope="module")
def half_fit():
    rng = np.random.default_rng(3)
    c = np.linspace(10, 500, 60)
    r = sigmoid(c, 0.8, 1.5, 150.0, 0.1) + rng.normal(0, 0.01, c.size)
    return fit_sigmoid(c, r, max_compute=250)


@pytest.mark.parametrize("method", ["bootstrap", "profile"])
def test_printed_interval_is_the_predictive_interval(half_fit, method):
    fc = forecast(half_fit, [400.0, 500.0], method=method, seed=0, progress=False, level=0.9)
    lo, hi = fc.predictive.interval(0.9)
    width = np.asarray(fc.upper) - np.asarray(fc.lower)
    np.testing.assert_allclose(lo, fc.lower, atol=0.01 * width.max())
    np.testing.assert_allclose(hi, fc.upper, atol=0.01 * width.max())


def test_a_baseline_inside_the_interval_is_never_improbable(half_fit):
    """The invariant of issue 27: p(above) <= 0.05 only when the baseline is above the upper end
    of the 90% interval."""
    fc = forecast(half_fit, 500.0, seed=0, progress=False, level=0.9)
    for b in np.linspace(fc.lower, fc.upper, 11)[1:-1]:
        p = prob_above(fc, b)
        assert 0.05 <= p <= 0.95, (b, p)
    assert prob_above(fc, fc.upper + 1e-3) < 0.05
    assert prob_above(fc, fc.lower - 1e-3) > 0.95


def test_prob_best_sums_to_one_and_orders_runs():
    rng = np.random.default_rng(0)
    runs = {
        "low": Predictive([1.0], rng.normal(0.5, 0.02, 800)),
        "high": Predictive([1.0], rng.normal(0.6, 0.02, 1000)),
        "mid": rng.normal(0.55, 0.05, 500),
    }
    p = prob_best(runs)
    assert sum(p.values()) == pytest.approx(1.0)
    assert p["high"] > p["mid"] > p["low"]
    assert prob_best(runs, sign=-1)["low"] > 0.5


def test_bad_predictive_shapes_are_refused():
    with pytest.raises(RLCurvesError, match="shape"):
        Predictive([1.0, 2.0], np.zeros((10, 3)), "curve")
    with pytest.raises(RLCurvesError, match="finite"):
        prob_above([0.5], [np.nan])
