"""Compiled loops of the power law's fits (numba): the exponent grid of a batch of resamples with
its parabola, and one curve's bounded Brent search over log B.

:func:`rlcurves.powerlaw.fit_power_law_batch` (the bootstrap's refits of the model average,
:mod:`rlcurves.ensemble`) and :func:`rlcurves.powerlaw.fit_power_law` spent most of their time in
numpy's call overhead and temporaries: a batch of 300 resamples is 300 x 241 grid cells of a few
arithmetic operations each, and the bounded search evaluates one exponent at a time on arrays of
a few dozen points. Here each cell and each evaluation is the same arithmetic in scalar loops.

- :func:`grid_log_b` takes the sums numpy computes for the grid (the same arrays as before) and
  does everything after them as numpy did, operation for operation (the closed-form A and D, A
  clipped to its bounds and D re-solved, the RSS, the first minimum, the parabola through it and
  its neighbours): the exponents it returns are numpy's, bit for bit (``tests/test_powerlaw.py``).
- :func:`bounded_search` is scipy's ``minimize_scalar(method="bounded")`` (fminbound: golden
  section with parabolic steps) ported step for step, on :func:`rss_one`, the weighted RSS of one
  exponent written as :func:`rlcurves.powerlaw._solve_linear_grid` computes it. Sums are taken
  point by point here where numpy's dot products may order them otherwise, so values differ in
  their last digits and the search can stop elsewhere within its tolerance (``xatol``, 1e-10 in
  log B): the tests hold the fits to scipy's search within that.
"""

from __future__ import annotations

import math

import numpy as np

from ._kernels import _cached_njit, _jit


@_jit
def _clipped(A, su, suu, suy, lo, hi):
    """A clipped to ``[lo, hi]`` (a non-finite A to ``lo``, or 0 when unbounded) and D re-solved
    for it, as numpy's ``np.clip`` and ``np.maximum(suu, 1e-300)`` do it (NaN stays NaN)."""
    a = A if math.isfinite(A) else (lo if math.isfinite(lo) else 0.0)
    if a < lo:
        a = lo
    elif a > hi:
        a = hi
    m = suu if (suu >= 1e-300 or math.isnan(suu)) else 1e-300
    return a, (a * su - suy) / m


@_jit
def _cell_rss(sy, syy, n, su, suu, suy, lo, hi):
    """One grid cell of ``powerlaw._batch_rss``: the RSS at the closed-form (A, D), A clipped."""
    det = n * suu - su * su
    A = (sy * suu - su * suy) / det
    D = (sy * su - n * suy) / det
    if not (A >= lo and A <= hi):
        A, D = _clipped(A, su, suu, suy, lo, hi)
    return syy - 2 * A * sy + 2 * D * suy + A * A * n - 2 * A * D * su + D * D * suu


@_cached_njit(nogil=True, error_model="numpy")
def grid_log_b(sy, syy, n, su, suu, suy, lo, hi, grid, out):
    """Every row's log B: the grid's first RSS minimum, moved by the parabola through it and its
    neighbours (at most one step either way), as ``fit_power_law_batch`` did with numpy.

    ``sy, syy`` (k,) are the rows' sums of y and y^2, ``n`` their points, ``su, suu`` (G,) the
    sums of ``u = C^-B`` and ``u^2`` at each grid exponent, ``suy`` (k, G) the sums of ``u y``;
    ``lo, hi`` the bounds on A; ``grid`` (G,) the log B grid, evenly spaced; ``out`` (k,).
    """
    k, size = suy.shape
    step = grid[1] - grid[0]
    nf = float(n)
    for c in range(k):
        best, ib = math.inf, 0
        for g in range(size):
            v = _cell_rss(sy[c], syy[c], nf, su[g], suu[g], suy[c, g], lo, hi)
            if not math.isfinite(v):
                v = math.inf
            if v < best:
                best, ib = v, g
        i = min(max(ib, 1), size - 2)
        cells = np.empty(3)
        for t in range(3):
            g = i - 1 + t
            v = _cell_rss(sy[c], syy[c], nf, su[g], suu[g], suy[c, g], lo, hi)
            cells[t] = _finite_or_inf(v)
        r_prev, r_at, r_next = cells[0], cells[1], cells[2]
        curv = r_prev - 2 * r_at + r_next
        shift = 0.5 * (r_prev - r_next) / curv if curv > 0 else 0.0
        if math.isnan(shift):
            shift = 0.0
        shift = min(max(shift, -1.0), 1.0)
        out[c] = grid[i] + step * shift


