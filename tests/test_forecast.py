"""forecast(): the Forecast contract for every method, the metric's range, and bad input."""

import warnings

import numpy as np
import pytest

from rlcurves import RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.forecast import Forecast, forecast

TRUTH = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)


@pytest.fixture
def half_budget_fit():
    rng = np.random.default_rng(21)
    c = np.linspace(0, 8000, 41)
    y = sigmoid(c, **TRUTH) + rng.normal(0, 0.008, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, y, min_compute=1500, r0=float(y[0]))


def test_bootstrap_forecast_contract(half_budget_fit):
    fc = forecast(half_budget_fit, [8000.0, 16000.0], seed=0, progress=False, n=400)
    assert isinstance(fc, Forecast) and fc.method == "bootstrap" and fc.level == 0.9
    for name in ("at", "mean", "lower", "upper", "prediction_lower", "prediction_upper"):
        assert getattr(fc, name).shape == (2,), name
    assert fc.samples.shape == (400, 2)
    np.testing.assert_allclose(fc.mean, half_budget_fit.predict([8000.0, 16000.0]))
    assert np.all(fc.prediction_lower <= fc.lower) and np.all(fc.lower < fc.mean)
    assert np.all(fc.mean < fc.upper) and np.all(fc.upper <= fc.prediction_upper)
    # extrapolating further is less certain
    width = fc.upper - fc.lower
    assert width[1] > width[0]
    # the interval is the samples' quantiles
    lo, hi = np.quantile(fc.samples, [0.05, 0.95], axis=0)
    np.testing.assert_allclose(fc.lower, lo)
    np.testing.assert_allclose(fc.upper, hi)
    assert list(fc.to_frame().columns)[:4] == ["at", "mean", "lower", "upper"]


def test_scalar_at_gives_floats(half_budget_fit):
    fc = forecast(half_budget_fit, 16000, seed=0, progress=False, n=200, kind="residual")
    for name in ("at", "mean", "lower", "upper", "prediction_lower", "prediction_upper"):
        assert isinstance(getattr(fc, name), float), name
    assert fc.samples.shape == (200, 1)
    assert fc.info["kind"] == "residual"
    assert "16000" in repr(fc)


def test_higher_level_gives_wider_intervals(half_budget_fit):
    narrow = forecast(half_budget_fit, 16000, level=0.5, seed=3, progress=False, n=400)
    wide = forecast(half_budget_fit, 16000, level=0.95, seed=3, progress=False, n=400)
    assert wide.lower < narrow.lower < narrow.upper < wide.upper


def test_intervals_respect_a_pass_rate_range():
    # A run near the top of the range: the ceiling's interval must not leave [0, 1].
    rng = np.random.default_rng(2)
    c = np.linspace(0, 8000, 41)
    y = np.clip(sigmoid(c, 0.99, 1.5, 2000.0, 0.5) + rng.normal(0, 0.01, c.size), 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y, min_compute=1500)
    fc = forecast(fit, [16000.0, 1e6], seed=0, progress=False, n=300)
    assert np.all(fc.prediction_upper <= 1.0) and np.all(fc.upper <= 1.0)
    assert np.all(fc.prediction_lower >= 0.0)


def test_bad_input(half_budget_fit):
    with pytest.raises(RLCurvesError, match="unknown forecast method"):
        forecast(half_budget_fit, 1e4, method="crystal-ball")
    with pytest.raises(RLCurvesError, match="at must be"):
        forecast(half_budget_fit, -5.0, progress=False)
    with pytest.raises(RLCurvesError, match="level"):
        forecast(half_budget_fit, 1e4, level=1.5, progress=False)
