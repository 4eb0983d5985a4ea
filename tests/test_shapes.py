"""rlcurves.shapes and the prior predictive: forecasts of runs whose own data leave the curve
open (a few evaluations, a run that has not taken off)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import rlcurves
from rlcurves import sigmoid
from rlcurves.shapes import headroom_gain, late_takeoffs, shape_records, took_off


def test_shape_records_hold_the_level_reached_and_the_level_at_the_end():
    c = np.arange(0.0, 101.0)
    late = np.where(c < 60, 0.1, 0.1 + 0.5 * (c - 60) / 40)  # flat, then a late climb to 0.6
    frame = pd.DataFrame({"compute": c, "reward": late})
    rec = shape_records({"late": frame}, family="toy").set_index("fraction")
    assert rec.loc[0.5, "reached"] == pytest.approx(0.1) and rec.loc[0.5, "final"] > 0.5
    assert not rec.loc[0.5, "taken_off"] and rec.loc[0.8, "taken_off"]
    assert headroom_gain(0.1, rec.loc[0.5, "final"]) == pytest.approx(
        (rec.loc[0.5, "final"] - 0.1) / 0.9
    )
    rows = late_takeoffs(rec.reset_index(), fractions=(0.5,))
    assert rows[0]["flat"] == 1 and rows[0]["bloomed"] == 1  # flat at half, took off after
    assert not took_off(np.full(10, 0.3), 0.3) and took_off(np.linspace(0, 0.5, 10), 0.5)


def test_no_forecast_from_four_evaluations_is_refused():
    """Four evaluations, four parameters: the fit cannot estimate the noise, and used to return
    the metric's whole range, flagged unbounded. Now the forecast is the corpus's prior
    predictive from the level the run has reached: one predictive distribution, its interval
    inside [0, 1] and above the level's lowest plausible value, its note saying why."""
    c = np.array([0.0, 100.0, 200.0, 300.0])
    y = np.array([0.20, 0.26, 0.31, 0.35])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = rlcurves.fit_sigmoid(c, y)
    fc = rlcurves.forecast(fit, 3000.0, seed=0, progress=False)
    assert not fc.unbounded and fc.predictive is not None and fc.info["prior"]
    assert 0.0 < fc.lower < fc.upper < 1.0 and fc.upper - fc.lower < 0.9
    assert "prior predictive" in fc.note and "4 evaluations" in fc.note
    # the draws are the reached level plus a share of the headroom: the lower side is anchored
    # on what the run has reached, less the declines the corpus shows
    assert fc.lower > 0.33 - 0.15


def _sweep(rng, bloom: bool, n_eval: int = 40):
    """Four runs of one budget (1,000), evaluated every 25: three that take off early (C_mid
    150-200, ceilings 0.50-0.58) and one flat at 0.10 through the first 40% of the budget which,
    when it blooms, climbs to 0.70 (C_mid 600) and wins; else stays flat. Noise sd 0.01."""
    c = np.linspace(25.0, 1000.0, n_eval)
    runs = {}
    for i, (a, m) in enumerate(((0.50, 150.0), (0.54, 180.0), (0.58, 200.0))):
        runs[f"early{i}"] = sigmoid(c, a, 2.5, m, 0.1) + rng.normal(0, 0.01, c.size)
    top = 0.70 if bloom else 0.12
    runs["flat"] = sigmoid(c, top, 6.0, 600.0, 0.1) + rng.normal(0, 0.01, c.size)
    return c, runs
