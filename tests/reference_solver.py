"""The numpy solver as it was before the numba kernels: the reference tests/test_kernels.py compares
the compiled solver with (kept verbatim, not used at run time).

Given ``(B, C_mid)`` the curve ``R0 + (A - R0) s`` is linear in ``(A, R0)``, so the problem is
solved by variable projection: the linear parameters are eliminated exactly (with their box
bounds, in closed form) and only two nonlinear ones remain, ``theta = (log B, m = log C_mid)``.
A coarse grid over ``theta`` scaled to the data's span in log compute finds every basin; a batched
Levenberg-Marquardt on the projected residual refines the best few grid minima of every curve at
once; a Gauss-Newton step in the full parameters with the analytic Jacobian polishes the optimum to
machine precision. Everything is vectorized over a leading batch axis, so a sweep of many curves or
a thousand bootstrap resamples costs a few array passes, not a Python loop of fits.

All arrays here are already validated; the public entry point is :func:`rlcurves.fit_sigmoid`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlcurves.model import fraction_of_gain, jacobian_internal

_TINY = 1e-300


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


def _wsum(a: np.ndarray) -> np.ndarray:
    return a.sum(axis=-1)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Contract the last axis with broadcasting; einsum avoids materializing the product.
    return np.einsum("...n,...n->...", a, b)


def linear_params(s, y, w2, r0: float | None, bounds: Bounds):
    """Least-squares ``(A, R0)`` for fixed ``s``, exactly, within the box bounds.

    ``s``, ``y`` and ``w2`` (squared weights) broadcast to ``(..., n)``. Returns ``(A, R0, q)``
    where ``q`` is the RSS minus ``sum(w2 * y**2)`` (see :func:`linear_params_from_moments`).
    """
    w2y = w2 * y
    moments = (_dot(s, w2), _dot(s * s, w2), _dot(s, w2y), _wsum(w2 + 0.0 * y), _wsum(w2y))
    return linear_params_from_moments(*moments, r0, bounds)


def linear_params_from_moments(sw, svv, svy, tw, ty, r0: float | None, bounds: Bounds):
    """Exact bounded ``(A, R0)`` from the weighted moments of ``s`` and ``y``.

    ``sw = sum w2 s``, ``svv = sum w2 s^2``, ``svy = sum w2 s y``, ``tw = sum w2``,
    ``ty = sum w2 y``. Returns ``(A, R0, q)``, ``q`` being the RSS minus ``sum(w2 y^2)`` (a
    quadratic form of the moments: good for ranking grid points; residuals are recomputed directly
    where precision matters). For a convex quadratic in two variables the constrained optimum is
    the unconstrained one when feasible and otherwise lies on one of the four edges, each a clipped
    one-dimensional problem: all are computed and the best kept.
    """
    a_lo, a_hi = bounds.A
    if r0 is not None:
        svd = svy - r0 * sw  # sum w2 s (y - r0)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(svv > _TINY, svd / svv, 0.0)
        A = np.clip(r0 + gain, a_lo, a_hi)
        g = A - r0
        q = g * g * svv - 2 * g * svd
        return A, np.full_like(A, r0), q

    suv = sw - svv
    suu = tw - 2 * sw + svv
    suy = ty - svy
    det = suu * svv - suv * suv
    regular = det > 1e-12 * suu * svv + _TINY
    with np.errstate(divide="ignore", invalid="ignore"):
        R0 = (svv * suy - suv * svy) / det
        A = (suu * svy - suv * suy) / det
    if not np.all(regular):
        # s is (numerically) constant over the points: the curve is flat there, so A and R0 are not
        # separately identified; use the flat fit (both equal to the weighted mean).
        mean = ty / tw
        A = np.where(regular, A, mean)
        R0 = np.where(regular, R0, mean)

    def objective(a, r):
        return r * r * suu + 2 * a * r * suv + a * a * svv - 2 * (r * suy + a * svy)

    r_lo, r_hi = bounds.R0
    feasible = (A >= a_lo) & (A <= a_hi) & (R0 >= r_lo) & (R0 <= r_hi)
    if np.all(feasible):
        return A, R0, objective(A, R0)
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = []
        for a_fixed in (a_lo, a_hi):
            if np.isfinite(a_fixed):
                r = np.clip(np.where(suu > _TINY, (suy - a_fixed * suv) / suu, 0.0), r_lo, r_hi)
                candidates.append((np.full_like(r, a_fixed), r))
        for r_fixed in (r_lo, r_hi):
            if np.isfinite(r_fixed):
                a = np.clip(np.where(svv > _TINY, (svy - r_fixed * suv) / svv, 0.0), a_lo, a_hi)
                candidates.append((a, np.full_like(a, r_fixed)))
    best_a, best_r = np.clip(A, a_lo, a_hi), np.clip(R0, r_lo, r_hi)
    best_obj = objective(best_a, best_r)
    for a, r in candidates:
        obj = objective(a, r)
        better = obj < best_obj
        best_a, best_r, best_obj = (
            np.where(better, a, best_a),
            np.where(better, r, best_r),
            np.where(better, obj, best_obj),
        )
    A, R0 = np.where(feasible, A, best_a), np.where(feasible, R0, best_r)
    return A, R0, objective(A, R0)


def projected_residuals(theta, x, y, w, r0, bounds):
    """Weighted residuals at the exact linear optimum for nonlinear parameters ``theta``.

    ``theta`` has shape ``(..., 2)`` = (log B, m); ``x, y, w`` broadcast to ``(..., n)``.
    Returns ``(residuals, A, R0)``.
    """
    B = np.exp(theta[..., 0])[..., None]
    m = theta[..., 1][..., None]
    s = fraction_of_gain(x, B, m)
    A, R0, _ = linear_params(s, y, w * w, r0, bounds)
    fitted = R0[..., None] + (A - R0)[..., None] * s
    return w * (y - fitted), A, R0


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


_UNIT_M = np.linspace(-0.5, 2.0, 18)  # C_mid from half a span below the data to a span above
_LOG_B_TIMES_SPAN = np.log(np.geomspace(0.3, 60.0, 14))  # B * span from a gentle to a sharp rise


def grid_starts(x, y, w, r0, bounds, *, top: int = 3, with_rss: bool = False):
    """Best local minima of the projected RSS on a grid over theta: shape ``(k, top, 2)``.

    ``x`` is ``(n,)`` or ``(k, n)``; ``y``, ``w`` are ``(k, n)``. The grid is scaled to each
    curve's span in log compute, so it is the same problem for GPU-hours and FLOPs. Linear
    parameters are solved exactly within their bounds (ranking by the unbounded RSS would favour
    basins whose A lies far outside [0, 1] for a pass rate). With ``with_rss`` also returns the
    grid RSS of each start.
    """
    k = y.shape[0]
    x2 = np.broadcast_to(x, y.shape)
    finite = np.where(np.isfinite(x2), x2, np.nan)
    x_lo, x_hi = np.nanmin(finite, axis=-1), np.nanmax(finite, axis=-1)
    span = np.maximum(x_hi - x_lo, 1e-3 * np.maximum(1.0, np.abs(x_hi)))
    m_grid = x_lo[:, None] + span[:, None] * _UNIT_M  # (k, n_m)
    log_b_grid = _LOG_B_TIMES_SPAN - np.log(span)[:, None]  # (k, n_b)
    n_b, n_m = _LOG_B_TIMES_SPAN.size, _UNIT_M.size
    w2 = w * w
    w2y = w2 * y
    if np.ndim(x) == 1:
        # One compute axis for all curves (a sweep, or bootstrap resamples): the grid's s is the
        # same for every curve, so the weighted moments are three matrix products.
        s = fraction_of_gain(x, np.exp(log_b_grid[0])[:, None, None], m_grid[0][None, :, None])
        s = s.reshape(n_b * n_m, -1)
        moments = (w2 @ s.T, w2 @ (s * s).T, w2y @ s.T)
        totals = (w2.sum(-1)[:, None], w2y.sum(-1)[:, None])
        _, _, q = linear_params_from_moments(*moments, *totals, r0, bounds)
        rss = (q + np.sum(w2y * y, axis=-1)[:, None]).reshape(k, n_b, n_m)
    else:
        s = fraction_of_gain(
            x2[:, None, None, :], np.exp(log_b_grid)[:, :, None, None], m_grid[:, None, :, None]
        )
        w2b = w2[:, None, None, :]
        _, _, q = linear_params(s, y[:, None, None, :], w2b, r0, bounds)
        rss = q + np.sum(w2y * y, axis=-1)[:, None, None]  # (k, n_b, n_m)
    rss = np.where(np.isfinite(rss), rss, np.inf)
    # local minima: no smaller neighbour among the eight around (a diagonal valley, as A and C_mid
    # trading off makes, would otherwise show several spurious minima along its floor)
    padded = np.full((k, n_b + 2, n_m + 2), np.inf)
    padded[:, 1:-1, 1:-1] = rss
    is_min = np.ones(rss.shape, dtype=bool)
    for di, dj in ((0, 1), (1, 0), (1, 1), (1, -1)):
        fwd = padded[:, 1 + di : 1 + di + n_b, 1 + dj : 1 + dj + n_m]
        bwd = padded[:, 1 - di : 1 - di + n_b, 1 - dj : 1 - dj + n_m]
        is_min &= (rss <= fwd) & (rss <= bwd)
    flat = rss.reshape(k, -1)
    ranked = np.where(is_min.reshape(k, -1), flat, np.inf)
    order = np.argsort(ranked, axis=-1)[:, :top]
    chosen = np.take_along_axis(ranked, order, -1)
    # Where fewer than `top` local minima exist, repeat the best one.
    order = np.where(np.isfinite(chosen), order, order[:, :1])
    lb = log_b_grid[np.arange(k)[:, None], order // n_m]
    mm = m_grid[np.arange(k)[:, None], order % n_m]
    starts = np.stack([lb, mm], axis=-1)
    if with_rss:
        return starts, np.take_along_axis(flat, order, axis=-1)
    return starts


def varpro_lm(theta0, x, y, w, r0, bounds, lo, hi, *, max_iter: int = 200, ftol: float = 1e-13):
    """Batched Levenberg-Marquardt on the variable-projection residual.

    ``theta0`` is ``(k, 2)``; ``x`` is ``(n,)`` or ``(k, n)``; ``y``, ``w`` are ``(k, n)``;
    ``lo``, ``hi`` are ``(k, 2)``. The Jacobian of the projected residual is taken by forward
    differences (exact linear parameters make it cheap and robust at active bounds); the final
    digits come from :func:`gauss_newton_polish`. Each iteration works on the curves still
    running only, so a few slow curves do not make the whole batch pay for their iterations.
    """
    theta = np.clip(theta0, lo, hi)
    r, A, R0 = projected_residuals(theta, x, y, w, r0, bounds)
    cost = np.sum(r * r, axis=-1)
    lam = np.full(cost.shape, 1e-3)
    active = np.isfinite(cost)
    converged = np.zeros(cost.shape, dtype=bool)
    iterations = np.zeros(cost.shape, dtype=int)
    eye = np.eye(2)
    shared_x = np.ndim(x) == 1
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        th, rr, cc, la = theta[idx], r[idx], cost[idx], lam[idx]
        xi = x if shared_x else x[idx]
        yi, wi = y[idx], w[idx]
        h = 1e-7 * (1.0 + np.abs(th))  # (a, 2)
        shifted = th[None, :, :] + h[None, :, :] * eye[:, None, :]  # (2, a, 2)
        r_shift, _, _ = projected_residuals(shifted, xi, yi, wi, r0, bounds)
        jac = (r_shift - rr[None]) / h.T[:, :, None]  # (2, a, n)
        g = np.einsum("jkn,kn->kj", jac, rr)
        H = np.einsum("ikn,jkn->kij", jac, jac)
        Hd = H + la[:, None, None] * (np.diagonal(H, axis1=1, axis2=2)[:, None, :] * eye + 1e-30)
        det = Hd[:, 0, 0] * Hd[:, 1, 1] - Hd[:, 0, 1] * Hd[:, 1, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            step0 = -(Hd[:, 1, 1] * g[:, 0] - Hd[:, 0, 1] * g[:, 1]) / det
            step1 = -(Hd[:, 0, 0] * g[:, 1] - Hd[:, 1, 0] * g[:, 0]) / det
        step = np.nan_to_num(np.stack([step0, step1], axis=-1))
        trial = np.clip(th + step, lo[idx], hi[idx])
        r_t, A_t, R0_t = projected_residuals(trial, xi, yi, wi, r0, bounds)
        cost_t = np.sum(r_t * r_t, axis=-1)
        better = cost_t < cc
        gain = np.where(better, cc - cost_t, 0.0)
        moved = np.max(np.abs(trial - th) / (1.0 + np.abs(th)), axis=-1)
        take = idx[better]
        theta[take], r[take], cost[take] = trial[better], r_t[better], cost_t[better]
        A[take], R0[take] = A_t[better], R0_t[better]
        lam[idx] = np.where(better, la / 3.0, la * 4.0)
        iterations[idx] += 1
        done = (better & ((gain <= ftol * cost_t) | (moved < 1e-12))) | (lam[idx] > 1e12)
        converged[idx[done]] = True
        active[idx[done]] = False
    return theta, A, R0, cost, converged, iterations


def gauss_newton_polish(theta, A, R0, x, y, w, r0, bounds, lo, hi, *, steps: int = 3):
    """A few Gauss-Newton steps in the full parameters with the analytic Jacobian.

    Applied only where the linear parameters are strictly inside their bounds (at a bound the
    projected solution is already exact in them); a step is kept only if it lowers the RSS and
    stays inside the search box ``lo``, ``hi`` (``(k, 2)``, as ``theta``).
    """
    free_r0 = r0 is None
    x = np.broadcast_to(x, y.shape)
    inside = (A > bounds.A[0]) & (A < bounds.A[1])
    if free_r0:
        inside &= (R0 > bounds.R0[0]) & (R0 < bounds.R0[1])
    for _ in range(steps):
        B = np.exp(theta[:, 0])
        s = fraction_of_gain(x, B[:, None], theta[:, 1][:, None])
        r = w * (y - R0[:, None] - (A - R0)[:, None] * s)
        cost = np.sum(r * r, axis=-1)
        J = jacobian_internal(x, A[:, None], R0[:, None], B[:, None], theta[:, 1][:, None])
        if not free_r0:
            J = J[..., [0, 2, 3]]
        J = J * w[..., None]
        JtJ = np.einsum("kni,knj->kij", J, J)
        Jtr = np.einsum("kni,kn->ki", J, r)
        diag = np.diagonal(JtJ, axis1=1, axis2=2)
        scale = np.sqrt(np.where(diag > 0, diag, 1.0))
        Jn = JtJ / (scale[:, :, None] * scale[:, None, :])
        try:
            step = np.linalg.solve(Jn + 1e-14 * np.eye(Jn.shape[-1]), (Jtr / scale)[..., None])
        except np.linalg.LinAlgError:
            break
        step = step[..., 0] / scale
        if free_r0:
            dA, dR0, dlb, dm = step.T
        else:
            dA, dlb, dm = step.T
            dR0 = np.zeros_like(dA)
        new_theta = theta + np.stack([dlb, dm], axis=-1)
        new_A, new_R0 = A + dA, R0 + dR0
        # a wild step (near-singular J) may overflow; its cost is then not finite and it is dropped
        with np.errstate(over="ignore", invalid="ignore"):
            s_new = fraction_of_gain(x, np.exp(new_theta[:, 0])[:, None], new_theta[:, 1][:, None])
            r_new = w * (y - new_R0[:, None] - (new_A - new_R0)[:, None] * s_new)
            cost_new = np.sum(r_new * r_new, axis=-1)
        keep = inside & np.isfinite(cost_new) & (cost_new <= cost)
        keep &= (new_A >= bounds.A[0]) & (new_A <= bounds.A[1])
        keep &= (new_R0 >= bounds.R0[0]) & (new_R0 <= bounds.R0[1])
        # a run with no S-curve rewards ever sharper steps: log B would run past exp's range
        keep &= np.all((new_theta >= lo) & (new_theta <= hi), axis=-1)
        theta = np.where(keep[:, None], new_theta, theta)
        A, R0 = np.where(keep, new_A, A), np.where(keep, new_R0, R0)
        if not keep.any():
            break
    B = np.exp(theta[:, 0])
    s = fraction_of_gain(x, B[:, None], theta[:, 1][:, None])
    r = w * (y - R0[:, None] - (A - R0)[:, None] * s)
    return theta, A, R0, np.sum(r * r, axis=-1)


def solve_batch(x, y, w, r0, bounds, *, top: int = 3, theta0=None) -> BatchSolution:
    """Fit every curve of a batch: grid starts (or ``theta0``), batched LM, polish.

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
    k, n = y.shape
    x_full = np.broadcast_to(x, (k, n))
    lo, hi, _ = theta_box(np.where(w > 0, x_full, np.nan))
    if theta0 is None:
        starts = grid_starts(x, y, w, r0, bounds, top=top)  # (k, top, 2)
    else:
        starts = np.asarray(theta0, dtype=float).reshape(k, 1, 2)
    t = starts.shape[1]
    rep = lambda a: np.repeat(a, t, axis=0)  # noqa: E731
    x_rep = rep(x_full) if np.ndim(x) == 2 else x
    theta, A, R0, cost, conv, its = varpro_lm(
        starts.reshape(k * t, 2), x_rep, rep(y), rep(w), r0, bounds, rep(lo), rep(hi)
    )
    cost = np.where(np.isfinite(cost), cost, np.inf).reshape(k, t)
    best = np.argmin(cost, axis=1)
    pick = lambda a: a.reshape(k, t, *a.shape[1:])[np.arange(k), best]  # noqa: E731
    theta, A, R0, conv, its = pick(theta), pick(A), pick(R0), pick(conv), pick(its)
    theta, A, R0, rss = gauss_newton_polish(theta, A, R0, x_full, y, w, r0, bounds, lo, hi)
    tol = 1e-6 * (hi - lo)
    at_bound = np.any((theta - lo < tol) | (hi - theta < tol), axis=-1)
    return BatchSolution(
        A=A,
        R0=R0,
        log_B=theta[:, 0],
        m=theta[:, 1],
        rss=rss,
        converged=conv & ~at_bound,
        at_theta_bound=at_bound,
        iterations=its,
    )


