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
    assert "recipe_loo_scalerl" in names and len(names) >= 5
    for name in names:
        df = datasets.load_example(name)
        assert df.attrs["group"] == "recipe_loo" and not df.attrs["simulated"]
        # same config and the same budget in steps (compute differs with machine load)
        assert df["step"].max() == 600
