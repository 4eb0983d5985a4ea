"""rlcurves.ensemble: the model average, its variance, and the one definition of a run's level;
rlcurves._ar1: the AR(1) noise in compute and its one clip."""

import math
import warnings

import numpy as np
import pytest

from rlcurves import fit_sigmoid, sigmoid
from rlcurves._ar1 import RHO_MAX, ar1_series, lag1, mean_variance, spacing_units
from rlcurves.ensemble import (
    BACKTEST_CUTS,
    EnsembleConfig,
    assemble,
    backtest_weights,
    combine,
    level_grid,
    level_mask,
    members,
)


def _fit(c, y, end):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, y, max_compute=end)


def test_weights_are_inverse_mse_shrunk_toward_equal():
    errors = {
        "sigmoid": dict(zip(BACKTEST_CUTS, (0.01, 0.01, 0.01), strict=True)),
        "power_law": dict(zip(BACKTEST_CUTS, (0.03, 0.03, 0.03), strict=True)),
    }
    raw = backtest_weights(errors, shrink=0.0)
    assert raw["power_law"] == pytest.approx(0.1)  # 1/9 vs 1/1 of the squared errors
    half = backtest_weights(errors, shrink=0.5)
    assert half["power_law"] == pytest.approx(0.25 + 0.5 * 0.1)
    assert backtest_weights(errors, shrink=1.0)["power_law"] == pytest.approx(0.5)
    errors["power_law"] = dict.fromkeys(BACKTEST_CUTS, math.nan)
    assert backtest_weights(errors, shrink=0.5)["power_law"] == 0.0  # nothing to weigh it by
    with pytest.raises(Exception, match="shrink"):
        EnsembleConfig(0.25, 1.5)


def test_variance_holds_both_families_fit_uncertainty_and_the_weights():
    """A run that keeps creeping up (a power law plus noise): beyond its window the power law
    carries weight, and the model variance is the spread of the *combined* forecast over the
    resamples (both families refitted, weights recomputed on each), more than the sigmoid's
    spread alone whenever the power law has weight; inside the window it is the sigmoid's."""
    rng = np.random.default_rng(4)
    c = np.linspace(50, 4000, 80)
    y = 0.7 - 0.9 * c**-0.35 + rng.normal(0, 0.004, c.size)
    fit = _fit(c, y, 2000.0)
    m = members(fit, np.array([1500.0, 4000.0]), tails=(0.25,), n_resamples=200, seed=0)
    ens = assemble(m, EnsembleConfig(0.25, 0.5))
    assert ens.w_power_law[0] == 0.0 and ens.w_power_law[1] >= 0.25  # shrunk: at least 1/4
    sig_only = np.var(m.sigmoid_draws, axis=0, ddof=1)
    assert ens.fit_var[0] == pytest.approx(sig_only[0])
    assert ens.fit_var[1] != pytest.approx(sig_only[1], rel=0.05)
    # the weights of the resamples vary (recomputed on each) and lean the same way as the data's
    pl = m.power_law[0.25]
    from rlcurves.ensemble import _weights

    wb = _weights(m.sigmoid_bt_draws, pl["bt_draws"], 0.5)
    assert np.std(wb) > 0.01 and abs(np.median(wb) - ens.weights["power_law"]) < 0.3
    # combine is members + assemble for one setting; the same seed gives the same forecast
    again = combine(fit, np.array([1500.0, 4000.0]), config=EnsembleConfig(0.25, 0.5), seed=0)
    np.testing.assert_allclose(again.fit_var, ens.fit_var)
    np.testing.assert_allclose(again.mean, ens.mean)


@pytest.mark.slow
def test_perturbation_resamples_give_the_parametric_bootstraps_variance():
    """The model variance comes from perturbing the data (so a resample's backtests see the
    run's real shape); to first order it is the variance of the AR(1) parametric bootstrap
    around the fitted curve. Truths from another process: a sigmoid plus AR(1) noise (rho 0.5)
    drawn 80 times, the first half fitted, the sigmoid's level at the end forecast. The two
    variances must agree within 0.75-1.33x on average (their ratio's sd over 80 draws is about
    0.05: a perturbation that doubled the noise, 2x, fails with certainty). Both are about half
    the forecasts' real spread over the draws (rho is underestimated from 30 residuals, 0.28 for
    0.5): that part is the misspecification scale's, which the calibration measures on finished
    runs; the test pins it above 0.3x so that a collapse shows. ~1 minute."""
    from rlcurves.bootstrap import bootstrap

    rng = np.random.default_rng(7)
    c = np.linspace(0, 6000, 61)
    truth = sigmoid(c, 0.6, 1.6, 1500.0, 0.2)
    forecasts, perturbed, parametric = [], [], []
    for _ in range(80):
        fit = _fit(c, truth + ar1_series(rng, 1, c.size, 0.01, 0.5)[0], 3000.0)
        m = members(fit, np.array([6000.0]), n_resamples=100, seed=int(rng.integers(1 << 30)))
        boot = bootstrap(fit, 100, kind="ar1", seed=1, progress=False)
        forecasts.append(float(m.sigmoid[0]))
        perturbed.append(float(np.var(m.sigmoid_draws[:, 0], ddof=1)))
        parametric.append(float(np.var(boot.curves(np.array(m.grids[0])).mean(axis=1), ddof=1)))
    ratio = float(np.mean(perturbed) / np.mean(parametric))
    assert 0.75 < ratio < 1.33, ratio
    assert float(np.mean(perturbed) / np.var(forecasts, ddof=1)) > 0.3


