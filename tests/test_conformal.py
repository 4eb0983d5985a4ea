"""rlcurves.conformal: run-level, per-tail, distance-local conformal quantiles."""

import math

import numpy as np
import pytest

from rlcurves import RLCurvesError
from rlcurves.conformal import (
    TailMap,
    cross_family_pvalues,
    local_weights,
    min_tail,
    quantile_function,
    tail_quantile,
)


def test_regression_the_conformal_quantile_is_the_step_not_an_interpolation():
    # 9 runs, one score each: F(k) = k / 10. The upper 25% tail needs F(s) >= 0.75: the score 8,
    # not 7.5 (the old quantile() interpolated between the scores around the level)
    scores, w = np.arange(1.0, 10.0), np.ones(9)
    assert tail_quantile(scores, w, 9, 0.25) == 8.0
    assert tail_quantile(scores, w, 9, 0.1) == 9.0
    # a 5% tail needs 1 / 0.05 - 1 = 19 runs: with 9 it is not supported
    assert math.isinf(tail_quantile(scores, w, 9, 0.05))
    assert min_tail(9) == pytest.approx(0.1) and min_tail(19) == pytest.approx(0.05)
    with pytest.raises(RLCurvesError, match="tail"):
        tail_quantile(scores, w, 9, 0.0)


def test_runs_are_the_units_and_each_weighs_one_near_the_distance():
    runs = np.array(["a", "a", "a", "b", "c", "c"])
    d = np.array([0.2, 0.7, 1.2, 0.7, 0.2, 1.5])
    w = local_weights(runs, d, 0.7, bandwidth=0.25)
    for r in "abc":
        assert w[runs == r].sum() == pytest.approx(1.0)
    # run a's record at the distance weighs most: a Gaussian kernel, 2 bandwidths away e^-2
    assert w[1] == pytest.approx(1 / (1 + 2 * math.exp(-2))) and w[0] == pytest.approx(w[2])
    assert w[4] > w[5]  # run c: 0.2 is nearer 0.7 than 1.5
    np.testing.assert_allclose(local_weights(runs, d, None), [1 / 3] * 3 + [1, 0.5, 0.5])
    # a run with a hundred scores is still one run: the 10% tail of 3 runs is not supported
    many = np.r_[np.linspace(0, 1, 100), 2.0, 3.0]
    labels = np.array(["x"] * 100 + ["y", "z"])
    assert math.isinf(tail_quantile(many, local_weights(labels, np.zeros(102), None), 3, 0.1))


def test_quantile_function_takes_each_tail_from_its_own_side_and_stops_at_the_data():
    z = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 4.0, 6.0, 8.0, 9.0])
    w = np.ones(z.size)
    u = np.array([0.01, 0.1, 0.5, 0.9, 0.99])
    q = quantile_function(z, w, z.size, u)
    # the upper 10% is the conformal step of z, the lower 10% that of -z
    assert q[3] == tail_quantile(z, w, z.size, 0.1) == 9.0
    assert q[1] == -tail_quantile(-z, w, z.size, 0.1) == -3.0
    # beyond what 9 runs support the draws stop at the largest errors seen on each side
    assert q[0] == -3.0 and q[4] == 9.0


def test_tails_calibrated_separately_hold_on_skewed_errors():
    """Errors skewed to one side (a log-normal shifted to median 0): each tail's 5% multiplier
    from 39 calibration runs (three correlated scores each), a new run's error beyond it. 2,000
    replicates: each side's miss rate must be at most 6.5% (conformal quantiles are valid, a
    little conservative: at least 2.5%). A true 5% fails the upper bound with probability 0.3%
    (3 sd); a true 8% (about what one symmetric |error| multiplier puts on the heavy side)
    passes it with probability 0.6%. The symmetric multiplier here misses above 9.6% and below
    0.5% of the time (measured on the same draws)."""
    rng = np.random.default_rng(20261205)
    n_runs, reps = 39, 2000
    miss = {"upper": 0, "lower": 0, "sym_upper": 0, "sym_lower": 0}
    for _ in range(reps):
        run_effect = rng.lognormal(0, 0.8, (n_runs + 1, 1))
        scores = run_effect * rng.lognormal(0, 0.3, (n_runs + 1, 3)) - 1.0
        cal, new = scores[:-1].ravel(), scores[-1, rng.integers(3)]
        runs = np.repeat(np.arange(n_runs), 3)
        w = local_weights(runs, np.zeros(cal.size), None)
        hi, lo = tail_quantile(cal, w, n_runs, 0.05), tail_quantile(-cal, w, n_runs, 0.05)
        sym = tail_quantile(np.abs(cal), w, n_runs, 0.1)
        miss["upper"] += new > hi
        miss["lower"] += new < -lo
        miss["sym_upper"] += new > sym
        miss["sym_lower"] += new < -sym
    rate = {k: v / reps for k, v in miss.items()}
    assert 0.025 <= rate["upper"] <= 0.065, rate
    assert 0.025 <= rate["lower"] <= 0.065, rate
    assert rate["sym_upper"] > 0.08 and rate["sym_lower"] < 0.02, rate


def test_cross_family_pvalues_find_what_a_new_family_needs():
    """Families whose scores differ in scale: a family forecast from the others misses their
    5% multiplier more (a wide family) or less (a narrow one) often than 5%; the map built from
    the cross-family p-values says which nominal tail gives 5% over the families. With
    families alike it is about the identity."""
    rng = np.random.default_rng(3)

    def corpus(scales):
        z, runs, fams = [], [], []
        for f, s in enumerate(scales):
            for r in range(12):
                z += list(s * rng.standard_normal(3))
                runs += [f"{f}-{r}"] * 3
                fams += [f] * 3
        return np.array(z), np.array(runs), np.array(fams)

    z, runs, fams = corpus([1.0] * 6)
    d = np.zeros(z.size)
    up, lo, w = cross_family_pvalues(z, runs, fams, d)
    assert w.sum() == pytest.approx(72)  # 72 runs, each weighing 1
    assert np.all((up > 0) & (up <= 1)) and np.all((lo > 0) & (lo <= 1))
    assert 0.02 <= TailMap(up, runs, d)(0.05) <= 0.09
    z, runs, fams = corpus([0.2, 0.3, 1.0, 1.0, 3.0, 5.0])
    up, _, w = cross_family_pvalues(z, runs, fams, d)
    miss_at_nominal = float(np.sum(w * (up <= 0.05)) / w.sum())
    assert miss_at_nominal > 0.06  # heterogeneous families: a new one is missed more often
    mapped = TailMap(up, runs, d)(0.05)
    assert TailMap(up, runs, d)(0.05, at=0.0) == mapped  # one distance: local is global
    assert mapped < 0.05 and np.sum(w * (up <= mapped)) / w.sum() <= 0.05
    assert TailMap()(0.05) == 0.05  # nothing to map: the identity
