"""Model combination: the sigmoid and the power law, weighted by their skill on the run's own past.

:func:`combine` is the point forecast of :func:`rlcurves.forecast`: the sigmoid fit and the power
law ``R = A - D / C^B`` (fitted on the tail of the window, compute from a quarter of the window's
end on), weighted inversely to their mean squared errors when each is refitted on the first 35%,
50% and 70% of the window and forecasts the window's last 10%. The spread of the two-component
mixture, ``w_s w_p (m_p - m_s)^2``, enters the predictive variance; inside the fit window the
sigmoid alone is used. The forecast quantity is a run's level at ``C``: the mean of its
evaluations over the last 10% of compute up to ``C``. Why, with the measurements: the design
notes (``docs/design/ensemble.md``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import RLCurvesError

if TYPE_CHECKING:
    from .powerlaw import PowerLawFit
    from .result import SigmoidFit

# Fraction of compute at the end a run's level averages over.
LEVEL_WINDOW = 0.1
# The power law is fitted on compute >= TAIL * (end of the window) ...
TAIL = 0.25
# ... when that leaves at least this many points (else on all positive compute).
TAIL_MIN_POINTS = 6
# Self-backtests: refit on the first fraction of the window's compute, forecast its last 10%.
BACKTEST_CUTS = (0.35, 0.5, 0.7)
# At most this many grid points per forecast point when averaging a curve over the level window.
_MAX_WINDOW_POINTS = 64


@dataclass(eq=False)
class Ensemble:
    """The two families' forecasts of a run's level at ``at`` and how they combine.

    Attributes
    ----------
    at : numpy.ndarray
        Compute values forecast.
    k : numpy.ndarray
        Evaluations averaged in the level at each point.
    mean : numpy.ndarray
        The combined forecast of the level.
    point : numpy.ndarray
        The combined curve at ``at`` (the center for one evaluation).
    sigmoid, power_law : numpy.ndarray
        Each family's forecast of the level (``power_law`` is NaN where it could not be fitted).
    weights : dict
        ``{"sigmoid": w_s, "power_law": w_p}`` beyond the window (inside it the sigmoid alone).
    w_power_law : numpy.ndarray
        The power law's weight at each point (0 inside the fit window).
    distance : numpy.ndarray
        Log compute of the level window's center past the end of the fit window (0 inside).
    fit_var, mix_var, noise_var, noise_var_one : numpy.ndarray
        Variance components: the sigmoid's bootstrap spread of the level, the mixture's
        ``w_s w_p (m_p - m_s)^2``, the noise of the level (a mean of ``k`` AR(1) evaluations)
        and of one evaluation.
    backtests : dict
        Per family, the signed backtest errors by cut.
    power_law_fit : PowerLawFit or None
        The tail power law.
    """

    at: np.ndarray
    k: np.ndarray
    mean: np.ndarray
    point: np.ndarray
    sigmoid: np.ndarray
    power_law: np.ndarray
    weights: dict[str, float]
    w_power_law: np.ndarray
    distance: np.ndarray
    fit_var: np.ndarray
    mix_var: np.ndarray
    noise_var: np.ndarray
    noise_var_one: np.ndarray
    noise_sd: float
    rho: float
    backtests: dict[str, dict[float, float]] = field(default_factory=dict)
    power_law_fit: PowerLawFit | None = field(default=None, repr=False)

    @property
    def disagreement(self) -> np.ndarray:
        """Power law minus sigmoid forecast of the level (NaN without a power law)."""
        return self.power_law - self.sigmoid

    @property
    def driver(self) -> str:
        """The family with the larger weight beyond the window."""
        return "power law" if self.weights["power_law"] > 0.5 else "sigmoid"

    def summary_line(self, at_index: int = -1) -> str:
        """Which family drives the forecast and how far the two disagree, in words."""
        ws, wp = self.weights["sigmoid"], self.weights["power_law"]
        i = at_index
        if not np.isfinite(self.power_law[i]):
            return "sigmoid alone (the power law could not be fitted to the window's tail)"
        return (
            f"{self.driver} drives the forecast (weights from self-backtests: sigmoid {ws:.2f}, "
            f"power law {wp:.2f}); at C = {self.at[i]:.4g} the sigmoid says {self.sigmoid[i]:.3f}, "
            f"the power law {self.power_law[i]:.3f} (they differ by {self.disagreement[i]:+.3f})"
        )


def level_grid(at: float, spacing: float) -> np.ndarray:
    """The compute points a run's level at ``at`` averages: ``k`` evaluations ``spacing`` apart
    ending at ``at``, ``k = max(1, round(0.1 at / spacing))`` (capped at 64 grid points)."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return np.array([at])
    k = max(1, round(LEVEL_WINDOW * at / spacing))
    grid = at - spacing * np.arange(k)
    if k > _MAX_WINDOW_POINTS:
        grid = np.linspace(grid[-1], at, _MAX_WINDOW_POINTS)
    return grid[grid > 0] if np.any(grid > 0) else np.array([at])


