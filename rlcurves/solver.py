"""The exact, start-free least-squares solver for the sigmoid, batched across curves.

Given ``(B, C_mid)`` the curve ``R0 + (A - R0) s`` is linear in ``(A, R0)``, so the problem is
solved by variable projection: the linear parameters are eliminated exactly (with their box
bounds, in closed form) and only two nonlinear ones remain, ``theta = (log B, m = log C_mid)``.
A coarse grid over ``theta`` scaled to the data's span in log compute finds every basin; a batched
Levenberg-Marquardt on the projected residual refines the best few grid minima of every curve at
once; a Gauss-Newton step in the full parameters with the analytic Jacobian polishes the optimum to
machine precision. The per-curve loops are compiled (numba, :mod:`rlcurves._kernels`) and a batch
of curves or bootstrap resamples runs them in parallel, so a fit costs its arithmetic, not numpy's
call overhead on arrays of a hundred numbers. The kernels compile on first use (or load from
numba's on-disk cache), never at import.

All arrays here are already validated; the public entry point is :func:`rlcurves.fit_sigmoid`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from . import _kernels as K
from ._warmup import notice_if_cold
from .model import fraction_of_gain, jacobian_internal

# a fresh install's first fit compiles the kernels (tens of seconds): say so before it happens
notice_if_cold()


@dataclass
class Bounds:
    """Box bounds on the linear parameters (infinite means unbounded)."""

    A: tuple[float, float] = (-np.inf, np.inf)
    R0: tuple[float, float] = (-np.inf, np.inf)


@dataclass
class BatchSolution:
    """Optimum of every curve in a batch (arrays of shape ``(k,)``)."""

    A: np.ndarray
    R0: np.ndarray
    log_B: np.ndarray
    m: np.ndarray
    rss: np.ndarray
    converged: np.ndarray
    at_theta_bound: np.ndarray
    iterations: np.ndarray


def _bnd(bounds: Bounds) -> np.ndarray:
    return np.array([bounds.A[0], bounds.A[1], bounds.R0[0], bounds.R0[1]], dtype=float)


def _r0_args(r0: float | None) -> tuple[bool, float]:
    return (False, 0.0) if r0 is None else (True, float(r0))


def theta_box(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-curve scale of the problem: (lower, upper) bounds on theta and the log-compute span.

    B is searched relative to the data's span in log compute (B * span is what shapes the curve
    inside the data) and C_mid within five spans of the data on either side; beyond that the data
    cannot tell the midpoint apart and the fit reports it as not identified.
    """
    finite = np.where(np.isfinite(x), x, np.nan)
    x_lo = np.nanmin(finite, axis=-1)
    x_hi = np.nanmax(finite, axis=-1)
    span = np.maximum(x_hi - x_lo, 1e-3 * np.maximum(1.0, np.abs(x_hi)))
    lo = np.stack([np.log(1e-2 / span), x_lo - 5 * span], axis=-1)
    hi = np.stack([np.log(1e3 / span), x_hi + 5 * span], axis=-1)
    return lo, hi, span


def solve_batch(x, y, w, r0, bounds, *, top: int = 3, theta0=None) -> BatchSolution:
    """Fit every curve of a batch: grid starts (or ``theta0``), LM, polish; curves in parallel.

    Parameters
    ----------
    x : ndarray, shape (n,) or (k, n)
        Log compute (``-inf`` for C = 0).
    y, w : ndarray, shape (k, n)
        Rewards and weights (``1 / sigma``; a zero weight drops a point, as resampling does).
    r0 : float or None
        Fixed R0, or None to fit it.
    bounds : Bounds
        Box bounds on A and R0.
    top : int
        Grid minima refined per curve (multi-start; guards against a second basin).
    theta0 : ndarray, shape (k, 2), optional
        Warm starts (``log B``, ``log C_mid``); skips the grid (bootstrap around a known optimum).
    """
    y = np.ascontiguousarray(y, dtype=float)
    k, n = y.shape
    w = np.ascontiguousarray(np.broadcast_to(w, (k, n)), dtype=float)
    x2 = np.ascontiguousarray(np.atleast_2d(np.asarray(x, dtype=float)))
    if theta0 is None:
        starts, use_grid = np.empty((k, 1, 2)), True
    else:
        starts = np.ascontiguousarray(np.asarray(theta0, dtype=float).reshape(k, 1, 2))
        use_grid = False
    fixed, r0v = _r0_args(r0)
    out = K.solve_batch(x2, y, w, fixed, r0v, _bnd(bounds), int(top), starts, use_grid, 200)
    return BatchSolution(
        A=out[:, 0].copy(),
        R0=out[:, 1].copy(),
        log_B=out[:, 2].copy(),
        m=out[:, 3].copy(),
        rss=out[:, 4].copy(),
        converged=out[:, 5] > 0,
        at_theta_bound=out[:, 6] > 0,
        iterations=out[:, 7].astype(int),
    )


