"""The pre-training power law ``R = A - D / C^B`` as a fitted alternative, and model comparison.

The paper (ScaleRL, Fig. 2 and Sec. 2) shows that this form, the sigmoid's limit for C >> C_mid,
extrapolates RL curves badly: fitted on the part of a run that still bends it overshoots the
ceiling. :func:`compare_models` lets a user see that on their own data: information criteria on the
fitted window and, more telling, the error of a forecast of the latter part of the run from a fit
on the earlier part.

The fit is exact and start-free in the same way as the sigmoid's: for fixed B the curve is linear
in ``(A, D)``, which are solved in closed form (with A's box bound), leaving a one-dimensional
search over ``log B`` (a dense grid, then a bounded Brent refinement around the best grid point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar

from ._data import resolve_xy
from ._format import format_compute
from .errors import RLCurvesError
from .model import power_law
from .result import gaussian_aic, gaussian_bic

POWER_LAW_EQUATION = "R(C) = A - D / C^B"
_LOG_B_RANGE = (math.log(1e-3), math.log(20.0))


@dataclass(eq=False, repr=False)
class PowerLawFit:
    """A fitted power law ``R(C) = A - D / C^B``.

    Attributes
    ----------
    A, D, B : float
        Asymptote, scale (``D = (A - R0) C_mid^B`` in the sigmoid's terms) and exponent.
    params, stderr : dict
        Estimates and asymptotic standard errors by name (``inf``: not determined).
    rss, n, dof, aic, bic
        Fit statistics over the window, comparable with :class:`~rlcurves.SigmoidFit`'s (same
        Gaussian likelihood, noise variance profiled out).
    A_at_bound : bool
        True when A ran into its bound (e.g. 1.0 for a pass rate): the data ask for a ceiling
        beyond the plausible range, the failure the paper describes.
    compute, reward, window
        All the data passed and the mask of points fitted (C > 0 inside the window).

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> pl = rlcurves.fit_power_law("compute", "reward", data=df, min_compute=1500)
    >>> round(float(pl.predict(32_000)), 2), round(pl.bic - pl.aic, 1)
    (0.62, 9.2)
    """

    params: dict[str, float]
    stderr: dict[str, float]
    covar: np.ndarray
    rss: float
    n: int
    dof: int
    A_at_bound: bool
    compute: np.ndarray
    reward: np.ndarray
    window: np.ndarray
    A_bounds: tuple[float, float] = (-np.inf, np.inf)
    min_compute: float | None = None
    max_compute: float | None = None
    label: str | None = None
    message: str = field(default="")

    @property
    def A(self) -> float:
        return self.params["A"]

    @property
    def D(self) -> float:
        return self.params["D"]

    @property
    def B(self) -> float:
        return self.params["B"]

    @property
    def fit_compute(self) -> np.ndarray:
        return self.compute[self.window]

    @property
    def fit_reward(self) -> np.ndarray:
        return self.reward[self.window]

    @property
    def aic(self) -> float:
        """Akaike information criterion (k = 3 curve parameters + the noise variance)."""
        return gaussian_aic(self.rss, self.n, 4)

    @property
    def bic(self) -> float:
        """Bayesian information criterion (k = 4, as :attr:`aic`)."""
        return gaussian_bic(self.rss, self.n, 4)

    def predict(self, compute: ArrayLike) -> np.ndarray | float:
        """The fitted power law at ``compute`` (``-inf`` at C = 0, where the form diverges)."""
        out = power_law(compute, self.A, self.D, self.B)
        return float(out) if np.ndim(compute) == 0 else out

    def compute_to_reach(self, reward: ArrayLike) -> np.ndarray | float:
        """Compute at which the power law reaches ``reward`` (inf at or beyond A)."""
        r = np.asarray(reward, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = self.A - r
            out = np.where(gap > 0, (self.D / gap) ** (1.0 / self.B), np.inf)
        return float(out) if np.ndim(reward) == 0 else out

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python summary (JSON-serializable)."""
        return {
            "model": POWER_LAW_EQUATION,
            "params": {k: float(v) for k, v in self.params.items()},
            "stderr": {k: float(v) if math.isfinite(v) else str(v) for k, v in self.stderr.items()},
            "rss": float(self.rss),
            "n": int(self.n),
            "dof": int(self.dof),
            "A_at_bound": bool(self.A_at_bound),
            "message": self.message,
        }

    def summary(self) -> str:
        """A short readable report."""
        lines = [f"[[Power-law fit{'' if self.label is None else ': ' + self.label}]]"]
        lines.append(f"    model       = {POWER_LAW_EQUATION}")
        lines.append(f"    data points = {self.n}, dof = {self.dof}, RSS = {self.rss:.6g}")
        for name in ("A", "D", "B"):
            lines.append(f"    {name:<3} = {self.params[name]:.6g} +/- {self.stderr[name]:.3g}")
        if self.message:
            lines.append(f"    note: {self.message}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        p = self.params
        return f"PowerLawFit(A={p['A']:.4g}, D={p['D']:.4g}, B={p['B']:.4g}, n={self.n})"


def fit_power_law(
    compute: ArrayLike | str,
    reward: ArrayLike | str,
    *,
    data: pd.DataFrame | None = None,
    min_compute: float | None = None,
    max_compute: float | None = None,
    sigma: ArrayLike | str | None = None,
    bounds: str | tuple[float, float] | None = "auto",
    label: str | None = None,
) -> PowerLawFit:
    """Fit ``R(C) = A - D / C^B`` by least squares (exact in A and D, 1-D search over B).

    Parameters
    ----------
    compute, reward : array_like or str
        The curve, or column names of ``data``. Points with C = 0 are left out (the form
        diverges there).
    data : pandas.DataFrame, optional
        Table holding the named columns.
    min_compute, max_compute : float, optional
        Fit window (inclusive), as in :func:`rlcurves.fit_sigmoid`.
    sigma : array_like or str, optional
        Per-point standard deviations (weights ``1 / sigma``).
    bounds : "auto", None or (lower, upper)
        Bounds on A. "auto": [0, 1] when every reward is in [0, 1] (a pass rate), else none.
        This is what lets the fit report "A = 1.0" the way the paper's did.
    label : str, optional
        A name carried by the result.

    Returns
    -------
    PowerLawFit

    Raises
    ------
    RLCurvesError
        Bad input, or fewer than 4 positive-compute points in the window.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> pl = rlcurves.fit_power_law("compute", "reward", data=df, min_compute=1500)
    >>> print(f"A = {pl.A:.2f}, B = {pl.B:.1f}")
    A = 0.64, B = 0.9
    """
    c, r, s = resolve_xy(compute, reward, data, sigma)
    window = c > 0
    if min_compute is not None:
        window &= c >= min_compute
    if max_compute is not None:
        window &= c <= max_compute
    if window.sum() < 4:
        raise RLCurvesError(
            f"only {int(window.sum())} point(s) with compute > 0 in the window; the power law "
            "needs at least 4 (3 parameters and one degree of freedom). Widen the window.",
            n_points=int(window.sum()),
        )
    a_bounds = _a_bounds(bounds, r)
    cw, rw = c[window], r[window]
    w = np.ones(cw.size) if s is None else 1.0 / s[window]
    log_c = np.log(cw)

    grid = np.linspace(*_LOG_B_RANGE, 241)
    values = _solve_linear_grid(log_c, rw, w, np.exp(grid), a_bounds)[2]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    best_x, best_fun = _bounded_search(log_c, rw, w, a_bounds, lo, hi)
    log_b = best_x if best_fun <= values[i] else float(grid[i])
    B = math.exp(log_b)
    A, D, rss = _solve_linear(log_c, rw, w, B, a_bounds)
    at_bound = any(math.isfinite(b) and abs(A - b) <= 1e-9 * (1 + abs(b)) for b in a_bounds)
    covar, stderr = _covariance(log_c, rw, w, A, D, B, rss, fixed_a=at_bound)
    notes = []
    if at_bound:
        notes.append(
            f"A ran into its bound {A:g}: the data ask for a ceiling beyond the plausible range "
            "(the power law's known failure on curves that still bend)"
        )
    if log_b in (_LOG_B_RANGE[0], _LOG_B_RANGE[1]) or i in (0, grid.size - 1):
        notes.append(f"B = {B:.3g} sits at the edge of the searched range")
    return PowerLawFit(
        params={"A": A, "D": D, "B": B},
        stderr=stderr,
        covar=covar,
        rss=rss,
        n=int(cw.size),
        dof=int(cw.size - (2 if at_bound else 3)),
        A_at_bound=at_bound,
        compute=c,
        reward=r,
        window=window,
        A_bounds=a_bounds,
        min_compute=min_compute,
        max_compute=max_compute,
        label=label,
        message="; ".join(notes),
    )


def fit_power_law_batch(
    compute: np.ndarray, rewards: np.ndarray, a_bounds: tuple[float, float] = (-np.inf, np.inf)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares ``(A, D, B)`` of every row of ``rewards`` (k, n) on a shared ``compute``
    (n,) with C > 0: the grid of :func:`fit_power_law` for all rows at once, refined by a
    parabola through the best grid point and its neighbours in ``log B`` (the bootstrap's
    refits; one fit a user asked for gets the bounded Brent refinement).

    Returns three arrays of shape ``(k,)``; a row whose fit is not finite holds NaN.
    """
    y = np.atleast_2d(np.asarray(rewards, dtype=float))
    log_c = np.log(np.asarray(compute, dtype=float))
    grid = np.linspace(*_LOG_B_RANGE, 241)
    if COMPILED:
        from ._powerlaw_kernels import grid_log_b, grid_sums

        log_b = np.empty(y.shape[0])
        sums = grid_sums(log_c, y, np.exp(grid))
        grid_log_b(*sums[:2], log_c.size, *sums[2:], *map(float, a_bounds), grid, log_b)
    else:
        rss = _batch_rss(log_c, y, np.exp(grid), a_bounds)[2]
        rss = np.where(np.isfinite(rss), rss, np.inf)
        i = np.clip(np.argmin(rss, axis=1), 1, grid.size - 2)
        rows = np.arange(y.shape[0])
        r_lo, r_mid, r_hi = rss[rows, i - 1], rss[rows, i], rss[rows, i + 1]
        step = grid[1] - grid[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            curv = r_lo - 2 * r_mid + r_hi
            shift = np.where(curv > 0, 0.5 * (r_lo - r_hi) / curv, 0.0)
        log_b = grid[i] + step * np.clip(np.nan_to_num(shift), -1.0, 1.0)
    A, D, _ = _batch_rss(log_c, y, np.exp(log_b), a_bounds, paired=True)
    B = np.exp(log_b)
    bad = ~(np.isfinite(A) & np.isfinite(D))
    return np.where(bad, np.nan, A), np.where(bad, np.nan, D), np.where(bad, np.nan, B)


def _bounded_search(log_c, y, w, a_bounds, lo: float, hi: float) -> tuple[float, float]:
    """The RSS's minimum over log B in ``[lo, hi]`` (tolerance 1e-10): scipy's bounded scalar
    search, compiled (:func:`rlcurves._powerlaw_kernels.bounded_search`) unless
    :data:`COMPILED` is off."""
    if COMPILED:
        from ._powerlaw_kernels import bounded_search

        x, fun, _, _ = bounded_search(
            log_c, y, w, *map(float, a_bounds), float(lo), float(hi), 1e-10, 500
        )
        return float(x), float(fun)

    def rss_at(log_b: float) -> float:
        return float(_solve_linear_grid(log_c, y, w, np.array([math.exp(log_b)]), a_bounds)[2][0])

    best = minimize_scalar(rss_at, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    return float(best.x), float(best.fun)


#: The power law's fits run their grid and search compiled (:mod:`rlcurves._powerlaw_kernels`);
#: False: in numpy and scipy as before (benchmarks and tests compare the two).
COMPILED = True


def _batch_rss(log_c, y, B, a_bounds, *, paired: bool = False):
    """``(A, D, rss)`` of rows ``y`` (k, n) at exponents ``B``: every row at every exponent
    (shape (k, len(B))), or row ``j`` at ``B[j]`` (``paired``, shape (k,)); unweighted, A
    clipped to its box as in :func:`_solve_linear_grid`."""
    u = np.exp(-np.outer(B, log_c))  # (n_B, n)
    n = log_c.size
    sy, syy = y.sum(axis=1), np.einsum("ij,ij->i", y, y)
    su, suu = u.sum(axis=1), np.einsum("ij,ij->i", u, u)
    if paired:
        suy = np.einsum("ij,ij->i", y, u)
    else:
        suy = y @ u.T
        sy, syy = sy[:, None], syy[:, None]
    det = n * suu - su * su
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        A = (sy * suu - su * suy) / det
        D = (sy * su - n * suy) / det
        lo, hi = a_bounds
        out = ~((A >= lo) & (A <= hi))
        if np.any(out):
            Ac = np.clip(np.where(np.isfinite(A), A, lo if np.isfinite(lo) else 0.0), lo, hi)
            Dc = (Ac * su - suy) / np.maximum(suu, 1e-300)
            A, D = np.where(out, Ac, A), np.where(out, Dc, D)
        rss = syy - 2 * A * sy + 2 * D * suy + A * A * n - 2 * A * D * su + D * D * suu
    return A, D, rss


def _a_bounds(bounds, reward: np.ndarray) -> tuple[float, float]:
    if bounds is None:
        return (-np.inf, np.inf)
    if isinstance(bounds, str):
        if bounds != "auto":
            raise RLCurvesError(f"bounds must be 'auto', None or (lower, upper), got {bounds!r}")
        is_rate = bool(np.all((reward >= 0) & (reward <= 1)))
        return (0.0, 1.0) if is_rate else (-np.inf, np.inf)
    lo, hi = (float(v) for v in bounds)
    if not lo <= hi:
        raise RLCurvesError(f"bounds on A must satisfy lower <= upper, got {bounds}")
    return (lo, hi)


def _solve_linear_grid(log_c, y, w, B, a_bounds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_solve_linear` for every exponent in the array ``B`` at once (the grid search).

    The weighted normal equations of ``y ~ A - D u`` (``u = C^-B``) are 2 x 2, solved in closed
    form per exponent; where A leaves its box it is clipped and D re-solved, as in the scalar one.
    """
    u = np.exp(-np.outer(B, log_c))  # (n_B, n)
    w2 = w * w
    s0, sy = w2.sum(), np.dot(w2, y)
    su, suu, suy = u @ w2, (u * u) @ w2, u @ (w2 * y)
    det = s0 * suu - su * su
    with np.errstate(divide="ignore", invalid="ignore"):
        A = (sy * suu - su * suy) / det
        D = (sy * su - s0 * suy) / det
        lo, hi = a_bounds
        out = ~((A >= lo) & (A <= hi)) | ~np.isfinite(A)
        if np.any(out):
            Ac = np.clip(np.where(np.isfinite(A), A, lo if np.isfinite(lo) else 0.0), lo, hi)
            Dc = (Ac * su - suy) / np.maximum(suu, 1e-300)
            A, D = np.where(out, Ac, A), np.where(out, Dc, D)
    resid = y[None, :] - A[:, None] + D[:, None] * u
    rss = np.einsum("ij,ij,j->i", resid, resid, w2)
    return A, D, rss


def _solve_linear(log_c, y, w, B, a_bounds) -> tuple[float, float, float]:
    """Weighted least-squares ``(A, D)`` for fixed B, with A clipped to its bounds exactly.

    For a convex quadratic in (A, D) with a box on A only, the constrained optimum has A on the
    violated bound when the unconstrained one is infeasible, and D is then a 1-D least squares.
    """
    u = np.exp(-B * log_c)  # C^-B
    X = np.stack([np.ones_like(u), -u], axis=1) * w[:, None]
    yw = y * w
    (A, D), *_ = np.linalg.lstsq(X, yw, rcond=None)
    lo, hi = a_bounds
    if not lo <= A <= hi:
        A = min(max(A, lo), hi)
        uw = u * w
        D = float(np.dot(uw, (A - y) * w) / max(np.dot(uw, uw), 1e-300))
    resid = yw - X @ np.array([A, D])
    return float(A), float(D), float(np.dot(resid, resid))


def _covariance(log_c, y, w, A, D, B, rss, *, fixed_a: bool):
    u = np.exp(-B * log_c)
    # dR/dA = 1, dR/dD = -C^-B, dR/dB = D C^-B log C
    J = np.stack([np.ones_like(u), -u, D * u * log_c], axis=1) * w[:, None]
    names = ["A", "D", "B"]
    if fixed_a:
        J = J[:, 1:]
    p = J.shape[1]
    dof = J.shape[0] - p
    d = np.sqrt(np.sum(J * J, axis=0))
    cov = np.full((p, p), np.inf)
    if np.all(d > 0) and np.all(np.isfinite(d)):
        scaled = (J.T @ J) / np.outer(d, d)
        eig = np.linalg.eigvalsh(scaled)
        if eig[0] > 1e-13 * eig[-1]:
            cov = np.linalg.inv(scaled) / np.outer(d, d) * (rss / dof if dof > 0 else np.nan)
    diag = np.diag(cov)
    errs = [math.sqrt(v) if 0 <= v < math.inf else math.inf for v in diag]
    stderr = dict(zip(names[1:] if fixed_a else names, errs, strict=True))
    if fixed_a:
        stderr["A"] = math.nan
        stderr = {k: stderr[k] for k in names}
    return cov, stderr


@dataclass(eq=False, repr=False)
class ModelComparison:
    """Sigmoid against power law on one run: information criteria and a held-out forecast.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per model: ``model, n_params, rss, aic, bic, delta_aic, delta_bic, A,
        holdout_rmse, holdout_max_error, forecast_final, observed_final``. The information
        criteria come from fits on the whole window; the hold-out columns from fits on the points
        up to ``split_compute``, forecasting the points after it.
    fits, train_fits : dict
        ``{"sigmoid": SigmoidFit, "power_law": PowerLawFit}`` on the whole window and on the
        training part.
    split_compute : float
        Last compute of the training part.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> mc = rlcurves.compare_models("compute", "reward", data=df, min_compute=1500)
    >>> mc.table[["model", "n_params", "delta_bic"]].round(1)
           model  n_params  delta_bic
    0    sigmoid         4        0.0
    1  power_law         3        7.0
    """

    table: pd.DataFrame
    fits: dict[str, Any]
    train_fits: dict[str, Any]
    split_compute: float
    holdout_compute: np.ndarray
    holdout_reward: np.ndarray

    @property
    def best(self) -> str:
        """The model with the smallest held-out forecast error."""
        return str(self.table.loc[self.table["holdout_rmse"].idxmin(), "model"])

    def summary(self) -> str:
        """The comparison in words and numbers."""
        t = self.table.set_index("model")
        lines = [
            f"[[Model comparison]] fit up to C = {format_compute(self.split_compute)}, forecast "
            f"{self.holdout_compute.size} later point(s) up to "
            f"C = {format_compute(self.holdout_compute.max())}"
        ]
        lines.append(
            "    model       A (train)   held-out RMSE   forecast at end   AIC (full)   BIC (full)"
        )
        for name, row in t.iterrows():
            lines.append(
                f"    {name:<11} {row['A']:>9.3f}   {row['holdout_rmse']:>13.4f}   "
                f"{row['forecast_final']:>15.3f}   {row['aic']:>10.1f}   {row['bic']:>10.1f}"
            )
        lines.append(f"    observed at end: {t['observed_final'].iloc[0]:.3f}")
        other = next(m for m in t.index if m != self.best)
        ratio = t.loc[other, "holdout_rmse"] / max(t.loc[self.best, "holdout_rmse"], 1e-300)
        lines.append(
            f"    {self.best} forecasts the held-out part better ({ratio:.1f}x lower RMSE than "
            f"{other})"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def plot(self, ax=None, **kwargs: Any):
        """See :func:`rlcurves.plot.plot_models`."""
        from .plot import plot_models

        return plot_models(self, ax=ax, **kwargs)


def compare_models(
    compute: ArrayLike | str,
    reward: ArrayLike | str,
    *,
    data: pd.DataFrame | None = None,
    min_compute: float | None = None,
    max_compute: float | None = None,
    fit_fraction: float = 0.5,
    r0: float | None = None,
    label: str | None = None,
) -> ModelComparison:
    """Compare the sigmoid with the power law on one run.

    Parameters
    ----------
    compute, reward, data, min_compute, max_compute
        The run and the fit window, as in :func:`rlcurves.fit_sigmoid`.
    fit_fraction : float
        The training part ends at this fraction of the window's largest compute (0.5: the paper's
        "fit on half the budget" protocol); the points after it are forecast.
    r0 : float, optional
        Fix the sigmoid's R0.
    label : str, optional
        Name carried by the fits.

    Returns
    -------
    ModelComparison

    Raises
    ------
    RLCurvesError
        ``fit_fraction`` outside (0, 1), no points in the window, or none after the split.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> mc = rlcurves.compare_models("compute", "reward", data=df, min_compute=1500)
    >>> list(mc.table["model"])
    ['sigmoid', 'power_law']
    """
    from .fit import fit_sigmoid

    if not 0 < fit_fraction < 1:
        raise RLCurvesError(f"fit_fraction must be in (0, 1), got {fit_fraction}")
    c, r, _ = resolve_xy(compute, reward, data)
    inside = np.ones(c.size, dtype=bool)
    if min_compute is not None:
        inside &= c >= min_compute
    if max_compute is not None:
        inside &= c <= max_compute
    if not inside.any():
        raise RLCurvesError("no points in the window [min_compute, max_compute]")
    split = fit_fraction * float(c[inside].max())
    held = inside & (c > split)
    if held.sum() < 1:
        raise RLCurvesError(f"no points after the split at C = {split:g} to forecast")
    kw = dict(min_compute=min_compute, label=label)
    fits = {
        "sigmoid": _quiet(fit_sigmoid, c, r, r0=r0, max_compute=max_compute, **kw),
        "power_law": _quiet(fit_power_law, c, r, max_compute=max_compute, **kw),
    }
    train = {
        "sigmoid": _quiet(fit_sigmoid, c, r, r0=r0, max_compute=split, **kw),
        "power_law": _quiet(fit_power_law, c, r, max_compute=split, **kw),
    }
    ch, rh = c[held], r[held]
    last = int(np.argmax(ch))
    rows = []
    for name in fits:
        err = np.asarray(train[name].predict(ch)) - rh
        rows.append(
            {
                "model": name,
                "n_params": 4 if name == "sigmoid" and r0 is None else 3,
                "rss": fits[name].rss,
                "aic": fits[name].aic,
                "bic": fits[name].bic,
                "A": train[name].A,
                "holdout_rmse": float(np.sqrt(np.mean(err**2))),
                "holdout_max_error": float(np.max(np.abs(err))),
                "forecast_final": float(train[name].predict(ch[last])),
                "observed_final": float(rh[last]),
            }
        )
    table = pd.DataFrame(rows)
    table.insert(5, "delta_aic", table["aic"] - table["aic"].min())
    table.insert(6, "delta_bic", table["bic"] - table["bic"].min())
    return ModelComparison(table, fits, train, split, ch, rh)


def _quiet(fn, *args, **kwargs):
    # Identifiability notes matter for one fit a user asked for; inside a comparison the table
    # says what matters, and a prefix of a run is expected to identify C_mid poorly.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)
