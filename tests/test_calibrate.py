"""rlcurves.calibrate: the bundled corpus, conformal scores on finished runs, and forecast's use."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import rlcurves
from rlcurves import RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.calibrate import (
    CORPUS_NAME,
    Calibration,
    calibrate,
    default_calibration,
    load_corpus,
)


def test_corpus_is_the_twelve_distinct_verl_runs_with_their_source():
    runs = load_corpus("gsm8k")
    assert len(runs) == 12  # 9 sweep runs + 4 budget variants, one of which repeats a sweep run
    for name, frame in runs.items():
        assert list(frame.columns) == ["compute", "reward"]
        assert frame["compute"].is_monotonic_increasing and len(frame) > 300
        assert frame["reward"].between(0, 1).all()
        assert frame.attrs["source"].startswith("rlcurves/data/curves/deepgrpo_gsm8k")
        assert frame.attrs["family"] == "gsm8k"
        assert "Qwen2.5-0.5B" in name
    from importlib import resources

    with (
        resources.files("rlcurves.data")
        .joinpath("curves", "deepgrpo_gsm8k_sweeps.csv")
        .open() as fh
    ):
        assert "github.com/befocuss/Deep-GRPO at commit 8e7df46e" in fh.readline()


def test_math_family_is_the_seventeen_grpo_runs_with_their_source():
    runs = load_corpus("math")
    assert len(runs) == 17
    sizes = sorted(len(f) for f in runs.values())
    assert sizes[0] == 21 and sizes[-1] == 41  # the 400-step run is evaluated every 20 steps
    for frame in runs.values():
        assert frame["compute"].is_monotonic_increasing and frame["compute"].iloc[0] == 0
        assert frame["reward"].between(0, 1).all() and frame.attrs["family"] == "math"
    assert "no_baseline_lr4e-5" in runs  # the run that peaks and sags is kept, not filtered
    from importlib import resources

    with (
        resources.files("rlcurves.data")
        .joinpath("curves", "cs336_grpo_math_qwen25math15b.csv")
        .open() as fh
    ):
        head = fh.readline()
    assert "ShibukiZero/assignment5-alignment" in head and "1493450f" in head
    assert set(load_corpus()) == set(runs) | set(load_corpus("gsm8k"))
    with pytest.raises(RLCurvesError, match="family"):
        load_corpus("code")


def _records(errors_by_run, distance=0.0):
    """Records whose variance is exactly 1 (fit_var 1, nothing else, no distance): the scores
    are then the absolute errors, whatever tau is."""
    rows = [
        {"run": run, "fraction": 0.5, "error": e, "error_one": e, "fit_var": 1.0, "mix_var": 0.0,
         "noise_var": 0.0, "noise_var_one": 0.0, "distance": distance, "noise_sd": 0.01,
         "n_fit": 20, "w_power_law": 0.0, "forecast": 0.5, "observed": 0.5 + e}
        for run, errs in errors_by_run.items()
        for e in errs
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_runs_are_the_units_of_the_conformal_quantile():
    # 3 runs, each weighs 1/(3 + 1) spread over its scores: run a's two scores 1/8 each, b's one
    # 1/4, c's three 1/12 each. Pooled CDF: 1 -> .125, 2 -> .25, 3 -> .5, 4 -> .583, 5 -> .667,
    # 6 -> .75 = n / (n + 1), the highest level 3 runs support.
    cal = Calibration(_records({"a": [1.0, -2.0], "b": [3.0], "c": [-4.0, 5.0, 6.0]}), "toy")
    assert cal.n == 3 and cal.n_runs == 3 and cal.n_scores == 6
    np.testing.assert_allclose(np.sort(cal.scores), [1, 2, 3, 4, 5, 6])
    assert cal.max_level == pytest.approx(0.75)
    assert cal.quantile(0.5) == pytest.approx(3.0)
    assert cal.quantile(0.75) == pytest.approx(6.0)
    assert cal.quantile(0.375) == pytest.approx(2.5)  # halfway between 2 (.25) and 3 (.5)
    assert math.isinf(cal.quantile(0.8))
    # a run with many scores does not count as many runs: 100 more scores of run c leave the
    # supported level at 3 / 4
    many = Calibration(_records({"a": [1.0], "b": [3.0], "c": list(np.linspace(4, 9, 101))}), "t")
    assert many.n == 3 and many.max_level == pytest.approx(0.75)
    assert math.isinf(many.quantile(0.9))  # 90% needs 9 runs, not 103 scores
    assert cal.without("c").n == 2 and cal.subset(["a", "b"]).n == 2
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert back.quantile(0.5) == pytest.approx(3.0) and back.corpus == "toy"
    assert "3 runs (6 forecasts)" in cal.name
    with pytest.raises(RLCurvesError, match="level"):
        cal.quantile(1.2)
    # the draws of Z: symmetric, their central interval at every supported level the multiplier
    z = cal.z_values(4000)
    for level in (0.25, 0.5, 0.7):
        lo, hi = np.quantile(z, [(1 - level) / 2, (1 + level) / 2])
        assert hi == pytest.approx(cal.quantile(level), rel=0.01) and lo == pytest.approx(-hi)


def test_tau_is_the_misspecification_in_reward_units():
    # errors t_5-distributed with scale 0.03 at distance 1, the other parts of the variance ~0:
    # the fitted tau is ~0.03 (reward units; 200 errors put its sd near 6%), whatever the runs'
    # noise level
    rng = np.random.default_rng(0)
    errs = {f"r{i}": list(0.03 * rng.standard_t(5, 5)) for i in range(40)}
    rec = _records(errs, distance=1.0)
    rec["fit_var"] = 1e-10
    for noise_sd in (0.001, 0.05):
        rec["noise_sd"] = noise_sd
        assert Calibration(rec, "toy").tau == pytest.approx(0.03, rel=0.15)


@pytest.mark.slow
def test_shipped_calibration_is_reproduced_by_calibrate_on_the_corpus():
    # ~1-2 minutes on 2 cores: 29 runs x 7 fractions, each a fit, a 200-draw bootstrap and the
    # self-backtests of the model average
    shipped = default_calibration()
    assert shipped.corpus == CORPUS_NAME and shipped.n == 29
    again = rlcurves.calibrate(load_corpus(), name=CORPUS_NAME, progress=False, seed=0)
    # (atol 1e-4: solver builds may differ in the last digits; a stale file differs by far more)
    np.testing.assert_allclose(again.records["error"], shipped.records["error"], atol=1e-4)
    assert again.tau == pytest.approx(shipped.tau, rel=1e-2)
    # the multipliers grow with the level, finite up to n / (n + 1) = 96.7% with 29 runs
    qs = [shipped.quantile(lv) for lv in (0.5, 0.8, 0.9, 0.95)]
    assert np.all(np.diff(qs) > 0) and np.isfinite(qs[-1])
    assert math.isinf(shipped.quantile(0.97))


def _toy_runs(rng, n_runs=6):
    runs = {}
    for i in range(n_runs):
        c = np.linspace(0, 4000, 60)
        y = sigmoid(c, 0.6 + 0.01 * i, 1.5, 900.0, 0.3) + rng.normal(0, 0.01, c.size)
        runs[f"run{i}"] = pd.DataFrame({"compute": c, "reward": y})
    return runs


def test_calibrate_accepts_a_long_frame_and_forecast_uses_it():
    rng = np.random.default_rng(3)
    runs = _toy_runs(rng)
    long = pd.concat([f.assign(seed=k) for k, f in runs.items()], ignore_index=True)
    cal = calibrate(long, run="seed", progress=False, name="my sweep")
    same = calibrate(runs, progress=False, name="my sweep")
    np.testing.assert_allclose(cal.scores, same.scores)
    assert cal.n == 6 and cal.n_scores == 42 and "my sweep" in repr(cal)
    c, y = runs["run0"]["compute"].to_numpy(), runs["run0"]["reward"].to_numpy()
    fit = fit_sigmoid(c[c <= 2000], y[c <= 2000])
    fc = rlcurves.forecast(fit, 4000.0, calibration=cal, seed=0, progress=False, n=200)
    # 6 runs support levels up to 6/7: a 90% interval is unbounded, and says why
    assert fc.calibration.startswith("my sweep") and fc.calibration_n == 6
    assert fc.unbounded and "needs at least 9 calibration runs" in fc.note
    fc = rlcurves.forecast(fit, 4000.0, calibration=cal, seed=0, progress=False, n=200, level=0.8)
    assert not fc.unbounded and fc.info["multiplier"] == cal.quantile(0.8)
    # backtest passes it through to every prefix's forecast
    bt = rlcurves.backtest(
        c, y, fractions=(0.5,), calibration=cal, n_samples=200, progress=False, level=0.8
    )
    again = rlcurves.forecast(
        bt.fits[0.5], c.max(), calibration=cal, seed=0, progress=False, n=200, level=0.8
    )
    assert bt.table["forecast_upper"].iloc[0] == pytest.approx(again.upper)
    with pytest.raises(RLCurvesError, match="lacks columns"):
        calibrate(long, progress=False)
    with pytest.raises(RLCurvesError, match="at least 2"):
        calibrate({"one": runs["run0"]}, progress=False)


def test_scale_grows_with_distance_past_the_fit_window():
    rng = np.random.default_rng(4)
    c = np.linspace(0, 4000, 60)
    y = sigmoid(c, 0.6, 1.5, 900.0, 0.3) + rng.normal(0, 0.01, c.size)
    fit = fit_sigmoid(c[c <= 2000], y[c <= 2000])
    fc = rlcurves.forecast(fit, [1500.0, 2000.0, 4000.0, 16000.0], seed=0, progress=False, n=200)
    width = fc.upper - fc.lower
    assert width[0] == pytest.approx(width[1], rel=0.3)  # inside the window: no distance term
    assert width[1] < width[2] < width[3]


def _calibration_and_sweep():
    """A calibration of 40 runs that wander with tau 0.03 and a sweep of 30 runs that wander
    with 0.01 (4 Student-t records each at distance 1, no other variance), fixed seed."""
    rng = np.random.default_rng(1)

    def toy(scale, n_runs, prefix):
        rec = _records(
            {f"{prefix}{i}": list(scale * rng.standard_t(5, 4)) for i in range(n_runs)},
            distance=1.0,
        )
        rec["fit_var"] = 1e-10
        return rec

    return Calibration(toy(0.03, 40, "c"), "toy"), toy(0.01, 30, "s")


def test_tau_with_refits_tau_on_a_sweeps_own_records():
    """A calibration whose runs wander with tau 0.03 and a sweep whose runs wander with 0.01:
    refitted on the sweep's 30 runs with the calibration counting as one run, tau is near the
    sweep's (a 1/31 weight cannot pull it far); counting as 1,000 runs, near the calibration's;
    with no records it is the calibration's."""
    cal, sweep = _calibration_and_sweep()
    assert cal.tau == pytest.approx(0.03, rel=0.15)
    assert cal.tau_with(sweep, prior_runs=1.0) == pytest.approx(0.01, rel=0.2)
    assert cal.tau_with(sweep, prior_runs=1000.0) == pytest.approx(cal.tau, rel=0.1)
    assert cal.tau_with(sweep.iloc[:0]) == cal.tau
    assert cal.tau_with(None) == cal.tau
    with pytest.raises(RLCurvesError, match="prior_runs"):
        cal.tau_with(sweep, prior_runs=0)