def warm_refit(x, y, w, r0, bounds: Bounds, start, *, max_iter: int = 60) -> BatchSolution:
    """Refit every row of ``y, w`` (k, n) from one start, the bootstrap's batched refit.

    Levenberg-Marquardt in the full parameters with the analytic Jacobian from ``start`` =
    ``(A, R0, log B, m)`` (the original optimum), rows in parallel, (log B, m) kept in each row's
    search box. ``converged`` marks rows that converged strictly inside the bounds and the box;
    the others are refitted by :func:`solve_batch`, warm-started at ``start`` as well.
    ``x`` (n,) is shared; integer (or any) weights per resample in ``w``.
    """
    y = np.ascontiguousarray(y, dtype=float)
    k, n = y.shape
    w = np.ascontiguousarray(np.broadcast_to(w, (k, n)), dtype=float)
    x = np.ascontiguousarray(x, dtype=float)
    fixed, r0v = _r0_args(r0)
    p0 = np.array(start, dtype=float)
    if fixed:
        p0[1] = r0v
    out = np.empty((k, 6))
    K.warm_lm_batch(x, y, w, fixed, r0v, _bnd(bounds), p0, int(max_iter), out)
    sol = BatchSolution(
        A=out[:, 0].copy(),
        R0=out[:, 1].copy(),
        log_B=out[:, 2].copy(),
        m=out[:, 3].copy(),
        rss=out[:, 4].copy(),
        converged=out[:, 5] > 0,
        at_theta_bound=np.zeros(k, dtype=bool),
        iterations=np.zeros(k, dtype=int),
    )
    rest = np.flatnonzero(~sol.converged)
    if rest.size:
        theta0 = np.tile(p0[2:], (rest.size, 1))
        alt = solve_batch(x, y[rest], w[rest], r0, bounds, theta0=theta0)
        for attr in ("A", "R0", "log_B", "m", "rss", "converged", "at_theta_bound"):
            getattr(sol, attr)[rest] = getattr(alt, attr)
    return sol


#: How the bounded fits are polished: ``"compiled"`` (:func:`rlcurves._trf.bounded_polish`, scipy's
#: trust-region reflective algorithm compiled, which stops where scipy's stops) or ``"scipy"``
#: (``scipy.optimize.least_squares(method="trf")`` itself, as before; benchmarks compare them).
POLISH = "compiled"

#: How many of the latest :func:`solve_single` answers are remembered (0: none).
SOLVED_KEEP = 256
_solved: OrderedDict[bytes, BatchSolution] = OrderedDict()
_solved_lock = threading.Lock()


def _key(x, y, w, r0, bounds: Bounds) -> bytes:
    """The exact inputs of one fit, as bytes: equal keys, equal problems."""
    head = np.array([x.size, np.nan if r0 is None else r0, *_bnd(bounds)], dtype=float)
    return b"".join(a.tobytes() for a in (head, x, y, w))


def _copy(sol: BatchSolution) -> BatchSolution:
    return BatchSolution(*(getattr(sol, f).copy() for f in BatchSolution.__dataclass_fields__))


