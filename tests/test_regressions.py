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
