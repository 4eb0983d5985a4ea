"""The predictive distribution of a forecast: the one place its interval and its probabilities
come from.

Every :class:`~rlcurves.forecast.Forecast` carries a :class:`Predictive` (``fc.predictive``): draws
of the forecast quantity at each forecast point. The printed interval is the central interval of
these draws, and every probability a decision uses (:mod:`rlcurves.decide`: ends above a baseline,
reaches a target, is the best of a sweep) is computed from the same draws. A report can therefore
never print ``p(above) <= 0.05`` beside a 90% interval that contains the baseline.

How the draws are made is the forecast's business (calibration, model averaging); consumers only
use the methods below. On the default path (:func:`rlcurves.forecast`, calibrated bootstrap) they
are ``combined forecast + sqrt(V) Z``: the sigmoid/power-law average of :mod:`rlcurves.ensemble`,
its predictive variance ``V`` and ``Z`` distributed as the run-level conformal scores of
:mod:`rlcurves.calibrate` (4,000 stratified draws, rows shuffled with the forecast's seed, so the
same seed gives the same draws).

Which quantity a decision should use. ``fc.predictive`` is the distribution of the run's **level**
(``quantity`` "mean of the k evaluations up to each point (the run's level over its last 10% of
compute)"): what "the run ends above the baseline" compares, since a run's end is read as the
mean of its last evaluations, not as one noisy evaluation and not as a curve nobody observes.
Decisions about where runs end (:func:`rlcurves.decide.prob_above`, ``prob_best``) therefore use
``fc.predictive``; a baseline given as a finished run's level is compared like with like.
``fc.prediction_predictive`` (``quantity`` "one evaluation") is for "what will the next
evaluation show", e.g. whether one logged value is surprising; it is wider by one evaluation's
noise and is not the quantity to rank runs by. The raw bootstrap kinds, profile and mcmc give the
curve (``quantity`` "curve").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .errors import RLCurvesError


@dataclass(eq=False)
class Predictive:
    """Draws from the predictive distribution of a forecast quantity at compute points.

    Attributes
    ----------
    at : numpy.ndarray
        Compute values, shape ``(n_at,)``.
    draws : numpy.ndarray
        Draws of the quantity at each point, shape ``(n_draws, n_at)``. Draws at different points
        come from one joint draw (row ``i`` is one plausible future).
    quantity : str
        What the draws are of, in words: ``"curve"`` (the expected reward), the run's level
        (``"mean of the k evaluations up to each point ..."``), ``"one evaluation"``.
    info : dict
        How the draws were made (calibration, model weights).
    """

    at: np.ndarray
    draws: np.ndarray
    quantity: str = "curve"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.at = np.atleast_1d(np.asarray(self.at, dtype=float))
        d = np.asarray(self.draws, dtype=float)
        if d.ndim == 1:
            d = d[:, None]
        if d.ndim != 2 or d.shape[1] != self.at.size or d.shape[0] < 1:
            raise RLCurvesError(
                f"draws must have shape (n_draws, {self.at.size}), got {np.shape(self.draws)}"
            )
        self.draws = d

    @property
    def n_draws(self) -> int:
        """Number of draws."""
        return int(self.draws.shape[0])

    def column(self, i: int = 0) -> np.ndarray:
        """The draws at ``at[i]`` (1-D)."""
        return self.draws[:, i]

    def quantile(self, q: ArrayLike) -> np.ndarray:
        """Quantile(s) ``q`` at every point: shape ``(n_at,)`` for a scalar ``q``, else
        ``(len(q), n_at)``."""
        q = np.asarray(q, dtype=float)
        if np.any((q < 0) | (q > 1)):
            raise RLCurvesError(f"quantiles must be in [0, 1], got {q}")
        return np.quantile(self.draws, q, axis=0)

    def interval(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The central interval at ``level``: the ``(1 - level) / 2`` and ``(1 + level) / 2``
        quantiles."""
        if not 0 < level < 1:
            raise RLCurvesError(f"level= must be in (0, 1), e.g. 0.9 for 90%; got {level}")
        lo, hi = self.quantile([(1 - level) / 2, (1 + level) / 2])
        return lo, hi

    def cdf(self, x: ArrayLike) -> np.ndarray:
        """P(quantity <= x) at every point (ties count half); ``x`` broadcasts against ``at``."""
        x = np.broadcast_to(np.asarray(x, dtype=float), self.at.shape)
        below = np.mean(self.draws < x, axis=0)
        equal = np.mean(self.draws == x, axis=0)
        return below + equal / 2

    def prob_above(self, x: ArrayLike) -> np.ndarray:
        """P(quantity > x) at every point (ties count half)."""
        return 1.0 - self.cdf(x)

    def __repr__(self) -> str:
        return f"Predictive({self.quantity}; {self.n_draws} draws at {self.at.size} point(s))"


__all__ = ["Predictive"]