def solve_single(x, y, w, r0, bounds) -> BatchSolution:
    """Fit one curve: grid starts, then Levenberg-Marquardt in the full parameters.

    LM with the analytic Jacobian is the fastest way to the last digits of one optimum. Every grid
    basin whose RSS is within 25% of the best is refined; a result must lie inside the bounds and
    the search box, otherwise (an optimum on a bound, or a curve that does not identify its
    midpoint) the bounded solver decides that basin. Finally every other grid minimum within 25%
    of the best RSS found is refined too: noisy, nearly flat curves have many shallow basins of
    similar depth, and the best grid point is then no reliable guide.

    The latest :data:`SOLVED_KEEP` answers are remembered by their exact inputs: a forecast's
    backtests and a running run's window backtests fit the same prefix of a run more than once
    (and the bounded polish of a curve whose midpoint runs away crawls for up to 2,000 steps), so a
    repeat gets a copy of the first answer instead of a second solve.
    """
    x = np.ascontiguousarray(x, dtype=float)
    y = np.ascontiguousarray(y, dtype=float)
    w = np.ascontiguousarray(w, dtype=float)
    if SOLVED_KEEP <= 0:
        return _solve_single(x, y, w, r0, bounds)
    key = _key(x, y, w, r0, bounds)
    with _solved_lock:
        known = _solved.get(key)
        if known is not None:
            _solved.move_to_end(key)
            return _copy(known)
    best = _solve_single(x, y, w, r0, bounds)
    with _solved_lock:
        _solved[key] = _copy(best)
        while len(_solved) > SOLVED_KEEP:
            _solved.popitem(last=False)
    return best


def _solve_single(x, y, w, r0, bounds) -> BatchSolution:
    """:func:`solve_single` without the memory."""
    fixed, r0v = _r0_args(r0)
    top = K.GRID_TOP_SINGLE
    thetas, grid_rss = np.empty((top, 2)), np.empty(top)
    refined = np.zeros(top, dtype=np.bool_)
    out = np.empty(5)
    found, left_the_box = K.solve_single(
        x, y, w, fixed, r0v, _bnd(bounds), thetas, grid_rss, refined, out
    )
    best = None
    if found:
        A, R0, lb, m, rss = out
        best = _one_solution(A, R0, lb, m, rss, converged=True, at_bound=False)
    if best is None or left_the_box:
        # Some basin's optimum lies on a bound or beyond the search box: the bounded solver
        # decides, and the better of the two answers wins.
        bounded = _bounded_single(x, y, w, r0, bounds)
        if best is None or bounded.rss[0] < best.rss[0] * (1 - 1e-12):
            best = bounded
    extra = ~refined & (grid_rss <= 1.25 * best.rss[0])
    if extra.any():
        other = _bounded_single(x, y, w, r0, bounds, starts=thetas[extra])
        if other.rss[0] < best.rss[0] * (1 - 1e-12):
            best = other
    return best


def _one_solution(A, R0, lb, m, rss, *, converged: bool, at_bound: bool, iterations: int = 0):
    one = lambda v: np.array([v], dtype=float)  # noqa: E731
    return BatchSolution(
        A=one(A),
        R0=one(R0),
        log_B=one(lb),
        m=one(m),
        rss=one(rss),
        converged=np.array([converged]),
        at_theta_bound=np.array([at_bound]),
        iterations=np.array([iterations]),
    )


