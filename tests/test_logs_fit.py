"""End to end: a fit from every format's log matches the fit from the equivalent CSV.

The fixtures encode the same run (see tests/data/logs/README.md). Where a format stores the
reward exactly (text, JSON, float64 Parquet) the curve read is bit-identical to the reference, so
the fits must agree to rounding (rtol 1e-9). TensorBoard stores scalars as float32 (reward
rounded by up to 3e-8): a perturbation that small moves the parameters by about 1e-7 relative,
so rtol 1e-5 there still fails on any real difference (a dropped point moves them by 3.5e-3
or more, see the last test).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlcurves import fit_sigmoid
from rlcurves.logs import read_log, read_logs

DATA = Path(__file__).parent / "data" / "logs"
PARAMS = ("A", "B", "C_mid", "R0")


@pytest.fixture(scope="module")
def reference_fit():
    ref = pd.read_csv(DATA / "reference.csv")
    return fit_sigmoid(ref["gpu_hours"], ref["val_reward"])


def params(fit) -> np.ndarray:
    return np.array([getattr(fit, name) for name in PARAMS])


def test_reference_fit_recovers_the_generating_curve(reference_fit):
    # The fixtures were drawn from A=0.7, B=1.5, C_mid=12, R0=0.1 with noise sd 0.01 on 20
    # points: the fit lands near those values, so the comparisons below compare real fits.
    assert reference_fit.converged
    np.testing.assert_allclose(params(reference_fit), [0.7, 1.5, 12.0, 0.1], rtol=0.15)


FORMATS = [
    ("csv/run_a.csv", {}, 1e-9),
    ("tsv/run_a.tsv", {}, 1e-9),
    ("parquet/run_a.parquet", {}, 1e-9),
    ("jsonl/run_a.jsonl", {}, 1e-9),
    ("verl/gsm8k_grpo.jsonl", {"gpus": 8}, 1e-9),
    ("wandb/history.json", {"gpus": 8}, 1e-9),
    ("wandb/history_export.csv", {"gpus": 8}, 1e-9),
    ("tensorboard/grpo_run", {"gpu_hours_per_step": 0.2}, 1e-5),
    ("tensorboard/grpo_run", {"gpus": 8}, 1e-5),
    ("trl/qwen-grpo", {"gpu_hours_per_step": 0.2}, 1e-9),
    ("pipelinerl/exp_math", {"gpus": 8}, 1e-9),
    ("recipe/cispo_small", {}, 1e-9),
]


@pytest.mark.parametrize(
    ("path", "kwargs", "rtol"), FORMATS, ids=[f"{f[0]}-{sorted(f[1])}" for f in FORMATS]
)
def test_fit_from_each_format_matches_the_csv_fit(reference_fit, path, kwargs, rtol):
    df = read_log(DATA / path, **kwargs)
    fit = fit_sigmoid("compute", "reward", data=df)
    np.testing.assert_allclose(params(fit), params(reference_fit), rtol=rtol)


def test_fit_per_run_from_a_wandb_panel_export(reference_fit):
    df = read_log(DATA / "wandb" / "panel_eval_reward.csv", gpu_hours_per_step=0.2)
    fit_a = fit_sigmoid("compute", "reward", data=df[df["run"] == "run-a"])
    np.testing.assert_allclose(params(fit_a), params(reference_fit), rtol=1e-9)


def test_fits_per_run_from_read_logs(reference_fit):
    df = read_logs([DATA / "recipe" / "cispo_small", DATA / "pipelinerl" / "exp_math"], gpus=8)
    for run, rows in df.groupby("run"):
        fit = fit_sigmoid("compute", "reward", data=rows)
        np.testing.assert_allclose(params(fit), params(reference_fit), rtol=1e-9, err_msg=run)


def test_the_tolerance_would_catch_a_dropped_or_stale_point(reference_fit):
    # Guard that the comparisons above can fail: dropping any one of the 20 points, or keeping
    # verl's stale first write of step 110 (0.3 low), moves some parameter by far more than
    # the 1e-5 relative tolerance (measured: at least 3.5e-3 for a dropped point).
    ref = pd.read_csv(DATA / "reference.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some of these deliberately damaged fits are poor
        for i in range(len(ref)):
            rows = ref.drop(index=i)
            fit = fit_sigmoid(rows["gpu_hours"], rows["val_reward"])
            assert np.max(np.abs(params(fit) / params(reference_fit) - 1)) > 1e-3, i
        stale = ref.copy()
        stale.loc[stale["step"] == 110, "val_reward"] -= 0.3
        fit = fit_sigmoid(stale["gpu_hours"], stale["val_reward"])
    assert np.max(np.abs(params(fit) / params(reference_fit) - 1)) > 1e-3
