"""Forecast helpers: compute_to_reach with an interval, and backtest on growing prefixes."""

import math
import warnings

import numpy as np
import pytest

from rlcurves import fit_sigmoid, inverse_sigmoid, sigmoid
from rlcurves.backtest import COLUMNS, backtest
from rlcurves.errors import RLCurvesError
from rlcurves.forecast import forecast
from rlcurves.target import ComputeTarget, quantile_with_inf

TRUTH = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)


@pytest.fixture(scope="module")
def half_fit():
    """The paper's protocol: a run fitted on half its 16k budget."""
    c = np.linspace(0, 16000, 81)
    r = sigmoid(c, **TRUTH) + np.random.default_rng(5).normal(0, 0.006, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, r, min_compute=1500, max_compute=8000)


def test_compute_to_reach_point_is_unchanged(half_fit):
    f = half_fit
    assert f.compute_to_reach(0.5) == pytest.approx(
        float(inverse_sigmoid(0.5, f.A, f.B, f.C_mid, f.R0)), rel=1e-12
    )
    np.testing.assert_array_equal(f.compute_to_reach([f.A + 0.01]), [np.inf])


def test_compute_to_reach_interval_reachable_target(half_fit):
    t = half_fit.compute_to_reach(0.5, level=0.9, n_samples=400)
    assert isinstance(t, ComputeTarget)
    assert t.lower < t.compute < t.upper < math.inf
    truth = float(inverse_sigmoid(0.5, **TRUTH))
    # 0.5 lies inside the fitted range: the compute to reach it is pinned within a few percent
    assert t.compute == pytest.approx(truth, rel=0.05)
    assert t.p_reachable == 1.0
    assert "reaching 0.5 takes C = " in str(t) and "never" not in str(t)


def test_compute_to_reach_near_the_ceiling_says_never(half_fit):
    near = half_fit.compute_to_reach(half_fit.A - 0.003, level=0.9, n_samples=400)
    assert math.isfinite(near.compute) and near.upper == math.inf
    assert 0 < near.p_reachable < 0.95
    assert "within the ceiling's plausible range" in near.message
    above = half_fit.compute_to_reach(0.75, level=0.9, n_samples=400)
    assert above.compute == math.inf and above.upper == math.inf
    assert "never reached" in above.message and above.p_reachable < 0.05
    start = half_fit.compute_to_reach(0.1, level=0.9, n_samples=100)
    assert start.compute == 0 and "no compute needed" in start.message


def test_compute_to_reach_array_and_normal(half_fit):
    df = half_fit.compute_to_reach([0.45, 0.55], level=0.8, n_samples=200, method="normal")
    assert list(df["reward"]) == [0.45, 0.55]
    assert (df["lower"] <= df["compute"]).all() and (df["compute"] <= df["upper"]).all()
    assert (df["method"] == "normal").all()


def test_quantile_with_inf():
    x = np.array([1.0, 2.0, 3.0, np.inf])
    assert quantile_with_inf(x, 0.0) == 1.0
    assert quantile_with_inf(x, 0.5) == pytest.approx(np.quantile(x[:3], 0.75))
    assert quantile_with_inf(x, 0.9) == math.inf
    assert quantile_with_inf(np.array([1.0, 3.0]), 0.5) == 2.0


@pytest.fixture(scope="module")
def clean_backtest():
    c = np.linspace(0, 20000, 101)
    r = sigmoid(c, **TRUTH) + np.random.default_rng(9).normal(0, 0.005, c.size)
    return backtest(c, r, fractions=(0.1, 0.25, 0.5, 0.75), min_compute=1500, n_samples=300, seed=2)


def test_backtest_table_and_convergence(clean_backtest):
    bt = clean_backtest
    t = bt.table
    assert list(t.columns) == COLUMNS
    assert list(t["fraction"]) == [0.1, 0.25, 0.5, 0.75]
    # 0.1 of 20k = 2000: only 3 points after 1500, too few to fit, reported not raised
    assert np.isnan(t.loc[0, "forecast"]) and "not fitted" in t.loc[0, "note"]
    fitted = t.dropna(subset=["forecast"])
    final_truth = float(sigmoid(20000, **TRUTH))
    assert t["final_fit"].iloc[0] == pytest.approx(final_truth, abs=0.005)
    # the forecast of the end converges: error at 75% below 0.01, interval narrows with data
    assert abs(fitted["error"].iloc[-1]) < 0.01
    widths = (fitted["forecast_upper"] - fitted["forecast_lower"]).to_numpy()
    assert widths[-1] < widths[0]
    assert (fitted["prediction_lower"] <= fitted["forecast_lower"]).all()
    # each row's interval is forecast()'s default (calibrated) interval for that prefix
    half = fitted[fitted["fraction"] == 0.5].iloc[0]
    fc = forecast(bt.fits[0.5], 20000.0, seed=2, n=300, progress=False)
    assert (half["forecast_lower"], half["forecast_upper"]) == (fc.lower, fc.upper)
    assert fc.calibration != "uncalibrated"
    assert abs(half["A"] - TRUTH["A"]) < 0.02
    assert set(bt.coverage) == {"forecast", "observed", "A"}
    assert "[[Backtest]]" in bt.summary() and "not fitted" in bt.summary()


def test_backtest_errors():
    c = np.linspace(0, 1000, 11)
    r = sigmoid(c, 0.6, 2, 400, 0.3)
    with pytest.raises(RLCurvesError, match="fractions"):
        backtest(c, r, fractions=(0.5, 1.5))
    with pytest.raises(RLCurvesError, match="no prefix could be fitted"):
        backtest(c, r, fractions=(0.1,), min_compute=50)


def test_calibrated_draws_are_the_ar1_draws(half_fit):
    # "calibrated" is an alias of the AR(1) bootstrap: the same draws, with the same per-parameter
    # factor, and raw (factor 1) when asked for
    from rlcurves._samples import parameter_samples

    for inflation in (None, 1.0):
        ar1 = parameter_samples(half_fit, 200, kind="ar1", seed=4, inflation=inflation)
        cal = parameter_samples(half_fit, 200, kind="calibrated", seed=4, inflation=inflation)
        np.testing.assert_array_equal(cal.to_numpy(), ar1.to_numpy())
        assert cal["A"].between(0, 1).all() and cal["R0"].between(0, 1).all()
    raw = parameter_samples(half_fit, 200, kind="calibrated", seed=4, inflation=1.0)
    inflated = parameter_samples(half_fit, 200, kind="calibrated", seed=4)
    assert inflated["B"].std() > 1.2 * raw["B"].std()  # PARAMETER_INFLATION["B"] = 1.51


def test_regression_backtest_fractions_and_n_samples_in_its_keywords():
    # fractions=0.5 was "'float' object is not iterable", fractions='x' a ValueError from
    # float(); n_samples=0 said "n must be an integer" (a keyword backtest does not have)
    c = np.linspace(0, 16000, 41)
    r = sigmoid(c, **TRUTH) + np.random.default_rng(3).normal(0, 0.006, c.size)
    with pytest.raises(RLCurvesError, match=r"fractions= must be numbers in \(0, 1\).*'x'"):
        backtest(c, r, fractions="x", progress=False)
    with pytest.raises(RLCurvesError, match="n_samples= must be an integer >= 2 resamples"):
        backtest(c, r, n_samples=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = backtest(c, r, fractions=0.5, n_samples=50, seed=0, progress=False)
        listed = backtest(c, r, fractions=[0.5], n_samples=50, seed=0, progress=False)
    assert list(one.table["fraction"]) == [0.5]
    assert one.table.equals(listed.table)