def _bounded_single(x, y, w, r0, bounds, starts=None) -> BatchSolution:
    """The optimum of one curve when bounds are active or the midpoint runs away.

    The bounded variable-projection LM finds the basin (its linear parameters respect the box
    exactly), from the grid or from ``starts`` (t, 2) refined side by side; a trust-region
    reflective polish in the full parameters, with the bounds on A and R0 and the search box on
    (log B, m), then settles the last digits, which the projected problem, non-smooth where a
    bound switches on, reaches only slowly. The polish is scipy's ``least_squares(method="trf")``
    compiled (:func:`rlcurves._trf.bounded_polish`, :data:`POLISH`): the same iterates, bit for
    bit where the arithmetic is numpy's, 20-27x faster (a step-shaped fit of a few points crawls
    up log B for up to 2,000 evaluations, tens of milliseconds each call in Python).
    """
    from ._trf import available as polish_available
    from ._trf import bounded_polish

    if starts is None:
        sol = solve_batch(x, y[None], w[None], r0, bounds)
    else:
        t = len(starts)
        many = solve_batch(
            x, np.repeat(y[None], t, 0), np.repeat(w[None], t, 0), r0, bounds, theta0=starts
        )
        i = int(np.argmin(np.where(np.isfinite(many.rss), many.rss, np.inf)))
        sol = BatchSolution(
            *(getattr(many, f)[i : i + 1] for f in BatchSolution.__dataclass_fields__)
        )
    lo, hi, _ = theta_box(x[None])
    free_r0 = r0 is None
    A = float(sol.A[0])
    p0 = [A, float(sol.R0[0]), sol.log_B[0], sol.m[0]] if free_r0 else [A, sol.log_B[0], sol.m[0]]
    lower = [bounds.A[0], bounds.R0[0], lo[0, 0], lo[0, 1]]
    upper = [bounds.A[1], bounds.R0[1], hi[0, 0], hi[0, 1]]
    if not free_r0:
        lower, upper = [lower[0], *lower[2:]], [upper[0], *upper[2:]]

    p0 = np.clip(p0, lower, upper)
    # not looser than 1e-15: where a step-shaped fit stops along log B moves the resamples
    # warm-started from it, and the calibration with them (docs/benchmarks/race_scale.md)
    tols = {"xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15, "max_nfev": 2000}
    polish = bounded_polish if POLISH == "compiled" and polish_available() else scipy_polish
    with np.errstate(over="ignore", invalid="ignore"):
        x_opt, cost, nfev, status = polish(
            x, y, w, r0, np.asarray(p0, dtype=float), np.array(lower, dtype=float),
            np.array(upper, dtype=float), **tols,
        )  # fmt: skip
    rss = float(2 * cost)
    if not (np.isfinite(rss) and rss <= sol.rss[0]):
        return sol
    A, R0, lb, m = (*x_opt[:1], r0, *x_opt[1:]) if r0 is not None else x_opt
    tol = 1e-6 * (hi[0] - lo[0])
    at_bound = bool(np.any((np.array([lb, m]) - lo[0] < tol) | (hi[0] - np.array([lb, m]) < tol)))
    converged = (status > 0 or bool(sol.converged[0])) and not at_bound
    return _one_solution(A, R0, lb, m, rss, converged=converged, at_bound=at_bound, iterations=nfev)


def scipy_polish(x, y, w, r0, p0, lower, upper, **tols) -> tuple[np.ndarray, float, int, int]:
    """``scipy.optimize.least_squares(method="trf")`` on the weighted sigmoid residual with the
    analytic Jacobian, in the full parameters ``[A, R0, log B, m]`` (``[A, log B, m]`` with
    ``r0`` fixed), bounded by ``lower``, ``upper``: ``(x, cost, nfev, status)``, the polish
    :func:`rlcurves._trf.bounded_polish` compiles (:data:`POLISH` ``"scipy"`` runs this one)."""
    from scipy.optimize import least_squares

    free_r0 = r0 is None

    def unpack(p):
        return (p[0], p[1], p[2], p[3]) if free_r0 else (p[0], r0, p[1], p[2])

    def residual(p):
        A, R0, lb, m = unpack(p)
        return w * (y - R0 - (A - R0) * fraction_of_gain(x, np.exp(lb), m))

    def jacobian(p):
        A, R0, lb, m = unpack(p)
        J = jacobian_internal(x, A, R0, np.exp(lb), m)
        return -(J if free_r0 else J[:, [0, 2, 3]]) * w[:, None]

    res = least_squares(residual, p0, jac=jacobian, bounds=(lower, upper), method="trf", **tols)
    return res.x, float(res.cost), int(res.nfev), int(res.status)
