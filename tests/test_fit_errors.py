"""Bad input raises RLCurvesError (a ValueError) whose message says what is wrong and what to do."""

import numpy as np
import pandas as pd
import pytest

from rlcurves import RLCurvesError, fit_sigmoid, fit_sigmoid_batch, sigmoid

C = np.array([0, 100, 200, 400, 800, 1600, 3200.0])
R = np.array([0.1, 0.12, 0.2, 0.3, 0.45, 0.55, 0.6])


@pytest.mark.parametrize(
    "compute,reward,match",
    [
        (np.r_[C[:-1], np.nan], R, "compute has 1 NaN"),
        (C, np.r_[R[:-1], np.inf], "reward has 1 NaN or infinite"),
        (np.r_[-1.0, C[1:]], R, "compute must be >= 0"),
        (C[:-1], R, "different lengths"),
        (C, np.full(C.size, 0.4), "reward is constant"),
        (C[:3], R[:3], "fewer than the 4 parameters"),
        (["a"] * 7, R, "must be numbers"),
        (np.ones((2, 7)), np.ones((2, 7)), "one-dimensional"),
    ],
)
def test_bad_arrays(compute, reward, match):
    with pytest.raises(RLCurvesError, match=match):
        fit_sigmoid(compute, reward)


def test_is_a_value_error_with_details():
    with pytest.raises(ValueError) as info:
        fit_sigmoid(C, np.r_[R[:-1], np.nan])
    assert info.value.details["positions"] == [6]


def test_window_leaves_too_few_points():
    with pytest.raises(RLCurvesError, match="window"):
        fit_sigmoid(C, R, min_compute=1000)


def test_missing_column_lists_the_columns():
    df = pd.DataFrame({"gpu_hours": C, "pass_rate": R})
    with pytest.raises(RLCurvesError, match=r"'reward'.*gpu_hours.*pass_rate"):
        fit_sigmoid("gpu_hours", "reward", data=df)


def test_bad_options():
    with pytest.raises(RLCurvesError, match="unknown method"):
        fit_sigmoid(C, R, method="magic")
    with pytest.raises(RLCurvesError, match="bounds can be set for A and R0"):
        fit_sigmoid(C, R, bounds={"B": (0, 1)})
    with pytest.raises(RLCurvesError, match="sigma must be finite and > 0"):
        fit_sigmoid(C, R, sigma=np.zeros(C.size))
    with pytest.raises(RLCurvesError, match="r0= must be a finite"):
        fit_sigmoid(C, R, r0=float("nan"))
    with pytest.raises(RLCurvesError, match="r0= must be a finite number or None, got 'x'"):
        fit_sigmoid(C, R, r0="x")  # regression: float('x')'s bare ValueError


def test_batch_bad_shapes():
    with pytest.raises(RLCurvesError, match="every curve on the same compute points"):
        fit_sigmoid_batch(C, [R, R[:5]])  # ragged: numpy's inhomogeneous-shape ValueError before
    with pytest.raises(RLCurvesError, match="2-D"):
        fit_sigmoid_batch(C, R)
    with pytest.raises(RLCurvesError, match="does not match"):
        fit_sigmoid_batch(C[:-1], np.tile(R, (3, 1)))


def test_fit_kws_checked_against_fit_sigmoids_own_keywords():
    # Monitor and Race check fit_kws= when built against this list: it must stay fit_sigmoid's
    import inspect

    from rlcurves._data import FIT_KEYWORDS

    params = set(inspect.signature(fit_sigmoid).parameters)
    assert set(FIT_KEYWORDS) == params - {"compute", "reward", "data", "label"}


@pytest.mark.parametrize("keyword", ["min_compute", "max_compute"])
def test_regression_fit_window_bound_text_or_nan_names_the_keyword(keyword):
    # min_compute='x' was numpy's UFuncTypeError; nan an empty window "[nan, inf]" that named
    # no bad value
    c = np.linspace(0, 100, 20)
    r = 0.1 + 0.5 * c / (c + 30)
    for bad in ("x", float("nan")):
        with pytest.raises(RLCurvesError, match=f"{keyword}= must be a compute value"):
            fit_sigmoid(c, r, **{keyword: bad})


def test_regression_compute_to_reach_a_nan_target_is_an_error_not_a_quiet_nan():
    rng = np.random.default_rng(0)
    c = np.linspace(100, 5000, 30)
    fit = fit_sigmoid(c, sigmoid(c, 0.6, 2.0, 1500, 0.1) + rng.normal(0, 0.01, 30))
    for bad in (float("nan"), "x", [], [0.5, float("inf")]):
        with pytest.raises(RLCurvesError, match="reward= must be finite target reward"):
            fit.compute_to_reach(bad)
    with pytest.raises(RLCurvesError, match="reward= must be finite"):
        fit.compute_to_reach(float("nan"), level=0.9)
    assert np.isfinite(fit.compute_to_reach(0.5))
