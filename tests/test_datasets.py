"""Bundled examples: every name loads in read_log's canonical form and says what it is."""

import warnings

import numpy as np
import pytest

from rlcurves import RLCurvesError, datasets, fit_sigmoid


@pytest.mark.parametrize("name", datasets.list_examples())
def test_every_example_loads_canonically(name):
    df = datasets.load_example(name)
    assert {"compute", "reward"} <= set(df.columns)
    assert np.all(np.diff(df["compute"].to_numpy()) > 0) and df["reward"].between(0, 1).all()
    assert df.attrs["simulated"] == name.startswith("simulated")
    assert ("SIMULATED" in df.attrs["description"]) == df.attrs["simulated"]


@pytest.mark.parametrize("name", ["recipe_cpu_demo_seed0", "recipe_cpu_demo_seed1"])
def test_real_trainer_runs_learn_and_fit(name):
    df = datasets.load_example(name)
    reward = df["reward"].to_numpy()
    # RL moved the pass rate well beyond evaluation noise (500 prompts x 4 samples: sd ~ 0.01)
    assert reward[-8:].mean() - reward[:2].mean() > 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid("compute", "reward", data=df)
    assert fit.converged and fit.R0 < fit.A < 1


def test_unknown_example_lists_the_names():
    with pytest.raises(RLCurvesError, match="simulated_scalerl_8b"):
        datasets.load_example("nope")


def test_leave_one_out_family_is_complete_and_comparable():
    names = datasets.list_examples(group="recipe_loo")
    # every ScaleRL choice the issue lists, reverted once, plus the batch pair and the two pairs
    # with their own baseline
    for part in ("scalerl", "dapo", "aggregation", "adv_norm", "zero_variance", "ppo_off_policy",
                 "pipeline_rl", "batch_16", "batch_64", "bf16", "bf16_no_fp32_head",
                 "pool_2000", "pool_2000_no_positive"):  # fmt: skip
        assert f"recipe_loo_{part}" in names
    for name in names:
        df = datasets.load_example(name)
        assert df.attrs["group"] == "recipe_loo" and not df.attrs["simulated"]
        # same config and the same budget in steps (compute differs with machine load)
        assert df["step"].max() == 600
        assert df["step"].iloc[0] == 0 and df["compute"].is_monotonic_increasing


def test_token_axis_keeps_the_start_and_removes_the_clock_noise():
    """The two inert leave-one-out runs repeat the recipe's evaluations exactly; only their
    wall-clock differs. On the generated-token axis their fits must agree to rounding, and the
    step-0 evaluation (tokens_total 0, not logged) must not be dropped."""
    names = ["recipe_loo_scalerl", "recipe_loo_fp32_head", "recipe_loo_no_positive"]
    wall = [datasets.load_example(n) for n in names]
    tokens = [datasets.load_example(n, compute="tokens_total") for n in names]
    for df in tokens:
        assert df.attrs["compute_unit"] == "tokens_total (as logged)"
        assert len(df) == 25 and df["compute"].iloc[0] == 0
        assert any("set to 0" in note for note in df.attrs["notes"])  # the fill is on record
        np.testing.assert_array_equal(df["reward"], tokens[0]["reward"])
        np.testing.assert_array_equal(df["compute"], tokens[0]["compute"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a_tokens = [fit_sigmoid("compute", "reward", data=df).A for df in tokens]
        a_wall = [fit_sigmoid("compute", "reward", data=df).A for df in wall]
    assert np.ptp(a_tokens) < 1e-9
    assert np.ptp(a_wall) > 0.01  # the clocks alone move the wall-clock fits
    with pytest.raises(RLCurvesError, match="tokens_total"):
        datasets.load_example("recipe_loo_scalerl", compute="no_such_column")
    with pytest.raises(RLCurvesError, match="gpu_hours"):
        datasets.load_example("simulated_scalerl_8b", compute="no_such_column")
