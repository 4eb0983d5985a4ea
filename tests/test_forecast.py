"""forecast(): the Forecast contract for every method, the metric's range, and bad input."""

import warnings

import numpy as np
import pytest

from rlcurves import RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.calibrate import default_calibration
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
    # the point forecast is the model average of the two families' forecasts of the run's level
    w = fc.info["weights"]
    assert w["sigmoid"] + w["power_law"] == pytest.approx(1.0) and 0 <= w["sigmoid"] <= 1
    fam = fc.info["families"]
    np.testing.assert_allclose(fc.info["disagreement"], fam["power_law"] - fam["sigmoid"])
    # 8000 is the end of the fit window: there the sigmoid alone (the level of the last 10%)
    grid = 8000.0 - 200.0 * np.arange(4)
    assert fc.mean[0] == pytest.approx(np.mean(half_budget_fit.predict(grid)))
    beyond = w["sigmoid"] * fam["sigmoid"][1] + w["power_law"] * fam["power_law"][1]
    assert fc.mean[1] == pytest.approx(beyond)
    assert np.all(fc.lower < fc.mean) and np.all(fc.mean < fc.upper)
    assert np.all(fc.prediction_lower < fc.mean) and np.all(fc.mean < fc.prediction_upper)
    # extrapolating further is less certain
    width = fc.upper - fc.lower
    assert width[1] > width[0]
    # the printed interval is the predictive distribution's, whose draws are mean + scale * Z
    # with Z distributed as the run-level calibration scores, each tail its own (multipliers at
    # the level and the forecast's distance past its window)
    (q_lo, q_hi), scale = fc.info["multipliers"], fc.info["scale"]
    cal = default_calibration()
    expect_lo, expect_hi = cal.multipliers(0.9, fc.info["distance"])
    np.testing.assert_allclose(q_lo, expect_lo)
    np.testing.assert_allclose(q_hi, expect_hi)
    np.testing.assert_allclose(fc.lower, fc.mean - q_lo * scale, atol=0.01 * width.max())
    np.testing.assert_allclose(fc.upper, fc.mean + q_hi * scale, atol=0.01 * width.max())
    np.testing.assert_allclose(fc.info["multiplier"], (q_lo + q_hi) / 2)
    assert fc.predictive.n_draws >= 2000 and "evaluations" in fc.predictive.quantity
    assert fc.prediction_predictive.quantity == "one evaluation"
    np.testing.assert_allclose(fc.prediction_predictive.interval(0.9)[0], fc.prediction_lower)
    assert f"{cal.n} runs" in fc.calibration and fc.calibration_n == cal.n
    assert fc.predictive.info["min_tail"] == pytest.approx(cal.min_tail)
    # the same seed gives the same draws
    again = forecast(half_budget_fit, [8000.0, 16000.0], seed=0, progress=False, n=400)
    np.testing.assert_array_equal(again.predictive.draws, fc.predictive.draws)
    # a raw kind is the samples' percentile band and says it is uncalibrated
    raw = forecast(half_budget_fit, [8000.0, 16000.0], seed=0, progress=False, n=400, kind="ar1")
    lo, hi = np.quantile(raw.samples, [0.05, 0.95], axis=0)
    np.testing.assert_allclose(raw.lower, lo)
    np.testing.assert_allclose(raw.upper, hi)
    np.testing.assert_allclose(raw.mean, half_budget_fit.predict([8000.0, 16000.0]))
    assert raw.calibration == "uncalibrated" and raw.calibration_n == 0
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
    for at, said in (([], "is empty"), ("soon", "takes numbers")):  # numpy's errors, before
        with pytest.raises(RLCurvesError, match=said):
            forecast(half_budget_fit, at, progress=False)
    for seed in (-1, 1.5, "0"):  # numpy's ValueError, bare, before
        with pytest.raises(RLCurvesError, match="seed= takes a non-negative integer or None"):
            forecast(half_budget_fit, 1e4, seed=seed, progress=False)
    with pytest.raises(RLCurvesError, match="unknown forecast method"):
        forecast(half_budget_fit, 1e4, method="crystal-ball")
    with pytest.raises(RLCurvesError, match="at=<compute> takes finite compute values"):
        forecast(half_budget_fit, -5.0, progress=False)
    with pytest.raises(RLCurvesError, match="level"):
        forecast(half_budget_fit, 1e4, level=1.5, progress=False)