def level_weights(at: float, spacing: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The level at ``at`` with a continuous window, for a band drawn on a grid: the evaluations
    of :func:`level_grid` with the oldest one weighted by the fraction of it the window covers
    (``k = 0.1 at / spacing`` evaluations, not rounded), so that the level, its centre and its
    noise change smoothly with ``at`` instead of stepping where the rounded count changes. Equal
    to :func:`level_grid`'s mean where ``0.1 at / spacing`` is a whole number. Returns the grid,
    its weights and the (fractional) number of evaluations."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return np.array([at]), np.ones(1), 1.0
    k = max(1.0, LEVEL_WINDOW * at / spacing)
    whole = math.floor(k)
    if k > _MAX_WINDOW_POINTS:  # steps of 1/k or less: the rounded window as it is
        grid = level_grid(at, spacing)
        return grid, np.ones(grid.size), float(round(k))
    frac = k - whole
    n = whole + (1 if frac > 1e-12 else 0)
    grid = at - spacing * np.arange(n)
    weights = np.ones(n)
    if n > whole:
        weights[-1] = frac
    keep = grid > 0
    if not keep.any():
        return np.array([at]), np.ones(1), 1.0
    return grid[keep], weights[keep], float(weights[keep].sum())


def n_level(at: float, spacing: float) -> int:
    """Number of evaluations in the level at ``at`` (see :func:`level_grid`)."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return 1
    return max(1, round(LEVEL_WINDOW * at / spacing))


def ar1_mean_variance(k: int, rho: float) -> float:
    """Variance of the mean of ``k`` AR(1) values of unit variance and lag-1 correlation rho."""
    if k <= 1:
        return 1.0
    j = np.arange(1, k)
    rho = min(max(float(rho), 0.0), 0.95)
    return float((1.0 + 2.0 * np.sum((1.0 - j / k) * rho**j)) / k)


def _window_means(values: Callable, windows: list) -> np.ndarray:
    """The mean of ``values(grid)`` over each level window ``(grid, weights or None, k)``."""
    return np.array(
        [
            float(np.mean(values(g)) if w is None else np.average(values(g), weights=w))
            for g, w, _ in windows
        ]
    )


def _mean_variance(k: float, rho: float) -> float:
    """:func:`ar1_mean_variance` at a fractional ``k``: linear between the whole numbers."""
    lo = math.floor(k)
    if k - lo < 1e-12:
        return ar1_mean_variance(int(lo), rho)
    frac = k - lo
    return (1 - frac) * ar1_mean_variance(lo, rho) + frac * ar1_mean_variance(lo + 1, rho)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def fit_tail_power_law(compute: np.ndarray, reward: np.ndarray, end: float) -> PowerLawFit:
    """The power law fitted on the window's tail (compute >= TAIL * end), see the module doc."""
    from .powerlaw import fit_power_law

    lo = TAIL * end
    if np.sum((compute >= lo) & (compute <= end) & (compute > 0)) < TAIL_MIN_POINTS:
        lo = None
    return _quiet(fit_power_law, compute, reward, min_compute=lo, max_compute=end)


def _refit_sigmoid(fit: SigmoidFit, max_compute: float) -> SigmoidFit:
    """``fit``'s settings on its own window, cut at ``max_compute``."""
    from .fit import fit_sigmoid

    return _quiet(
        fit_sigmoid,
        fit.fit_compute,
        fit.fit_reward,
        r0=fit.r0_fixed,
        min_compute=fit.min_compute,
        max_compute=max_compute,
        bounds={"A": tuple(fit.bounds.A), "R0": tuple(fit.bounds.R0)},
    )


def backtest_errors(fit: SigmoidFit) -> dict[str, dict[float, float]]:
    """Signed errors (observed minus forecast) of each family's forecast of the window's last 10%
    from the first 35%, 50% and 70% of its compute (NaN where a family could not be fitted)."""
    c, r = fit.fit_compute, fit.fit_reward
    end = float(np.max(c))
    out: dict[str, dict[float, float]] = {"sigmoid": {}, "power_law": {}}
    for cut_fraction in BACKTEST_CUTS:
        cut = cut_fraction * end
        held = (c > max(cut, (1 - LEVEL_WINDOW) * end)) & (c <= end)
        for name in out:
            err = math.nan
            if held.any():
                try:
                    model = (
                        _refit_sigmoid(fit, cut)
                        if name == "sigmoid"
                        else fit_tail_power_law(c, r, cut)
                    )
                    pred = np.asarray(model.predict(c[held]), dtype=float)
                    err = float(np.mean(r[held]) - np.mean(pred))
                except RLCurvesError:
                    pass
            out[name][cut_fraction] = err if math.isfinite(err) else math.nan
    return out


def backtest_weights(errors: dict[str, dict[float, float]]) -> dict[str, float]:
    """Inverse-MSE weights over the cuts both families forecast (sigmoid alone when none)."""
    es = np.array([errors["sigmoid"][k] for k in BACKTEST_CUTS])
    ep = np.array([errors["power_law"][k] for k in BACKTEST_CUTS])
    ok = np.isfinite(es) & np.isfinite(ep)
    if not ok.any():
        return {"sigmoid": 1.0, "power_law": 0.0}
    mse_s = max(float(np.mean(es[ok] ** 2)), 1e-14)
    mse_p = max(float(np.mean(ep[ok] ** 2)), 1e-14)
    ws = (1.0 / mse_s) / (1.0 / mse_s + 1.0 / mse_p)
    return {"sigmoid": ws, "power_law": 1.0 - ws}


def combine(
    fit: SigmoidFit,
    at: np.ndarray,
    curves: Callable[[np.ndarray], np.ndarray],
    *,
    rho: float | None = None,
    continuous: bool = False,
) -> Ensemble:
    """The combined forecast of the run's level at ``at`` (see the module docstring).

    Parameters
    ----------
    fit : SigmoidFit
        The sigmoid fit. Only its window's data are used.
    at : numpy.ndarray
        Compute values.
    curves : callable
        ``curves(compute) -> (n_samples, len(compute))``: the sigmoid's bootstrap curves (their
        spread is the fit uncertainty).
    rho : float, optional
        Lag-1 autocorrelation of the evaluation noise (default: from the residuals).
    continuous : bool
        For a band drawn over many ``at``, without steps: the level's window taken as
        continuous (:func:`level_weights`), so nothing steps where the number of evaluations
        averaged changes, and the power law weighted by the share of that window past the fit
        window, so the combination does not step in at the window's end.
    """
    from .calibrate import residual_sd

    at = np.atleast_1d(np.asarray(at, dtype=float))
    c = fit.fit_compute
    end = float(np.max(c))
    uniq = np.unique(c)
    spacing = float(np.median(np.diff(uniq))) if uniq.size > 1 else math.nan
    if continuous:
        windows = [level_weights(float(a), spacing) for a in at]
    else:
        windows = []
        for a in at:
            g = level_grid(float(a), spacing)
            windows.append((g, None, float(n_level(float(a), spacing))))
    k_eff = np.array([kk for _, _, kk in windows])
    k = np.maximum(np.round(k_eff), 1).astype(int)
    centers = _window_means(lambda g: g, windows)
    sig = _window_means(fit.predict, windows)
    point_s = np.asarray(fit.predict(at), dtype=float)

    errors = backtest_errors(fit)
    try:
        pl = fit_tail_power_law(c, fit.fit_reward, end)
    except RLCurvesError:
        pl = None
    if pl is None:
        weights = {"sigmoid": 1.0, "power_law": 0.0}
        plv = np.full(at.size, np.nan)
        point_p = np.full(at.size, np.nan)
    else:
        weights = backtest_weights(errors)
        with np.errstate(all="ignore"):
            plv = _window_means(pl.predict, windows)
            point_p = np.asarray(pl.predict(at), dtype=float)
    # the power law only beyond the window, and only where its forecast is a finite value
    plv = np.where(np.isfinite(plv) & (np.abs(plv) < 1e6), plv, np.nan)
    ok = (at > end) & np.isfinite(plv) & np.isfinite(point_p)
    wp = np.where(ok, weights["power_law"], 0.0)
    if continuous and spacing > 0:  # phased in over the first level window past `end`
        span = np.maximum(k_eff * spacing, 1e-300)
        wp = wp * np.clip((at - end) / span, 0.0, 1.0)
    plz, ppz = np.where(ok, plv, 0.0), np.where(ok, point_p, 0.0)
    mean = (1 - wp) * sig + wp * plz
    point = (1 - wp) * point_s + wp * ppz
    mix = wp * (1 - wp) * np.where(ok, plz - sig, 0.0) ** 2

    draws = np.asarray(curves(centers), dtype=float)
    fit_var = np.nanvar(draws, axis=0) if draws.shape[0] > 1 else np.zeros(at.size)
    noise = residual_sd(fit)
    if rho is None:
        res = fit.fit_reward - np.asarray(fit.predict(c), dtype=float)
        den = float(np.sum(res**2))
        rho = float(np.sum(res[1:] * res[:-1]) / den) if den > 0 and res.size > 2 else 0.0
    noise_var = noise**2 * np.array([_mean_variance(kk, rho) for kk in k_eff])
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.where(centers > end, np.log(np.maximum(centers, end) / end), 0.0)
    return Ensemble(
        at=at,
        k=k,
        mean=mean,
        point=point,
        sigmoid=sig,
        power_law=plv,
        weights=weights,
        w_power_law=wp,
        distance=distance,
        fit_var=fit_var,
        mix_var=mix,
        noise_var=noise_var,
        noise_var_one=np.full(at.size, noise**2),
        noise_sd=noise,
        rho=float(rho),
        backtests=errors,
        power_law_fit=pl,
    )


def info_dict(ens: Ensemble, scalar: bool) -> dict[str, Any]:
    """The fields :class:`~rlcurves.forecast.Forecast` exposes in ``info`` about the families."""

    def out(a):
        a = np.asarray(a, dtype=float)
        return float(a[0]) if scalar else a

    return {
        "weights": dict(ens.weights),
        "driver": ens.driver,
        "families": {"sigmoid": out(ens.sigmoid), "power_law": out(ens.power_law)},
        "disagreement": out(ens.disagreement),
        "n_level": out(ens.k),
        "distance": out(ens.distance),
        "backtests": ens.backtests,
    }


__all__ = [
    "BACKTEST_CUTS",
    "LEVEL_WINDOW",
    "Ensemble",
    "backtest_errors",
    "backtest_weights",
    "combine",
    "fit_tail_power_law",
    "level_grid",
    "level_weights",
]
