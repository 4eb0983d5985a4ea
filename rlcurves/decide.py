"""Decisions from forecasts: the probabilities behind stop advice, in one place.

Every probability here is computed from a forecast's :class:`~rlcurves.predictive.Predictive`, the
same draws its printed interval comes from. :class:`~rlcurves.monitor.Monitor` (one run against a
baseline or a target) and :class:`~rlcurves.race.Race` (a sweep) consume these functions; so do the
CLI's ``watch`` and ``race``, the transformers callback and the Ray Tune and Optuna adapters.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from .errors import RLCurvesError
from .forecast import Forecast
from .predictive import Predictive

# A level to beat: a number (known exactly), draws of it, or a forecast's predictive distribution
# (a finished run's level is known only to its noise: its draws carry that).
Level = float | ArrayLike | Predictive | Forecast


def _draws(x: Level, i: int = 0) -> np.ndarray:
    """1-D draws of ``x`` at its ``i``-th forecast point."""
    if isinstance(x, Forecast):
        if x.predictive is None:
            raise RLCurvesError(
                "the forecast has no predictive distribution (its interval is unbounded): fit "
                "more evaluations before deciding"
            )
        x = x.predictive
    if isinstance(x, Predictive):
        return x.column(i)
    d = np.atleast_1d(np.asarray(x, dtype=float)).ravel()
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise RLCurvesError(f"a level to compare with must be finite numbers, got {x!r}")
    return d


def prob_greater(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y) for independent X, Y given by draws, over all pairs (ties count half)."""
    x = np.asarray(x, dtype=float).ravel()
    ys = np.sort(np.asarray(y, dtype=float).ravel())
    below = np.searchsorted(ys, x, side="left")
    not_above = np.searchsorted(ys, x, side="right")
    return float(np.mean((below + not_above) / 2.0) / ys.size)


def prob_above(run: Level, baseline: Level, *, sign: int = 1, i: int = 0) -> float:
    """P(the run's quantity ends above ``baseline``), the two independent.

    Parameters
    ----------
    run : Forecast, Predictive or draws
        The run's forecast at the budget.
    baseline : float, draws, Predictive or Forecast
        The level to beat; its own uncertainty counts when it is given as draws.
    sign : {1, -1}
        -1 when lower is better (a loss): the probability of ending below.
    i : int
        Which forecast point of ``run`` (and of ``baseline``) to use.
    """
    if sign not in (1, -1):
        raise RLCurvesError(f"sign must be 1 or -1, got {sign!r}")
    return prob_greater(sign * _draws(run, i), sign * _draws(baseline, i))


def prob_best(runs: Mapping[str, Level], *, sign: int = 1, i: int = 0, seed: int = 0) -> dict:
    """P(each run is the best of ``runs``), the runs independent: a dict name -> probability.

    Draws of runs of different draw counts are resampled to a common count with ``seed``.
    """
    if sign not in (1, -1):
        raise RLCurvesError(f"sign must be 1 or -1, got {sign!r}")
    if not runs:
        return {}
    draws = {k: sign * _draws(v, i) for k, v in runs.items()}
    n = max(d.size for d in draws.values())
    rng = np.random.default_rng(seed)
    cols = [d if d.size == n else rng.choice(d, n) for d in draws.values()]
    m = np.column_stack([rng.permutation(c) for c in cols])
    best = m.max(axis=1, keepdims=True)
    ties = (m == best).astype(float)
    share = ties / ties.sum(axis=1, keepdims=True)
    return dict(zip(draws, share.mean(axis=0).tolist(), strict=True))


__all__ = ["prob_above", "prob_best", "prob_greater"]