def test_regression_the_level_is_one_window_everywhere():
    """The level was the evaluations with compute > 0.9 end in calibrate.py and >= 0.9 end in
    decide.py (0.0069 apart on a MATH run): one mask now, the open one, whose count matches the
    evaluations the forecast's level averages (k = 0.1 end / spacing)."""
    from rlcurves.calibrate import level_target
    from rlcurves.decide import final_level
    from rlcurves.ensemble import n_level

    c = np.arange(0.0, 205.0, 5.0)
    y = np.linspace(0.2, 0.6, c.size)
    mask = level_mask(c, 200.0)
    assert mask.sum() == n_level(200.0, 5.0) == 4 and not mask[c == 180.0].any()
    assert level_target(c, y) == pytest.approx(np.mean(y[mask]))
    assert float(final_level(c, y).info["mean"]) == pytest.approx(level_target(c, y))


def test_ar1_in_compute_and_one_clip():
    rng = np.random.default_rng(0)
    # evenly spaced: the Yule-Walker estimate
    e = ar1_series(rng, 1, 4000, 1.0, 0.6)[0]
    assert lag1(e) == pytest.approx(0.6, abs=0.04)
    # half the gaps twice as long: correlation rho at one spacing, rho^2 at two; an estimate by
    # evaluation index would land between
    gaps = np.where(np.arange(3999) % 2 == 0, 1.0, 2.0)
    compute = np.r_[0.0, np.cumsum(gaps)]
    e = ar1_series(rng, 1, 4000, 1.0, 0.6, gaps=spacing_units(compute, 4000))[0]
    assert lag1(e, compute) == pytest.approx(0.6, abs=0.05)
    assert lag1(e) < 0.5
    # one clip everywhere: the bootstrap's estimate, the level's noise, the peak test
    from rlcurves.bootstrap import ar1_params
    from rlcurves.decide import _lag1

    near_one = np.cumsum(rng.normal(0, 1, 300))  # a random walk: rho estimates near 1
    assert ar1_params(near_one, 0)[1] == RHO_MAX
    assert _lag1(near_one) == RHO_MAX
    assert mean_variance(10, 0.999) == mean_variance(10, RHO_MAX)


def test_regression_a_forecast_far_beyond_the_data_does_not_build_its_whole_level_window():
    """`rlcurves forecast RUN --at 1e9` on a run evaluated every few GPU-hours asked numpy for
    the level window's 10 billion evaluations (77 GiB) before keeping 64 of them, and the AR(1)
    variance of their mean summed 10 billion lags: a MemoryError traceback. The window is now
    its 64 points from the same oldest one, and the sum stops at lags whose weight is below
    1e-170; a forecast a million times past the data allocates little."""
    import tracemalloc

    from rlcurves import forecast

    at, spacing = 1e12, 1.0
    k = round(0.1 * at / spacing)
    grid = level_grid(at, spacing)
    assert grid.size == 64 and grid[-1] == at and grid[0] == at - spacing * (k - 1)
    small = level_grid(700.0, 1.0)  # 70 evaluations: the same window as before the fix
    np.testing.assert_array_equal(small, np.linspace(700.0 - 69.0, 700.0, 64))
    for rho in (0.0, 0.5, RHO_MAX):
        # the variance of the mean of k AR(1) values: (1 + 2 S) / k, S = sum (1 - j/k) rho^j
        s = rho / (1 - rho) - rho * (1 - rho**k) / (k * (1 - rho) ** 2) if rho else 0.0
        assert mean_variance(k, rho) == pytest.approx((1 + 2 * s) / k, rel=1e-9)
    c = np.linspace(10.0, 1000.0, 100)
    y = sigmoid(c, 0.6, 2.0, 300.0, 0.1) + np.random.default_rng(0).normal(0, 0.01, c.size)
    fit = fit_sigmoid(c, y)
    tracemalloc.start()
    try:
        fc = forecast(fit, 1e9, n=500, seed=0, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.isfinite(fc.mean).all() and peak < 200e6