@_jit
def _finite_or_inf(v):
    return v if math.isfinite(v) else math.inf


@_jit
def rss_one(log_c, y, w, B, lo, hi):
    """The weighted RSS of ``y ~ A - D C^-B`` at one exponent, (A, D) in closed form with A
    clipped to ``[lo, hi]`` and D re-solved: ``powerlaw._solve_linear_grid`` for one B."""
    s0 = sy = su = suu = suy = 0.0
    for j in range(log_c.size):
        w2 = w[j] * w[j]
        u = math.exp(-(B * log_c[j]))
        s0 += w2
        sy += w2 * y[j]
        su += u * w2
        suu += u * u * w2
        suy += u * (w2 * y[j])
    det = s0 * suu - su * su
    A = (sy * suu - su * suy) / det
    D = (sy * su - s0 * suy) / det
    if not (A >= lo and A <= hi) or not math.isfinite(A):
        A, D = _clipped(A, su, suu, suy, lo, hi)
    rss = 0.0
    for j in range(log_c.size):
        resid = y[j] - A + D * math.exp(-(B * log_c[j]))
        rss += resid * resid * (w[j] * w[j])
    return rss


@_cached_njit(nogil=True, error_model="numpy")
def bounded_search(log_c, y, w, lo, hi, x1, x2, xatol, maxfun):
    """Minimize :func:`rss_one` over ``log B`` in ``[x1, x2]``: scipy's bounded scalar
    minimizer (``_minimize_scalar_bounded``) step for step. Returns ``(x, f(x), nfev, flag)``,
    flag 0 converged, 1 out of evaluations, 2 NaN met."""
    sqrt_eps = math.sqrt(2.2e-16)
    golden_mean = 0.5 * (3.0 - math.sqrt(5.0))
    a, b = x1, x2
    fulc = a + golden_mean * (b - a)
    nfc, xf = fulc, fulc
    rat = e = 0.0
    x = xf
    fx = rss_one(log_c, y, w, math.exp(x), lo, hi)
    num = 1
    fu = math.inf
    ffulc = fnfc = fx
    xm = 0.5 * (a + b)
    tol1 = sqrt_eps * abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    flag = 0
    while abs(xf - xm) > (tol2 - 0.5 * (b - a)):
        golden = True
        if abs(e) > tol1:  # a parabolic step?
            golden = False
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            r = e
            e = rat
            if (abs(p) < abs(0.5 * q * r)) and (p > q * (a - xf)) and (p < q * (b - xf)):
                rat = (p + 0.0) / q
                x = xf + rat
                if ((x - a) < tol2) or ((b - x) < tol2):
                    si = _sign(xm - xf) + (1.0 if (xm - xf) == 0 else 0.0)
                    rat = tol1 * si
            else:
                golden = True
        if golden:
            e = (a - xf) if xf >= xm else (b - xf)
            rat = golden_mean * e
        si = _sign(rat) + (1.0 if rat == 0 else 0.0)
        x = xf + si * max(abs(rat), tol1)
        fu = rss_one(log_c, y, w, math.exp(x), lo, hi)
        num += 1
        if fu <= fx:
            if x >= xf:
                a = xf
            else:
                b = xf
            fulc, ffulc = nfc, fnfc
            nfc, fnfc = xf, fx
            xf, fx = x, fu
        else:
            if x < xf:
                a = x
            else:
                b = x
            if (fu <= fnfc) or (nfc == xf):
                fulc, ffulc = nfc, fnfc
                nfc, fnfc = x, fu
            elif (fu <= ffulc) or (fulc == xf) or (fulc == nfc):
                fulc, ffulc = x, fu
        xm = 0.5 * (a + b)
        tol1 = sqrt_eps * abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if num >= maxfun:
            flag = 1
            break
    if math.isnan(xf) or math.isnan(fx) or math.isnan(fu):
        flag = 2
    return xf, fx, num, flag


@_jit
def _sign(v):
    # np.sign: NaN for NaN
    if v > 0:
        return 1.0
    if v < 0:
        return -1.0
    return v


def grid_sums(log_c: np.ndarray, y: np.ndarray, B: np.ndarray):
    """The sums :func:`grid_log_b` takes, computed as ``powerlaw._batch_rss`` computes them."""
    u = np.exp(-np.outer(B, log_c))  # (n_B, n)
    sy, syy = y.sum(axis=1), np.einsum("ij,ij->i", y, y)
    su, suu = u.sum(axis=1), np.einsum("ij,ij->i", u, u)
    suy = y @ u.T
    return sy, syy, su, suu, np.ascontiguousarray(suy)