def test_tau_with_weighs_a_vague_prior_lightly():
    """The log-normal prior behind tau_with (TAU_PRIOR_LOG_SD, centred on the calibration's
    tau) is what fit_tau's ``prior=`` adds: with it, the 30-run sweep's tau of the test above
    moves by less than 2% (the backtests decide); a tight prior (log-sd 0.05) holds tau at its
    centre."""
    from rlcurves.calibrate import TAU_PRIOR_LOG_SD, _run_weights, fit_tau

    cal, sweep = _calibration_and_sweep()
    both = pd.concat([cal.records, sweep], ignore_index=True)
    weight = np.r_[_run_weights(cal.records, 1.0), _run_weights(sweep)]
    ml = fit_tau(both, weight=weight)
    assert cal.tau_with(sweep) == pytest.approx(ml, rel=0.02)
    assert fit_tau(both, weight=weight, prior=(cal.tau, TAU_PRIOR_LOG_SD)) == cal.tau_with(sweep)
    assert fit_tau(both, weight=weight, prior=(0.05, 0.05)) == pytest.approx(0.05, rel=0.1)
    with pytest.raises(RLCurvesError, match="prior"):
        fit_tau(both, prior=(0.0, 1.0))


def test_window_records_backtest_a_running_run_within_its_window():
    """A run at 40% of its compute, fitted on the first 50% and 70% of what it has seen, each
    forecast scored on its level now: one record per split, its distance about ln(1 / split)
    (measured to the middle of the level's window, the last 10% of the compute; the last point
    fitted may fall short of the split) and its observed value the level of that window; too
    few points for a fit: no records, the columns still there."""
    from rlcurves.calibrate import WINDOW_SPLITS, level_target, window_records

    run = next(iter(load_corpus("gsm8k").values()))
    part = run[run["compute"] <= 0.4 * run["compute"].max()]
    c, r = part["compute"].to_numpy(float), part["reward"].to_numpy(float)
    rec = window_records(c, r, "gsm8k-run")
    assert list(rec["fraction"]) == list(WINDOW_SPLITS) and set(rec["run"]) == {"gsm8k-run"}
    for split, d in zip(rec["fraction"], rec["distance"], strict=True):
        assert math.log(0.9 / split) <= d <= math.log(1 / split) + 0.15
    assert np.allclose(rec["observed"], level_target(c, r))
    assert np.allclose(rec["error"], rec["observed"] - rec["forecast"])
    empty = window_records(c[:5], r[:5], "short")
    assert empty.empty and "distance" in empty.columns
