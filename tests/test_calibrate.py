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


def test_conformal_quantile_is_the_ceil_rank_and_infinite_when_too_few():
    cal = Calibration(np.arange(1.0, 20.0), np.repeat(["a", "b"], [10, 9]), "toy")
    assert cal.n == 19 and cal.n_runs == 2
    assert cal.quantile(0.9) == 18.0  # ceil(20 * 0.9) = 18th smallest of 1..19
    assert cal.quantile(0.5) == 10.0
    assert math.isinf(cal.quantile(0.99))  # ceil(20 * 0.99) = 20 > 19 scores
    assert cal.without("a").n == 9
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert back.quantile(0.9) == 18.0 and back.corpus == "toy"
    with pytest.raises(RLCurvesError, match="level"):
        cal.quantile(1.2)


def test_shipped_calibration_is_reproduced_by_calibrate_on_the_corpus():
    shipped = default_calibration()
    assert shipped.corpus == CORPUS_NAME and shipped.n == 36 and shipped.n_runs == 12
    again = rlcurves.calibrate(load_corpus("gsm8k"), name=CORPUS_NAME, progress=False, seed=0)
    # (rtol 1e-3: solver builds may differ in the last digits; a stale file differs by far more)
    np.testing.assert_allclose(np.sort(again.scores), np.sort(shipped.scores), rtol=1e-3)
    # the multipliers grow with the level and are finite up to 95% with 36 scores
    qs = [shipped.quantile(lv) for lv in (0.5, 0.8, 0.9, 0.95)]
    assert np.all(np.diff(qs) > 0) and np.isfinite(qs[-1])


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
    assert cal.n == 18 and cal.n_runs == 6 and "my sweep" in repr(cal)
    c, y = runs["run0"]["compute"].to_numpy(), runs["run0"]["reward"].to_numpy()
    fit = fit_sigmoid(c[c <= 2000], y[c <= 2000])
    fc = rlcurves.forecast(fit, 4000.0, calibration=cal, seed=0, progress=False, n=200)
    assert fc.calibration.startswith("my sweep") and fc.calibration_n == 18
    assert fc.info["multiplier"] == cal.quantile(0.9)
    # backtest passes it through to every prefix's forecast
    bt = rlcurves.backtest(c, y, fractions=(0.5,), calibration=cal, n_samples=200, progress=False)
    again = rlcurves.forecast(bt.fits[0.5], c.max(), calibration=cal, seed=0, progress=False, n=200)
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
