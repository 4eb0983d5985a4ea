"""Bootstrap the sigmoid fit: resampling schemes refitted in one vectorized solve.

Every scheme keeps the compute grid of the fit fixed (pairs and runs become integer multiplicities
in the weights), so a thousand resamples are one batched solve, not a loop of fits:

- ``residual``: centred, degrees-of-freedom-rescaled residuals drawn with replacement and added to
  the fitted curve (one run, independent noise; the default).
- ``wild``: each residual, leverage-corrected, times a Rademacher sign (noise whose level changes
  along the curve).
- ``block``: moving blocks of consecutive residuals (autocorrelated evaluation noise); the block
  length is chosen from the data by the Politis-White (2004, corrected 2009) rule.
- ``ar1``: a parametric (sieve) bootstrap: AR(1) noise with the residuals' variance and a
  bias-corrected lag-1 autocorrelation (slow run-level drift).
- ``calibrated``: an alias of ``ar1`` (the engine of :func:`rlcurves.forecast`'s default, whose
  interval is then scaled by conformal scores on finished runs: see :mod:`rlcurves.calibrate`).
- ``pairs``: points drawn with replacement, as integer multiplicities in the weights.
- ``run``: whole runs (seeds) drawn with replacement when the data pool several runs.

Each resample is refitted from the original optimum by a batched Levenberg-Marquardt with the
analytic Jacobian (:func:`warm_solve`); resamples that stop on a bound or fail go to the bounded
variable-projection solver (:func:`rlcurves.solver.solve_batch`). A guard catches optima in
another basin, which a warm start would miss (see ``guard`` in :func:`bootstrap`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from . import _kernels as K
from ._ar1 import ar1_series, clip_rho, lag1, spacing_units
from .errors import RLCurvesError
from .model import PARAM_NAMES, fraction_of_gain, jacobian_internal, log_compute
from .model import sigmoid as sigmoid_curve
from .solver import BatchSolution, Bounds, solve_batch, warm_refit

if TYPE_CHECKING:
    from .result import SigmoidFit

Kind = Literal["calibrated", "residual", "wild", "block", "ar1", "pairs", "run"]
KINDS = ("calibrated", "residual", "wild", "block", "ar1", "pairs", "run")

# kind="calibrated" is kept as an alias of "ar1" so that callers do not break: the calibration of
# forecast intervals now lives in rlcurves.calibrate (conformal scores on finished runs), not in a
# constant inflation of the bootstrap spread fitted on simulations.


def inflation_at(level: float | np.ndarray, inflation: float | dict[float, float]) -> np.ndarray:
    """The inflation factor for central interval ``level`` (linear between calibrated levels)."""
    if not isinstance(inflation, dict):
        return np.full(np.shape(level), float(inflation))
    levels = np.array(sorted(inflation))
    factors = np.array([inflation[k] for k in levels])
    return np.interp(level, levels, factors)


def inflate(values: np.ndarray, center, inflation: float | dict[float, float], bounds=None):
    """Scale sampled deviations from ``center`` so that every central interval is inflated.

    A monotone, piecewise-linear map of each column: it sends the sample quantiles
    ``(1 +- l) / 2`` of every calibrated level ``l`` to ``center + factor(l) * (q - center)`` and
    interpolates linearly between them (beyond the outermost level, the outermost factor). The
    percentile interval at ``l`` of the result is the original one widened by that factor around
    ``center``, and the draws keep their order, so probabilities computed from them stay coherent.
    Works column by column on ``(n_samples, ...)`` arrays.
    """
    values = np.asarray(values, dtype=float)
    if not isinstance(inflation, dict):
        if inflation == 1.0:
            return values
        out = center + float(inflation) * (values - center)
        return out if bounds is None else np.clip(out, *bounds)
    levels = np.array(sorted(inflation))
    factors = np.array([inflation[k] for k in levels])
    tails = np.concatenate([(1 - levels[::-1]) / 2, (1 + levels) / 2])
    knot_factors = np.concatenate([factors[::-1], factors])
    flat = values.reshape(values.shape[0], -1)
    centers = np.broadcast_to(np.asarray(center, dtype=float), values.shape)[0].reshape(-1)
    out = np.empty_like(flat)
    for j in range(flat.shape[1]):
        c = float(centers[j])
        dev = flat[:, j] - c
        knots = np.quantile(dev, tails)
        xs = np.concatenate([knots, [0.0]])
        ys = np.concatenate([knot_factors * knots, [0.0]])
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], np.maximum.accumulate(ys[order])
        mapped = np.interp(dev, xs, ys)
        mapped = np.where(dev > xs[-1], ys[-1] + factors[-1] * (dev - xs[-1]), mapped)
        mapped = np.where(dev < xs[0], ys[0] + factors[-1] * (dev - xs[0]), mapped)
        out[:, j] = c + mapped
    out = out.reshape(values.shape)
    return out if bounds is None else np.clip(out, *bounds)


@dataclass(eq=False)
class BootstrapResult:
    """Parameters refitted on bootstrap resamples of a fit.

    Attributes
    ----------
    samples : pandas.DataFrame
        One row per resample, columns ``A, B, C_mid, R0`` (R0 constant when it was fixed): the
        raw refits, also for the calibrated kind, whose inflation :meth:`ci` and :meth:`curves`
        apply.
    estimate : dict
        The original fit's parameters.
    kind : str
        The resampling scheme.
    converged : numpy.ndarray
        Per resample: the solver converged inside its search box (a resample whose midpoint runs
        to the edge is kept, since that is what the data say, but counted in ``n_unconverged``).
    block_length : int or None
        Block length of the ``block`` scheme; ``ar1`` stores its autocorrelation in ``rho``.
    noise_sd : float
        Residual standard deviation of the fit (unweighted units), used for prediction bands.
    bounds : tuple
        Range of the metric, ``(low, high)`` (e.g. ``(0, 1)`` for a pass rate), for clipping.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=1500)
    >>> boot = fit.bootstrap(200, kind="ar1", seed=0, progress=False)
    >>> ci = boot.ci(0.9).set_index("parameter")
    >>> bool(ci.loc["A", "lower"] < fit.A < ci.loc["A", "upper"])
    True
    """

    samples: pd.DataFrame
    estimate: dict[str, float]
    kind: str
    converged: np.ndarray
    noise_sd: float
    bounds: tuple[float, float] = (-math.inf, math.inf)
    block_length: int | None = None
    rho: float | None = None
    seed: int | None = None
    inflation: float | dict[float, float] = 1.0
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def n_unconverged(self) -> int:
        return int((~self.converged).sum())

    def ci(self, level: float = 0.9) -> pd.DataFrame:
        """Percentile intervals of every parameter (calibrated kind: inflated, see :func:`inflate`).

        The inflation acts on the scale each parameter is sampled on (log for B and C_mid, which
        stay positive); A and R0 stay inside the metric's range (a pass rate in [0, 1]).

        Returns
        -------
        pandas.DataFrame
            Columns ``parameter, estimate, lower, upper, lower_on_bound, upper_on_bound`` (an
            end on a bound: the data do not bound that side).
        """
        lo_q, hi_q = _tails(level)
        rows = []
        for name in PARAM_NAMES:
            raw = self.samples[name].to_numpy(dtype=float)
            log = name in ("B", "C_mid")
            center = math.log(self.estimate[name]) if log else self.estimate[name]
            values = inflate(np.log(raw) if log else raw, center, self.inflation)
            values = np.exp(values) if log else np.clip(values, *self.bounds)
            lo, hi = np.quantile(values, [lo_q, hi_q])
            tol = 1e-9 * (1 + abs(hi) + abs(lo))
            rows.append(
                {
                    "parameter": name,
                    "estimate": self.estimate[name],
                    "lower": lo,
                    "upper": hi,
                    "lower_on_bound": (not log) and lo <= self.bounds[0] + tol,
                    "upper_on_bound": (not log) and hi >= self.bounds[1] - tol,
                }
            )
        return pd.DataFrame(rows)

    def curves(self, compute: ArrayLike) -> np.ndarray:
        """The curve of every resample at ``compute``: shape ``(n_samples, len(compute))``.

        For the calibrated kind each curve's deviation from the fitted curve is inflated (see
        :func:`inflate`; ``samples`` keeps the raw refits), and kept inside the metric's range.
        """
        c = np.atleast_1d(np.asarray(compute, dtype=float))
        s = self.samples
        cols = [s[p].to_numpy()[:, None] for p in PARAM_NAMES]
        curves = sigmoid_curve(c[None, :], *cols)
        if self.inflation != 1.0:
            e = self.estimate
            center = sigmoid_curve(c, e["A"], e["B"], e["C_mid"], e["R0"])[None, :]
            curves = inflate(curves, center, self.inflation, self.bounds)
        return curves

    def curve_band(self, curves: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise interval of curves from :meth:`curves` at ``level``."""
        return band(curves, level, self.bounds)

    def predict_interval(
        self, compute: ArrayLike, level: float = 0.9, *, prediction: bool = False, seed=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Interval for the expected curve at ``compute`` (or a new observation's value).

        Parameters
        ----------
        compute : array_like
            Where to evaluate.
        level : float
            Coverage, e.g. 0.9.
        prediction : bool
            Add the noise of one new evaluation (Gaussian with the fit's residual sd).
        seed : int, optional
            Seed for the added noise.

        Returns
        -------
        (lower, upper) : tuple of numpy.ndarray
            Arrays shaped like ``compute`` (floats for a scalar), clipped to the metric's range.
        """
        curves = self.curves(compute)
        if prediction:
            lo, hi = prediction_band(curves, self, level, seed)
        else:
            lo, hi = self.curve_band(curves, level)
        return _shape_like(lo, compute), _shape_like(hi, compute)


def prediction_band(curves: np.ndarray, boot: BootstrapResult, level: float, seed=None):
    """Interval for a new evaluation: sampled curves plus Gaussian noise of the residual sd."""
    rng = np.random.default_rng(seed)
    noisy = curves + rng.normal(0.0, boot.noise_sd, curves.shape)
    return band(noisy, level, boot.bounds)


def _tails(level: float) -> tuple[float, float]:
    from ._samples import tails

    return tails(level)


def band(curves: np.ndarray, level: float, bounds=(-math.inf, math.inf)):
    """Pointwise percentile band of sampled curves ``(n_samples, n_points)``, clipped to bounds."""
    lo_q, hi_q = _tails(level)
    lo, hi = np.quantile(curves, [lo_q, hi_q], axis=0)
    return np.clip(lo, *bounds), np.clip(hi, *bounds)


def _shape_like(values: np.ndarray, like: ArrayLike):
    return float(values[0]) if np.ndim(like) == 0 else values.reshape(np.shape(like))


def metric_range(fit: SigmoidFit) -> tuple[float, float]:
    """The range a value of the fitted metric can take (from the fit's bounds on A and R0)."""
    lo = min(fit.bounds.A[0], fit.bounds.R0[0])
    hi = max(fit.bounds.A[1], fit.bounds.R0[1])
    return float(lo), float(hi)


# ---- resampling schemes (each returns y (k, n) and w (k, n) on the fit's sorted grid) -----------


def politis_white_block_length(residuals: np.ndarray) -> int:
    """Moving-block length from the data (Politis & White 2004, with Patton et al. 2009).

    Uses a flat-top lag window whose bandwidth is picked where the autocorrelation becomes
    insignificant; the result is clipped to ``[1, min(3 sqrt(n), n / 3)]``.
    """
    e = np.asarray(residuals, dtype=float) - np.mean(residuals)
    n = e.size
    var = np.dot(e, e) / n
    if n < 8 or var <= 0:
        return 1
    max_lag = min(n - 1, math.ceil(math.sqrt(n)) + 10)
    acov = np.array([np.dot(e[: n - k], e[k:]) / n for k in range(max_lag + 1)])
    rho = acov / acov[0]
    k_n = max(5, int(math.sqrt(math.log10(n))))
    crit = 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = max_lag
    for m in range(1, max_lag - k_n + 1):
        if np.all(np.abs(rho[m : m + k_n]) < crit):
            m_hat = m - 1 if m > 0 else 0
            break
    big_m = min(2 * max(m_hat, 1), max_lag)
    lags = np.arange(-big_m, big_m + 1)
    t = np.abs(lags) / big_m
    lam = np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2.0 * (1.0 - t), 0.0))
    r = acov[np.abs(lags)]
    g = np.sum(lam * np.abs(lags) * r)
    d = 4.0 / 3.0 * np.sum(lam * r) ** 2  # moving (circular) block bootstrap constant
    b = (2.0 * g * g / d) ** (1.0 / 3.0) * n ** (1.0 / 3.0) if d > 0 else 1.0
    return int(np.clip(round(b), 1, max(1, min(3 * math.sqrt(n), n / 3))))


def ar1_params(
    residuals: np.ndarray,
    n_params: int,
    starts: np.ndarray | None = None,
    compute: np.ndarray | None = None,
) -> tuple[float, float]:
    """Residual sd and a bias-corrected lag-1 autocorrelation of ordered residuals.

    The autocorrelation is at the median spacing in compute (:func:`rlcurves._ar1.lag1`; pass
    ``compute`` when the evaluations are unevenly spaced). The least-squares estimate of an
    AR(1) coefficient from n points is biased low by about ``(1 + 3 rho) / n`` (Kendall 1954);
    the fit's own parameters absorb part of a slow drift, which biases it further, so the
    correction uses the residual degrees of freedom. ``starts`` marks where a new run begins
    when the residuals hold several runs: lags never cross runs, and the correction uses the
    length of one run. Clipped to ``[0, RHO_MAX]`` (:data:`rlcurves._ar1.RHO_MAX`).
    """
    e = residuals - residuals.mean()
    n = e.size
    if starts is None:
        starts = np.zeros(n, dtype=bool)
        starts[0] = True
    n_runs = max(int(starts.sum()), 1)
    rho = lag1(e, compute, starts)
    dof_per_run = max((n - n_params) / n_runs, 2.0)
    rho = clip_rho(rho + (1.0 + 3.0 * rho) / dof_per_run)
    sd = math.sqrt(np.dot(e, e) / max(n - n_params, 2))
    return sd, rho


def ar1_noise(
    rng: np.random.Generator,
    k: int,
    n: int,
    sd: float,
    rho: float,
    starts=None,
    gaps: np.ndarray | None = None,
) -> np.ndarray:
    """``k`` stationary AR(1) series of length ``n`` with marginal sd ``sd``.

    ``starts`` (bool, length n) restarts the series at the first point of every run; ``gaps``
    (length n - 1, in median spacings) makes the correlation of each step ``rho ** gap`` (the
    AR(1) in compute, :mod:`rlcurves._ar1`).
    """
    return ar1_series(rng, k, n, sd, rho, starts, gaps)


def _run_starts(labels: np.ndarray | None, n: int) -> np.ndarray:
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    if labels is not None and n > 1:
        starts[1:] = labels[1:] != labels[:-1]
    return starts


def _residuals_with_early(fit: SigmoidFit, runs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted residuals of the early points and the window, ordered by run then compute."""
    c = fit.compute
    upper = fit.fit_compute.max()
    keep = (c > 0) & (c <= upper) & (fit.window | (c < fit.fit_compute.min()))
    labels = np.zeros(c.size, dtype=int) if runs is None else np.asarray(runs)
    idx = np.flatnonzero(keep)
    idx = idx[np.lexsort((c[idx], labels[idx]))]
    w = np.ones(idx.size) if fit.sigma is None else 1.0 / fit.sigma[idx]
    p = fit.params
    res = w * (fit.reward[idx] - sigmoid_curve(c[idx], p["A"], p["B"], p["C_mid"], p["R0"]))
    return res, _run_starts(labels[idx], idx.size), c[idx]


def _leverage(x, w, A, R0, B, m, free_r0: bool) -> np.ndarray:
    J = jacobian_internal(x, A, R0, B, m)
    if not free_r0:
        J = J[:, [0, 2, 3]]
    J = J * w[:, None]
    q, _ = np.linalg.qr(J)
    return np.clip(np.sum(q * q, axis=1), 0.0, 0.99)


def _resample(kind, rng, k, fitted, wres, w, runs, block_length, rho_sd, lev, dof_scale):
    n = w.size
    if kind in ("pairs", "run"):
        if kind == "pairs":
            counts = rng.multinomial(n, np.full(n, 1.0 / n), size=k)
        else:
            labels, idx = np.unique(runs, return_inverse=True)
            draws = rng.multinomial(labels.size, np.full(labels.size, 1.0 / labels.size), size=k)
            counts = draws[:, idx]
        return None, np.sqrt(counts) * w[None, :]
    centred = wres - wres.mean()
    if kind == "residual":
        noise = rng.choice(centred * dof_scale, size=(k, n), replace=True)
    elif kind == "wild":
        signs = rng.choice([-1.0, 1.0], size=(k, n))
        noise = signs * (wres / np.sqrt(1.0 - lev))[None, :]
    elif kind == "block":
        b = block_length
        n_blocks = -(-n // b)
        starts = rng.integers(0, n - b + 1, size=(k, n_blocks))
        idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(k, -1)[:, :n]
        noise = centred[idx] * dof_scale
    else:  # ar1, calibrated
        sd, rho, starts, gaps = rho_sd
        noise = ar1_noise(rng, k, n, sd, rho, starts, gaps)
    return fitted[None, :] + noise / w[None, :], np.broadcast_to(w, (k, n))


def bootstrap(
    fit: SigmoidFit,
    n: int = 1000,
    *,
    kind: Kind = "residual",
    seed: int | None = None,
    runs: ArrayLike | None = None,
    block_length: int | None = None,
    noise_from: Literal["window", "with_early"] = "window",
    guard: Literal["screen", "all", "none"] = "screen",
    chunk_size: int = 1000,
    progress: bool = True,
) -> BootstrapResult:
    """Refit ``fit`` on ``n`` bootstrap resamples of its data, all in batched solves.

    Parameters
    ----------
    fit : SigmoidFit
        The fit to resample (its window, weights, bounds and fixed R0 are kept).
    n : int
        Number of resamples.
    kind : {"residual", "calibrated", "wild", "block", "ar1", "pairs", "run"}
        Resampling scheme (see the module docstring). ``block``, ``ar1`` and ``calibrated``
        treat the points in order of compute as a time series (evaluations at regular
        intervals). ``calibrated`` is an alias of ``ar1`` (see :mod:`rlcurves.calibrate`).
    seed : int, optional
        Seed of the random generator (results are reproducible with a seed).
    runs : array_like, optional
        A run (seed) label for every point of ``fit.compute`` when the data pool several runs:
        needed by ``kind="run"``; with ``ar1``/``calibrated`` the noise model is estimated within
        each run and simulated per run (the several-seeds use of the data).
    block_length : int, optional
        For ``kind="block"``: override the data-chosen length.
    noise_from : {"window", "with_early"}
        For ``ar1``/``calibrated``: estimate the noise model from the fit window's residuals, or
        also from the early points the window drops (below ``min_compute``; C = 0 excluded), a
        longer series (but one the curve may describe less well).
    guard : {"screen", "all", "none"}
        Guard against a resample whose optimum lies in another basin than the original one, which
        a warm start would miss. "screen" (default): resamples whose warm start failed get the
        solver's full multi-start solve; 128 random others are screened on the solver's start
        grid (a few matrix products) and a promising start elsewhere refined, and if any of those
        switches basin, all are screened; "all": the full
        multi-start solve for every resample (several times the cost); "none": trust the warm
        start.
    chunk_size : int
        Resamples per vectorized solve (memory: about ``chunk_size * 260 * n_points`` floats).
    progress : bool
        Show a progress bar over chunks.

    Returns
    -------
    BootstrapResult
    """
    if guard not in ("screen", "all", "none"):
        raise RLCurvesError(f"guard must be 'screen', 'all' or 'none', got {guard!r}")
    if kind not in KINDS:
        raise RLCurvesError(f"unknown bootstrap kind {kind!r}; choose one of {list(KINDS)}")
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise RLCurvesError(f"n must be an integer >= 2 resamples, got {n!r}")
    run_labels = None
    if runs is not None:
        all_runs = np.asarray(runs)
        if all_runs.shape != fit.compute.shape:
            raise RLCurvesError(
                f"runs has shape {all_runs.shape} but the fit holds {fit.compute.size} points; "
                "pass one label per point of the data given to fit_sigmoid",
                runs=all_runs.shape,
            )
        # by run, then compute: each run is one time series for block/ar1 resampling
        order = np.lexsort((fit.fit_compute, all_runs[fit.window]))
        run_labels = all_runs[fit.window][order]
    else:
        order = np.argsort(fit.fit_compute, kind="stable")
    if kind == "run":
        if runs is None:
            raise RLCurvesError(
                "kind='run' needs runs=: a run (seed) label for every point of the fit's data"
            )
        if np.unique(run_labels).size < 2:
            raise RLCurvesError("kind='run' needs at least 2 distinct runs in the fit window")
    if noise_from not in ("window", "with_early"):
        raise RLCurvesError(f"noise_from must be 'window' or 'with_early', got {noise_from!r}")
    c = fit.fit_compute[order]
    y = fit.fit_reward[order]
    w = np.ones(c.size) if fit.sigma is None else 1.0 / fit.fit_sigma[order]
    x = log_compute(c)
    p = fit.params
    fitted = sigmoid_curve(c, p["A"], p["B"], p["C_mid"], p["R0"])
    wres = w * (y - fitted)
    n_free = len(fit.free_params)
    dof_scale = math.sqrt(c.size / max(c.size - n_free, 1))
    info: dict = {}
    if kind == "block":
        if block_length is None:
            block_length = politis_white_block_length(wres)
        block_length = int(np.clip(block_length, 1, c.size))
        info["block_length"] = block_length
    rho_sd = None
    inflation: float | dict[float, float] = 1.0
    if kind in ("ar1", "calibrated"):
        starts = _run_starts(run_labels, c.size)
        if noise_from == "with_early":
            series, series_starts, series_c = _residuals_with_early(fit, runs)
        else:
            series, series_starts, series_c = wres, starts, c
        sd, rho = ar1_params(series, n_free, series_starts, series_c)
        rho_sd = (sd, rho, starts, spacing_units(c, c.size))
        info["rho"] = rho
    lev = (
        _leverage(x, w, p["A"], p["R0"], p["B"], math.log(p["C_mid"]), fit.r0_fixed is None)
        if kind == "wild"
        else None
    )
    rng = np.random.default_rng(seed)
    guard_rng = rng.spawn(1)[0]  # its own stream: the resamples do not depend on the guard mode
    r0 = fit.r0_fixed
    out = {name: [] for name in (*PARAM_NAMES, "converged")}
    chunks = range(0, n, chunk_size)
    bar = _progress(
        chunks, progress, f"bootstrap ({kind})", [min(chunk_size, n - s) for s in chunks]
    )
    for start in bar:
        k = min(chunk_size, n - start)
        yk, wk = _resample(
            kind, rng, k, fitted, wres, w, run_labels, block_length, rho_sd, lev, dof_scale
        )
        if yk is None:  # pairs/run: the data stay, the weights carry the multiplicities
            yk = np.broadcast_to(y, (k, c.size)).copy()
            wk = _ensure_enough_points(wk, n_free, rng, kind, run_labels, w)
        sol = warm_solve(x, yk, wk, r0, fit.bounds, p)
        if guard != "none":
            _guard_basins(sol, x, yk, wk, r0, fit.bounds, guard, guard_rng, info)
        out["A"].append(sol.A)
        out["B"].append(np.exp(sol.log_B))
        out["C_mid"].append(np.exp(sol.m))
        out["R0"].append(sol.R0)
        out["converged"].append(sol.converged)
    samples = pd.DataFrame({name: np.concatenate(out[name]) for name in PARAM_NAMES})
    resid_sd = float(np.sqrt(np.sum((y - fitted) ** 2) / max(c.size - n_free, 1)))
    return BootstrapResult(
        samples=samples,
        estimate=dict(p),
        kind=kind,
        converged=np.concatenate(out["converged"]),
        noise_sd=resid_sd,
        bounds=metric_range(fit),
        block_length=info.get("block_length"),
        rho=info.get("rho"),
        seed=seed,
        inflation=inflation,
        info=info,
    )


def warm_solve(x, y, w, r0, bounds: Bounds, params: dict) -> BatchSolution:
    """Refit every resample from the original optimum (:func:`rlcurves.solver.warm_refit`: the
    compiled batched Levenberg-Marquardt in the full parameters; resamples sit near the original
    optimum, so a few quadratically converging steps suffice); rows that stop on a bound, leave
    the search box or do not converge go to the bounded variable-projection solver, warm-started
    as well.
    """
    start = (params["A"], params["R0"], math.log(params["B"]), math.log(params["C_mid"]))
    return warm_refit(x, y, w, r0, bounds, start)


_GRID_B_TIMES_SPAN = np.geomspace(0.3, 60.0, 14)  # the solver's start grid, in units of the span
_GRID_M_IN_SPANS = np.linspace(-0.5, 2.0, 18)


def coarse_grid(x: np.ndarray, y: np.ndarray, w: np.ndarray, r0: float | None):
    """Best point of a coarse ``(log B, m)`` grid for every row: ``(theta (k, 2), rss (k,))``.

    The compute axis ``x`` (n,) is shared, so the curve shapes of the grid are computed once
    and every row's linear least squares (A, R0 unbounded) come from matrix products: a cheap
    screen over the whole start grid for a thousand resamples at once.
    """
    finite = x[np.isfinite(x)]
    x_lo, x_hi = finite.min(), finite.max()
    span = max(x_hi - x_lo, 1e-3 * max(1.0, abs(x_hi)))
    lb, m = np.meshgrid(np.log(_GRID_B_TIMES_SPAN / span), x_lo + span * _GRID_M_IN_SPANS)
    lb, m = lb.ravel(), m.ravel()
    S = fraction_of_gain(x[None, :], np.exp(lb)[:, None], m[:, None])  # (G, n)
    # the moments of every row against every grid curve, in one compiled pass over the rows
    # (numpy's contraction of a thousand rows with the grid was most of the bootstrap's time)
    k = y.shape[0]
    best, rss = np.empty(k, dtype=np.int64), np.empty(k)
    y = np.ascontiguousarray(y, dtype=float)
    w = np.ascontiguousarray(np.broadcast_to(w, y.shape), dtype=float)
    fixed = r0 is not None
    K.coarse_grid_rss(S, y, w, fixed, float(r0) if fixed else 0.0, best, rss)
    steps = np.array(
        [
            math.log(_GRID_B_TIMES_SPAN[1] / _GRID_B_TIMES_SPAN[0]),
            span * (_GRID_M_IN_SPANS[1] - _GRID_M_IN_SPANS[0]),
        ]
    )
    return np.stack([lb[best], m[best]], axis=1), rss, steps


def _guard_basins(sol, x, y, w, r0, bounds, guard, rng, info) -> None:
    """Replace warm-started optima by better ones from other basins (in place)."""
    k = y.shape[0]
    if guard == "all":
        alt = solve_batch(x, y, w, r0, bounds, top=1)
        _take_better(sol, alt, np.arange(k), alt.rss < sol.rss * (1 - 1e-9), info)
        return
    # "screen": resamples whose warm start failed get the full multi-start solve. The others are
    # screened on the solver's start grid: where a resample's best grid point lies in another
    # part of the grid with a residual sum of squares within 25% of its warm optimum's (the
    # threshold the single fit uses to refine a second basin), that point is refined. A random
    # 128 are screened first; only if one of them switches basin are all screened (if none of
    # 128 switched, the chance that more than 2.3% of all would is below 5%: 0.977^128).
    failed = np.flatnonzero(~sol.converged)
    if failed.size:
        alt = solve_batch(x, y[failed], w[failed], r0, bounds, top=1)
        _take_better(sol, alt, failed, alt.rss < sol.rss[failed] * (1 - 1e-9), info)
    sample = np.sort(rng.choice(k, size=min(k, 128), replace=False))
    if _screen(sol, x, y, w, r0, bounds, sample, info) and sample.size < k:
        _screen(sol, x, y, w, r0, bounds, np.setdiff1d(np.arange(k), sample), info)


def _screen(sol, x, y, w, r0, bounds, rows, info) -> bool:
    """Screen ``rows`` on the start grid and refine promising starts; True if any switched."""
    theta_g, rss_g, steps = coarse_grid(x, y[rows], w[rows], r0)
    theta = np.stack([sol.log_B[rows], sol.m[rows]], axis=1)
    elsewhere = np.any(np.abs(theta_g - theta) > 1.5 * steps, axis=1)
    suspect = sol.converged[rows] & elsewhere & (rss_g < 1.25 * sol.rss[rows])
    info["guard_screened"] = info.get("guard_screened", 0) + rows.size
    if not suspect.any():
        return False
    idx = rows[suspect]
    alt = solve_batch(x, y[idx], w[idx], r0, bounds, theta0=theta_g[suspect])
    better = alt.rss < sol.rss[idx] * (1 - 1e-9)
    _take_better(sol, alt, idx, better, info)
    return bool(better.any())


def _take_better(sol, alt, idx, better, info) -> None:
    info["guard_checked"] = info.get("guard_checked", 0) + idx.size
    info["basin_switches"] = info.get("basin_switches", 0) + int(better.sum())
    rows = idx[better]
    for attr in ("A", "R0", "log_B", "m", "rss", "converged"):
        getattr(sol, attr)[rows] = getattr(alt, attr)[better]


def _ensure_enough_points(wk, n_free, rng, kind, run_labels, w):
    """Redraw pairs/run resamples that hold fewer distinct points than free parameters."""
    n = w.size
    for _ in range(100):
        bad = np.count_nonzero(wk > 0, axis=1) < n_free + 1
        if not bad.any():
            return wk
        _, redrawn = _resample(kind, rng, int(bad.sum()), None, None, w, run_labels, 0, 0, 0, 0)
        wk = wk.copy()
        wk[bad] = redrawn
    raise RLCurvesError(f"cannot draw resamples with at least {n_free + 1} of {n} points")


def _progress(iterable, enabled: bool, desc: str, sizes: list[int] | None = None):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    if sizes is None:
        return tqdm(iterable, desc=desc, leave=False)
    return _counted(iterable, sizes, tqdm(total=sum(sizes), desc=desc, leave=False, unit="fit"))


def _counted(iterable, sizes, bar):
    """Iterate over chunks while the bar counts resamples (1000 fits, not "0/1" chunk)."""
    with bar:
        for item, size in zip(iterable, sizes, strict=True):
            yield item
            bar.update(size)