def _regime_run(rng, params, n_prompts=1000, ema=0.0):
    """One simulated run of benchmarks/calibration.py's regimes (NOT real training): the paper's
    curve (R0 0.30, 81 evaluations over 6.3 C_mid) plus a random walk of the policy (sd 0.0015
    per evaluation), mean@16 evaluation noise on ``n_prompts`` prompts (its variance, p (1 - p)
    0.375 / n_prompts for Beta(2p, 2(1-p)) prompt difficulties, drawn as a normal), optionally
    smoothed as W&B does (EMA with weight ``ema``, debiased). Fit on half the budget; the target
    is the policy's mean expected reward over the last 10% of compute."""
    c_mid, b, a = params
    c = np.linspace(0.0, 6.3 * c_mid, 81)
    p = sigmoid(c, a, b, c_mid, 0.30) + np.cumsum(0.0015 * rng.standard_normal(c.size))
    p = np.clip(p, 1e-3, 1 - 1e-3)
    y = p + rng.normal(0.0, np.sqrt(p * (1 - p) * 0.375 / n_prompts))
    if ema:
        acc = norm = 0.0
        for i, v in enumerate(y.copy()):
            acc, norm = ema * acc + (1 - ema) * v, ema * norm + (1 - ema)
            y[i] = acc / norm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y, max_compute=c.max() / 2)
    return fit, float(c.max()), float(np.mean(p[c > 0.9 * c.max()]))


PAPER_PARAMS = [(2542.0, 1.92, 0.61), (2818.0, 1.77, 0.605), (1675.0, 1.09, 0.615)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("regime", "n_prompts", "ema"),
    [("1,000 prompts", 1000, 0.0), ("low noise", 20_000, 0.0), ("EMA 0.9", 1000, 0.9)],
)
def test_default_forecast_covers_simulated_regimes(regime, n_prompts, ema):
    # Issue 26: the misspecification term was in units of the run's own noise, so a more
    # precise metric (mean@16 on 20,000 prompts: 58-72%) or a smoothed one (EMA 0.9: 60%) got
    # an interval too narrow. 150 simulated runs per regime, fit on half the budget, forecast
    # with the SHIPPED real-run calibration (it never saw a simulation). Pass at >= 129 covered
    # (86%): a true 90% fails with probability 4.4%, a true 80% passes with probability 3.7%.
    # And still useful: median width at half budget below 0.08 (measured 0.058-0.065; the
    # benchmark's 100 runs per regime covered 91%, 99% and 94%). ~1 minute per regime.
    rng = np.random.default_rng([20261203, n_prompts, int(ema * 10)])
    hits, widths = [], []
    for i in range(150):
        fit, budget, target = _regime_run(rng, PAPER_PARAMS[i % 3], n_prompts, ema)
        fc = forecast(fit, budget, seed=i, progress=False, n=200)
        hits.append(fc.lower <= target <= fc.upper)
        widths.append(fc.upper - fc.lower)
    assert sum(hits) >= 129, (regime, sum(hits))
    assert np.median(widths) < 0.08, (regime, np.median(widths))
    # No upper bound on the coverage (there was one, 146, at 1,000 prompts): since issue 41 the
    # shipped interval is a new family's, carrying the across-family spread of the corpus's
    # misspecification, and these runs follow the sigmoid more closely than any real family (148
    # of 150 covered); the width bound above is what keeps it useful.


def test_regression_a_level_the_calibration_cannot_support_is_said_and_the_nearest_used(
    half_budget_fit,
):
    """Above the supported level the conformal multiplier was infinite and the forecast returned
    [0, 1] with unbounded=False and an empty note (then: an unbounded interval). Each tail now
    needs 1 / p - 1 calibration runs behind it; a level beyond gives the interval at the nearest
    supported level, and the note says so."""
    cal = default_calibration()
    fc = forecast(half_budget_fit, 16000.0, level=0.995, seed=0, progress=False, n=200)
    assert not fc.unbounded and fc.predictive is not None
    assert fc.info["level_used"] == pytest.approx(cal.max_level) and cal.max_level < 0.995
    # the level as asked (it read "a 100% interval" for 99.5%, and a 0.1% tail for 0.25%)
    assert "a 99.5% interval needs at least 399 calibration runs (each 0.25% tail" in fc.note
    assert f"the interval shown is the {cal.max_level:.1%} one" in fc.note
    assert 0.0 < fc.lower < fc.upper < 1.0 and np.isfinite(fc.info["multiplier"])
    ok = forecast(half_budget_fit, 16000.0, level=0.9, seed=0, progress=False, n=200)
    assert ok.info["level_used"] == 0.9 and "needs at least" not in ok.note
    assert ok.upper - ok.lower < fc.upper - fc.lower


