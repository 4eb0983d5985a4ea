"""Regression tests named after the bugs they pin."""

import warnings

import numpy as np

from rlcurves import backtest, fit_sigmoid, sigmoid
from rlcurves._samples import parameter_samples


def test_calibrated_parameter_draws_respect_pass_rate_bounds():
    # bug: inflated bootstrap draws of A went above 1 (2% of draws, A_upper 1.065 in compare)
    c = np.arange(400, 20001, 400.0)
    r = sigmoid(c, 0.645, 1.7, 10909, 0.3) + np.random.default_rng(1).normal(0, 0.01, c.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, r, min_compute=1500)
        draws = parameter_samples(fit, 400, seed=0)
    assert draws["A"].between(0, 1).all() and draws["R0"].between(0, 1).all()


def test_backtest_notes_an_unidentified_converged_prefix():
    # bug: a prefix whose fit converged with A on its bound and every parameter poorly identified
    # got an empty note, so the backtest table showed its forecast without a caveat
    from rlcurves.datasets import load_example

    df = load_example("simulated_scalerl_8b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = backtest(
            "compute", "reward", data=df, fractions=(0.25,), min_compute=1500, progress=False
        )
        early = fit_sigmoid("compute", "reward", data=df, min_compute=1500, max_compute=4000)
    note = bt.table["note"].iloc[0]
    assert (note != "") == (not early.message.startswith("converged:"))


def test_demo_compares_only_runs_of_the_same_family(tmp_path, capsys):
    # bug: `rlcurves demo` fitted every bundled example with the simulated run's 1.5k GPU-hour
    # window, and the real CPU runs (0.4 GPU-hours in all) had no point left in it
    from rlcurves.cli import main

    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert "recipe_cpu_demo" not in capsys.readouterr().out


def test_real_run_demo_has_no_overflow_warning(tmp_path, capsys):
    # bug: a wild Gauss-Newton polish step overflowed exp() (a RuntimeWarning, an error under the
    # suite's filterwarnings) while comparing the two real CPU runs
    from rlcurves.cli import main

    args = ["demo", "--example", "recipe_cpu_demo_seed0", "--min-compute", "0"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert "[[Comparison]] baseline recipe_cpu_demo_seed0" in capsys.readouterr().out


def test_bootstrap_of_runs_without_an_s_curve_does_not_overflow():
    """Resamples of runs that never rose (PPO-off-policy-8, PipelineRL-8, batch 16 on the bundled
    token axis) fit ever sharper steps: the warm solver and the polish sent log B past 709 and
    exp overflowed (RuntimeWarning, an error in this suite). Steps now stay in the search box."""
    import warnings

    from rlcurves import IdentifiabilityWarning, compare, fit_sigmoid
    from rlcurves.datasets import load_example

    fits = {}
    for name in ("scalerl", "ppo_off_policy", "pipeline_rl", "batch_16", "aggregation"):
        df = load_example(f"recipe_loo_{name}", compute="tokens_total")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdentifiabilityWarning)
            fits[name] = fit_sigmoid("compute", "reward", data=df)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cmp = compare(fits, baseline="scalerl", n_samples=400, seed=0)
    for name, draws in cmp.samples.items():
        assert np.isfinite(draws[["A", "B", "C_mid", "R0"]].to_numpy()).all(), name


def test_zero_width_forecast_from_four_points_and_four_parameters():
    # issue 12: a 4-point fit of 4 parameters came back with intervals of width 0
    from rlcurves import fit_sigmoid, forecast, sigmoid

    c = np.array([250.0, 500.0, 1000.0, 2000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, sigmoid(c, 0.62, 1.1, 700.0, 0.4))
    fc = forecast(fit, 4000.0, progress=False, seed=0)  # issue 42: the corpus's prior
    assert not fc.unbounded and fc.info["prior"] and fc.upper - fc.lower > 0.05
    raw = forecast(fit, 4000.0, progress=False, seed=0, kind="residual")
    assert raw.unbounded and raw.upper - raw.lower == 1.0 and "at least 7 points" in raw.note


def test_a_corpus_run_that_sags_is_reported_as_peaked():
    # issue 12: real runs rise, flatten and sag; the fit must say its ceiling is not supported
    from rlcurves import fit_sigmoid, forecast
    from rlcurves.calibrate import load_corpus

    run = load_corpus("gsm8k")["Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-p1-b8-gamma2.0-lam2.0-01161659"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(run["compute"], run["reward"])
    assert fit.peak.startswith("this run peaked at 0.657 near 1,895")
    assert "not supported by the latest evaluations" in fit.message
    assert "peaked" in fit.summary()
    fc = forecast(fit, 6000.0, progress=False, seed=0, n=200)
    assert "peaked" in fc.note and "peaked" in repr(fc)


def test_a_simulated_rise_and_fall_is_reported_as_peaked_and_a_clean_rise_is_not():
    from rlcurves import fit_sigmoid, sigmoid

    rng = np.random.default_rng(12)
    c = np.linspace(0, 5000, 101)
    rise = sigmoid(c, 0.7, 1.8, 1200.0, 0.3)
    fall = rise - 0.06 * np.clip((c - 3000) / 2000, 0, None)  # sags by 0.06 over the last 40%
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sagging = fit_sigmoid(c, fall + rng.normal(0, 0.008, c.size))
        assert "this run peaked at" in sagging.peak and "peaked" in sagging.message
        # no false alarm on 50 clean sigmoid runs with the same noise (3-se threshold)
        alarms = [bool(fit_sigmoid(c, rise + rng.normal(0, 0.008, c.size)).peak) for _ in range(50)]
    assert sum(alarms) <= 2


def test_isolated_bad_evaluations_pull_least_squares_but_not_the_robust_loss():
    # issue 12 (robust loss): three crashed evaluations (0.15 low) in a 73-point window drag the
    # least-squares ceiling and shape; soft-L1 and Huber keep them near the clean fit, and on clean
    # data they agree with least squares (benchmarks/robust_loss.py measures it on 200 runs)
    import pytest

    from rlcurves import RLCurvesError

    rng = np.random.default_rng(0)
    c = np.linspace(0, 16000, 81)
    y = sigmoid(c, 0.61, 1.92, 2542.0, 0.3) + rng.normal(0, 0.008, c.size)
    bad = y.copy()
    bad[[40, 50, 60]] -= 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clean = fit_sigmoid(c, y, min_compute=1500)
        ls = fit_sigmoid(c, bad, min_compute=1500)
        for loss in ("soft_l1", "huber"):
            robust = fit_sigmoid(c, bad, min_compute=1500, loss=loss)
            assert abs(robust.C_mid - clean.C_mid) < abs(ls.C_mid - clean.C_mid) / 5
            assert abs(robust.B - clean.B) < 0.1 < abs(ls.B - clean.B)
            assert "3 of 73 points weighted below half" in robust.message
            same = fit_sigmoid(c, y, min_compute=1500, loss=loss)
            assert abs(same.A - clean.A) < 0.002
    with pytest.raises(RLCurvesError, match="loss must be"):
        fit_sigmoid(c, y, loss="l2")
