"""rlcurves.paired_differences: seeds paired by name between two recipes (issue 19)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlcurves import RLCurvesError, fit_runs, paired_differences, shared_compute, sigmoid

COMPUTE = np.geomspace(10, 10_000, 30)


def recipe_runs(rng, seed_effects, delta_a, noise=0.004):
    """One long frame of runs s0.. whose ceilings are 0.6 + delta_a + that seed's effect."""
    frames = []
    for i, effect in enumerate(seed_effects):
        clean = sigmoid(COMPUTE, A=0.6 + delta_a + effect, B=1.5, C_mid=500.0, R0=0.1)
        reward = clean + rng.normal(0, noise, COMPUTE.size)
        frames.append(pd.DataFrame({"compute": COMPUTE, "reward": reward, "run": f"s{i}"}))
    return pd.concat(frames, ignore_index=True)


def test_paired_seeds_cancel_the_shared_seed_effect():
    """Seed effects of +-0.05 common to both recipes and a true dA of 0.03: the pooled fits'
    run-level intervals overlap, the paired interval holds 0.03 and excludes 0."""
    rng = np.random.default_rng(0)
    effects = [-0.05, 0.0, 0.05]
    base = fit_runs(recipe_runs(rng, effects, 0.0), n_boot=200, seed=0)
    variant = fit_runs(recipe_runs(rng, effects, 0.03), n_boot=200, seed=0)
    ci_b = base.ci().set_index("parameter").loc["A"]
    ci_v = variant.ci().set_index("parameter").loc["A"]
    assert ci_v["lower"] < ci_b["upper"]  # unpaired: not separated
    row = paired_differences(base, variant).set_index("parameter").loc["A"]
    assert row["pairs"] == 3 and set(row["per_pair"]) == {"s0", "s1", "s2"}
    assert 0 < row["lower"] < 0.03 < row["upper"]
    assert abs(row["mean"] - 0.03) < 0.01
    log_b = paired_differences(base, variant).set_index("parameter").loc["log_B"]
    assert log_b["lower"] < 0 < log_b["upper"]  # same B


def test_paired_interval_covers_at_its_level():
    """90% t interval over 3 pairs: coverage of the true dA over 120 replicates (binomial sd
    0.027 at 0.9; a z interval would cover ~0.75, an interval ignoring the seed spread less)."""
    rng = np.random.default_rng(1)
    hits = 0
    reps = 120
    for _ in range(reps):
        effects = rng.normal(0, 0.03, 3)
        base = fit_runs(recipe_runs(rng, effects, 0.0, noise=0.01), n_boot=20, seed=0)
        shifted = effects + rng.normal(0, 0.01, 3)
        variant = fit_runs(recipe_runs(rng, shifted, 0.02, noise=0.01), n_boot=20, seed=0)
        row = paired_differences(base, variant).set_index("parameter").loc["A"]
        hits += row["lower"] <= 0.02 <= row["upper"]
    assert 0.82 <= hits / reps <= 0.97


def test_paired_differences_refuses_unpaired_runs():
    rng = np.random.default_rng(2)
    base = fit_runs(recipe_runs(rng, [0, 0.01], 0.0), n_boot=20, seed=0)
    other = recipe_runs(rng, [0, 0.01], 0.0).replace({"run": {"s0": "a", "s1": "b"}})
    with pytest.raises(RLCurvesError, match="no run in common"):
        paired_differences(base, fit_runs(other, n_boot=20, seed=0))
    with pytest.raises(RLCurvesError, match="per_run=True"):
        paired_differences(base, fit_runs(other, n_boot=20, seed=0, per_run=False))


def test_shared_compute_is_the_shortest_runs_reach():
    short = pd.DataFrame({"compute": [0, 10, 20, 0, 10, 30], "run": list("aaabbb")})
    long = pd.DataFrame({"g": [0, 50, 0, 45], "seed": list("xxyy")})
    assert shared_compute(short) == 20
    assert shared_compute(long, compute="g", run="seed") == 45
    assert shared_compute(short, short.assign(compute=short["compute"] * 3)) == 20
    with pytest.raises(RLCurvesError, match=r"no column 'run'.*pass compute= / run="):
        shared_compute(long, compute="g")
    with pytest.raises(RLCurvesError, match="at least one table"):
        shared_compute()