def test_no_interval_from_no_degrees_of_freedom():
    # 4 points, 4 parameters: nothing is left to estimate the noise from. The forecast must not
    # come back as a confident zero-width interval: a raw bootstrap kind or the profile gives the
    # whole pass-rate range, flagged; the default is the corpus's prior predictive (issue 42,
    # tests/test_shapes.py), never refused.
    c = np.array([100.0, 400.0, 1600.0, 6400.0])
    y = sigmoid(c, 0.6, 1.5, 800.0, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y)
    assert fit.dof == 0
    for kw in ({"kind": "residual"}, {"method": "profile"}):
        fc = forecast(fit, [6400.0, 20000.0], progress=False, seed=0, **kw)
        assert fc.unbounded and "UNBOUNDED" in fc.note and "at least 7 points" in fc.note
        np.testing.assert_array_equal(fc.lower, [0.0, 0.0])
        np.testing.assert_array_equal(fc.upper, [1.0, 1.0])
        assert np.all(fc.upper - fc.lower > 0)
    prior = forecast(fit, [6400.0, 20000.0], progress=False, seed=0)
    assert not prior.unbounded and prior.info["prior"] and np.all(prior.upper - prior.lower > 0)


def test_a_ceiling_on_its_bound_is_said_beyond_the_data():
    rng = np.random.default_rng(5)
    c = np.linspace(0, 8000, 41)
    y = np.clip(sigmoid(c, 1.0, 1.2, 9000.0, 0.2) + rng.normal(0, 0.005, c.size), 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y, min_compute=500)
    assert fit.A == pytest.approx(1.0)
    fc = forecast(fit, [4000.0, 16000.0], progress=False, seed=0, n=200)
    assert "sits on its bound" in fc.note
    inside = forecast(fit, 4000.0, progress=False, seed=0, n=200)
    assert "bound" not in inside.note


def test_a_run_unlike_the_calibration_runs_is_said_to_be():
    # Issue 26, point 1: warn when a run's noise level or evaluation count lies outside what the
    # calibration saw, and say what to do. A noise-free run (residual sd ~1e-6, the corpus's runs
    # have 0.006-0.06) fitted on 6 evaluations with R0 fixed (the corpus's shortest fits have 7):
    c = np.linspace(0, 4000, 11)
    y = sigmoid(c, 0.6, 1.5, 900.0, 0.3) + np.random.default_rng(1).normal(0, 1e-6, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, y, max_compute=2000, r0=0.3)
    assert fit.n == 6 and fit.dof == 3
    fc = forecast(fit, 4000.0, seed=0, progress=False, n=200)
    assert "residual sd" in fc.note and "outside the calibration runs'" in fc.note
    assert "rlcurves.calibrate" in fc.note
    assert "fitted on 6 evaluations, fewer than any calibration forecast (7)" in fc.note
    assert "evaluate more often" in fc.note
    # the interval does not collapse with the noise: the misspecification is in reward units
    tau = default_calibration().tau
    assert fc.upper - fc.lower > 2 * tau * np.sqrt(np.log(4000.0 / 2000.0))


def test_regression_forecast_level_given_as_text(half_budget_fit):
    # level='x' was a TypeError from a comparison inside the bootstrap
    with pytest.raises(RLCurvesError, match=r"level= must be in \(0, 1\).*got 'x'"):
        forecast(half_budget_fit, 16000, level="x")


def test_regression_forecast_of_something_not_a_fit():
    # forecast(df, at) and forecast(None, at) were AttributeErrors ('no attribute predict')
    import pandas as pd

    frame = pd.DataFrame({"compute": [1.0, 2.0], "reward": [0.1, 0.2]})
    for fit in (None, frame):
        with pytest.raises(RLCurvesError, match=r"fit= must be a fit from rlcurves\.fit_sigmoid"):
            forecast(fit, 16000)