def solve_single(x, y, w, r0, bounds) -> BatchSolution:
    """Fit one curve: grid starts, then MINPACK Levenberg-Marquardt in the full parameters.

    The compiled MINPACK loop with the analytic Jacobian is the fastest way to the last digits of
    one optimum. Every grid basin whose RSS is within 25% of the best is refined; a result must lie
    inside the bounds and the search box, otherwise (an optimum on a bound, or a curve that does
    not identify its midpoint) the bounded solver decides that basin. Finally every other grid
    minimum within 25% of the best RSS found is refined too: noisy, nearly flat curves have many
    shallow basins of similar depth, and the best grid point is then no reliable guide.
    """
    thetas, grid_rss = grid_starts(x, y[None], w[None], r0, bounds, top=8, with_rss=True)
    thetas, grid_rss = thetas[0], grid_rss[0]
    lo, hi, _ = theta_box(x[None])
    free_r0 = r0 is None
    best: BatchSolution | None = None
    refined = np.zeros(len(thetas), dtype=bool)
    left_the_box = False
    for i in range(len(thetas)):
        theta = thetas[i]
        if grid_rss[i] > 1.25 * grid_rss[0] or np.any(np.all(thetas[:i] == theta, axis=-1)):
            refined[i] |= np.any(np.all(thetas[:i] == theta, axis=-1))
            continue
        refined[i] = True
        if best is not None and _same_basin(
            np.array([best.log_B[0], best.m[0]]), theta, grid_rss[i], x, y, w, r0, bounds
        ):
            continue
        s = fraction_of_gain(x, np.exp(theta[0]), theta[1])
        A0, R00, _ = linear_params(s, y, w * w, r0, bounds)
        p0 = [A0, R00, theta[0], theta[1]] if free_r0 else [A0, theta[0], theta[1]]
        p, rss, ok = _minpack(x, y, w, r0, np.array(p0, dtype=float))
        A, R0, lb, m = p if free_r0 else (p[0], r0, p[1], p[2])
        # strictly inside: an unconstrained LM that ends on a bound may sit on a plateau there
        inside = (
            ok
            and _interior(A, bounds.A)
            and (not free_r0 or _interior(R0, bounds.R0))
            and lo[0, 0] < lb < hi[0, 0]
            and lo[0, 1] < m < hi[0, 1]
        )
        if inside and (best is None or rss < best.rss[0]):
            best = _one_solution(A, R0, lb, m, rss, converged=True, at_bound=False)
        left_the_box |= not inside  # failed, or ended on a bound or outside the box
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
    bound switches on, reaches only slowly.
    """
    from scipy.optimize import least_squares

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
    A, R0 = float(sol.A[0]), float(sol.R0[0])
    p0 = [A, R0, sol.log_B[0], sol.m[0]] if free_r0 else [A, sol.log_B[0], sol.m[0]]
    lower = [bounds.A[0], bounds.R0[0], lo[0, 0], lo[0, 1]]
    upper = [bounds.A[1], bounds.R0[1], hi[0, 0], hi[0, 1]]
    if not free_r0:
        lower, upper = [lower[0], *lower[2:]], [upper[0], *upper[2:]]

    def unpack(p):
        return (p[0], p[1], p[2], p[3]) if free_r0 else (p[0], r0, p[1], p[2])

    def residual(p):
        A, R0, lb, m = unpack(p)
        return w * (y - R0 - (A - R0) * fraction_of_gain(x, np.exp(lb), m))

    def jacobian(p):
        A, R0, lb, m = unpack(p)
        J = jacobian_internal(x, A, R0, np.exp(lb), m)
        return -(J if free_r0 else J[:, [0, 2, 3]]) * w[:, None]

    p0 = np.clip(p0, lower, upper)
    with np.errstate(over="ignore", invalid="ignore"):
        res = least_squares(
            residual,
            p0,
            jac=jacobian,
            bounds=(lower, upper),
            method="trf",
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
            max_nfev=2000,
        )
    rss = float(2 * res.cost)
    if not (np.isfinite(rss) and rss <= sol.rss[0]):
        return sol
    A, R0, lb, m = unpack(res.x)
    tol = 1e-6 * (hi[0] - lo[0])
    at_bound = bool(np.any((np.array([lb, m]) - lo[0] < tol) | (hi[0] - np.array([lb, m]) < tol)))
    converged = (res.status > 0 or bool(sol.converged[0])) and not at_bound
    return _one_solution(
        A, R0, lb, m, rss, converged=converged, at_bound=at_bound, iterations=res.nfev
    )


def _interior(value: float, box: tuple[float, float]) -> bool:
    lo, hi = box
    return lo + 1e-7 * (1 + abs(lo)) < value < hi - 1e-7 * (1 + abs(hi))


def _same_basin(theta_opt, theta_start, start_rss, x, y, w, r0, bounds) -> bool:
    """True when the projected RSS has no barrier between a start and a known optimum.

    Checks six points on the segment: if none rises above the start's own RSS, descending from the
    start leads to the optimum already found, and refining it again would only cost time.
    """
    t = np.linspace(0.0, 1.0, 8)[1:-1, None]
    path = theta_opt + t * (theta_start - theta_opt)
    r, _, _ = projected_residuals(path, x, y, w, r0, bounds)
    return bool(np.all(np.sum(r * r, axis=-1) <= start_rss * (1 + 1e-9)))


def _minpack(x, y, w, r0, p0):
    """MINPACK lmder on (A, R0, log B, m) (R0 dropped when fixed) with the analytic Jacobian."""
    from scipy.optimize import leastsq

    free_r0 = r0 is None
    jac = np.empty((p0.size, x.size))
    zero_c = np.isneginf(x)
    dx_base = np.where(zero_c, 0.0, x)

    def unpack(p):
        return (p[0], p[1], p[2], p[3]) if free_r0 else (p[0], r0, p[1], p[2])

    def residual(p):
        A, R0, lb, m = unpack(p)
        s = fraction_of_gain(x, np.exp(lb), m)
        return w * (y - R0 - (A - R0) * s)

    def jacobian(p):  # rows = parameters (col_deriv=1): d residual / d p
        A, R0, lb, m = unpack(p)
        B = np.exp(lb)
        s = fraction_of_gain(x, B, m)
        g = (A - R0) * B * w * s * (1.0 - s)
        jac[0] = -w * s
        i = 1
        if free_r0:
            jac[1] = -w + w * s
            i = 2
        jac[i] = -g * np.where(zero_c, 0.0, dx_base - m)
        jac[i + 1] = g
        return jac

    with np.errstate(over="ignore", invalid="ignore"):
        p, _, info, _, ier = leastsq(
            residual, p0, Dfun=jacobian, col_deriv=1, full_output=True, ftol=1e-13, xtol=1e-13
        )
    rss = float(np.dot(info["fvec"], info["fvec"]))
    ok = ier in (1, 2, 3, 4) and bool(np.all(np.isfinite(p))) and np.isfinite(rss)
    return p, rss, ok
