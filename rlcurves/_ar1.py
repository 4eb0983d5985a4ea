"""The evaluation noise as an AR(1) process in compute: one definition for every module.

A run's evaluations are a time series: its residuals around the curve are correlated from one
evaluation to the next. The correlation is a property of the compute between two evaluations,
not of their index: evaluations ``delta`` apart correlate as ``rho ** (delta / spacing)``, with
``rho`` the lag-one correlation at the run's typical spacing (the median gap). On evenly spaced
evaluations that is the ordinary AR(1); on a log whose evaluations thin out or crowd in, a long
gap correlates less than a short one.

Every estimate of ``rho`` is clipped to ``[0, RHO_MAX]`` here (the bootstrap, the level's noise in
:mod:`rlcurves.ensemble`, the peak test and a finished run's level in :mod:`rlcurves.decide`).
"""

from __future__ import annotations

import math

import numpy as np

#: The largest lag-one correlation any estimate is allowed: at 0.95 the mean of 20 evaluations
#: has the variance of about one and a half independent ones (at 0.99, of one): beyond it a short
#: series cannot tell a correlated noise from a trend the curve misses.
RHO_MAX = 0.95


def clip_rho(rho: float) -> float:
    """``rho`` clipped to ``[0, RHO_MAX]`` (0 when not finite)."""
    rho = float(rho)
    return min(max(rho, 0.0), RHO_MAX) if math.isfinite(rho) else 0.0


def spacing_units(compute: np.ndarray | None, n: int) -> np.ndarray:
    """Gaps between successive evaluations in units of the median gap, shape ``(n - 1,)``
    (ones when ``compute`` is None or not increasing)."""
    if compute is None or n < 2:
        return np.ones(max(n - 1, 0))
    gaps = np.diff(np.asarray(compute, dtype=float))
    positive = gaps[gaps > 0]
    if positive.size == 0:
        return np.ones(n - 1)
    return np.where(gaps > 0, gaps / float(np.median(positive)), 1.0)


def lag1(
    residuals: np.ndarray, compute: np.ndarray | None = None, starts: np.ndarray | None = None
) -> float:
    """Lag-one correlation of ordered residuals at the median spacing, unclipped.

    On even spacing the Yule-Walker estimate (the lag-one sum over the lag-zero sum); with
    uneven gaps the moment equation ``sum e_i e_{i+1} = c sum rho**g_i (e_i**2 + e_{i+1}**2) / 2``
    over successive pairs ``g_i`` median gaps apart, ``c`` the factor that makes it Yule-Walker's
    on even spacing, solved for ``rho`` in ``[0, 1)``. Pairs across a run start (``starts``) are
    left out. Negative correlation is reported as 0 (the models here have none).
    """
    e = np.asarray(residuals, dtype=float)
    e = e - e.mean() if e.size else e
    n = e.size
    if n < 3 or not np.any(e):
        return 0.0
    g = spacing_units(compute, n)
    keep = np.ones(n - 1, dtype=bool) if starts is None else ~np.asarray(starts, bool)[1:]
    a, b, g = e[:-1][keep], e[1:][keep], g[keep]
    cross = float(np.dot(a, b))
    total = float(np.dot(e, e))
    if cross <= 0 or a.size == 0:
        return 0.0
    if np.allclose(g, 1.0):  # the Yule-Walker estimate
        return cross / total
    half = 0.5 * (a * a + b * b)
    half *= total / half.sum()  # so that even spacing gives the Yule-Walker estimate

    def excess(r: float) -> float:
        return float(np.dot(np.power(r, g), half)) - cross

    hi = 1.0 - 1e-9
    if excess(hi) <= 0:
        return hi
    from scipy.optimize import brentq

    return float(brentq(excess, 0.0, hi, xtol=1e-10))


def ar1_series(
    rng: np.random.Generator,
    k: int,
    n: int,
    sd: float,
    rho: float,
    starts: np.ndarray | None = None,
    gaps: np.ndarray | None = None,
) -> np.ndarray:
    """``k`` stationary AR(1) series of length ``n`` with marginal sd ``sd``, shape ``(k, n)``.

    ``gaps`` (length ``n - 1``, in units of the median spacing; default ones) sets each step's
    correlation ``rho ** gap``; ``starts`` (bool, length ``n``) restarts the series at the first
    point of every run.
    """
    rho = clip_rho(rho)
    z = rng.standard_normal((k, n))
    out = np.empty((k, n))
    out[:, 0] = z[:, 0]
    step = np.full(max(n - 1, 0), rho) if gaps is None else np.power(rho, np.asarray(gaps))
    innovation = np.sqrt(1.0 - step * step)
    for t in range(1, n):
        if starts is not None and starts[t]:
            out[:, t] = z[:, t]
        else:
            out[:, t] = step[t - 1] * out[:, t - 1] + innovation[t - 1] * z[:, t]
    return out * sd


_MAX_LAG = 20_000


def mean_variance(k: int, rho: float) -> float:
    """Variance of the mean of ``k`` evenly spaced AR(1) values of unit variance.

    Lags past 20,000 are left out of the sum: their weight is at most ``RHO_MAX ** 20000``
    (below 1e-170), and a level far beyond the data (a forecast at a million times the compute
    seen) would otherwise sum billions of them."""
    if k <= 1:
        return 1.0
    j = np.arange(1, min(k, _MAX_LAG))
    rho = clip_rho(rho)
    return float((1.0 + 2.0 * np.sum((1.0 - j / k) * rho**j)) / k)
