"""Compiled inner loops of the exact solver (numba): one curve at a time, batches in parallel.

Everything the solver does per curve lives here as scalar loops over the points: the bounded
closed-form linear parameters, the grid screen over ``theta = (log B, m = log C_mid)``, the
variable-projection Levenberg-Marquardt, the Levenberg-Marquardt in the full parameters with the
analytic Jacobian, the Gauss-Newton polish, and a vectorized log posterior for emcee. Arrays of a
hundred numbers cost numpy more in call overhead than in arithmetic; here they cost the arithmetic.

Conventions: ``x`` is log compute (``-inf`` for C = 0, giving ``s = 0``); ``w`` are weights
(``1 / sigma``; 0 drops a point); ``fixed_r0`` with ``r0`` fixes R0; ``bnd`` is the float array
``(A_lo, A_hi, R0_lo, R0_hi)`` (infinite where unbounded); ``theta`` is ``(log B, m)``. Nothing is
compiled at import: each kernel compiles on its first call, or loads from numba's on-disk cache.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

_TINY = 1e-300
_BIG = 1.7976931348623157e308
# The start grid, in units of the data's span in log compute: C_mid from half a span below the data
# to a span above, B * span from a gentle to a sharp rise.
UNIT_M = np.linspace(-0.5, 2.0, 18)
LOG_B_TIMES_SPAN = np.log(np.geomspace(0.3, 60.0, 14))
N_B, N_M = LOG_B_TIMES_SPAN.size, UNIT_M.size
GRID_TOP_SINGLE = 8  # grid minima a single fit considers

_NO_CACHE_WARNED = []


def _cached_njit(**options):
    """``numba.njit(cache=True, **options)``, or without the on-disk cache where there is none.

    numba caches next to this file, else in the user's cache folder (or ``NUMBA_CACHE_DIR``); in
    a read-only install with neither writable it refuses to cache at decoration, which made
    ``import rlcurves`` itself fail. The kernels then compile in memory in every process
    (seconds on the first fit), and one warning says how to keep them.
    """

    def decorate(fn):
        try:
            return njit(cache=True, **options)(fn)
        except RuntimeError as err:
            if "cannot cache" not in str(err):
                raise
            if not _NO_CACHE_WARNED:
                _NO_CACHE_WARNED.append(True)
                warnings.warn(
                    "rlcurves: numba has no writable folder to cache its compiled kernels in "
                    f"({err}); they compile on first use in every process. Set NUMBA_CACHE_DIR "
                    "to a writable folder to keep them.",
                    UserWarning,
                    stacklevel=2,
                )
            return njit(cache=False, **options)(fn)

    return decorate


_jit = _cached_njit(nogil=True, error_model="numpy")
# lets LLVM vectorize the grid's loops (reassociated sums); infinities and NaN keep their meaning
_VECTOR_MATH = {"reassoc", "contract", "arcp", "nsz"}


@_jit
def _clip(v, lo, hi):
    # NaN stays NaN, as np.clip
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@_jit
def frac(x, B, m):
    """``s = 1 / (1 + exp(B (m - x)))``; 0 at ``x = -inf``."""
    return 1.0 / (1.0 + math.exp(B * (m - x)))


# ---- an exponential the compiler can vectorize ------------------------------------------------
# libm's exp is a call LLVM cannot vectorize (numba has no vector math library here), so the
# loops over the points of a curve ran one exp at a time: most of a warm refit and of the
# posterior. fast_exp is plain arithmetic (Cody-Waite reduction, degree-13 Taylor polynomial,
# 2^k built from its bits) that LLVM can inline and vectorize in loops compiled with _VECTOR_MATH:
# within one unit in the last place of libm's (the tests hold it to that), twice as fast over a
# curve's 100 points.
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of log(2): t * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10


@intrinsic
def _bits_to_float(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits`` (a free bitcast)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


# fastmath=False explicitly: a callee without its own flags inherits its caller's, and
# reassociated, the reduction above loses its digits (exp(700) to 2e-14); LLVM inlines it into the
# vectorized loops with its own (exact) arithmetic.
@_cached_njit(error_model="numpy", fastmath=False)
def fast_exp(x):
    """``exp(x)`` to within one unit in the last place; ``inf`` above 709.78, 0 below -745.2,
    NaN for NaN."""
    t = math.floor(x * _LOG2E + 0.5)
    r = x - t * _LN2_HI - t * _LN2_LO  # |r| <= log(2) / 2
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    # 2^t as two factors, each a normal number for every t that matters (t = 1024 near the top
    # of the range, below -1022 for subnormal results)
    t = min(max(t, -1100.0), 1100.0)
    k1 = math.floor(0.5 * t)
    k2 = t - k1
    v = p * _bits_to_float((np.int64(k1) + 1023) << 52)
    v = v * _bits_to_float((np.int64(k2) + 1023) << 52)
    v = math.inf if x > 709.782712893384 else v
    v = 0.0 if x < -745.2 else v
    return v if x == x else x


@_cached_njit(error_model="numpy", fastmath=False)
def frac_vec(x, B, m):
    """:func:`frac` with :func:`fast_exp`, for loops compiled with ``_VECTOR_MATH``."""
    return 1.0 / (1.0 + fast_exp(B * (m - x)))


# loops over a curve's points that vectorize (reassociated sums): the hot ones use frac_vec
_jit_vec = _cached_njit(nogil=True, error_model="numpy", fastmath=_VECTOR_MATH)


@_jit
def linear_from_moments(sw, svv, svy, tw, ty, fixed_r0, r0, bnd):
    """Exact bounded ``(A, R0, q)`` from the weighted moments; ``q`` = RSS - sum(w2 y^2).

    ``sw = sum w2 s``, ``svv = sum w2 s^2``, ``svy = sum w2 s y``, ``tw = sum w2``,
    ``ty = sum w2 y``. The constrained optimum of a convex quadratic in two variables is the
    unconstrained one when feasible, otherwise the best of the four clipped edge problems.
    """
    a_lo, a_hi, r_lo, r_hi = bnd[0], bnd[1], bnd[2], bnd[3]
    if fixed_r0:
        svd = svy - r0 * sw
        gain = svd / svv if svv > _TINY else 0.0
        A = _clip(r0 + gain, a_lo, a_hi)
        g = A - r0
        return A, r0, g * g * svv - 2 * g * svd
    suv = sw - svv
    suu = tw - 2 * sw + svv
    suy = ty - svy
    det = suu * svv - suv * suv
    if det > 1e-12 * suu * svv + _TINY:
        R0 = (svv * suy - suv * svy) / det
        A = (suu * svy - suv * suy) / det
    else:
        # s is (numerically) constant over the points: the flat fit
        A = R0 = ty / tw
    if a_lo <= A <= a_hi and r_lo <= R0 <= r_hi:
        return A, R0, R0 * R0 * suu + 2 * A * R0 * suv + A * A * svv - 2 * (R0 * suy + A * svy)
    best_a, best_r = _clip(A, a_lo, a_hi), _clip(R0, r_lo, r_hi)
    best = best_r * best_r * suu + 2 * best_a * best_r * suv + best_a * best_a * svv
    best -= 2 * (best_r * suy + best_a * svy)
    for edge in range(4):
        fixed_value = bnd[edge]
        if not math.isfinite(fixed_value):
            continue
        if edge < 2:  # A on a bound, R0 free within its own
            a = fixed_value
            r = _clip((suy - a * suv) / suu if suu > _TINY else 0.0, r_lo, r_hi)
        else:
            r = fixed_value
            a = _clip((svy - r * suv) / svv if svv > _TINY else 0.0, a_lo, a_hi)
        obj = r * r * suu + 2 * a * r * suv + a * a * svv - 2 * (r * suy + a * svy)
        if obj < best:
            best_a, best_r, best = a, r, obj
    q = best_r * best_r * suu + 2 * best_a * best_r * suv + best_a * best_a * svv
    return best_a, best_r, q - 2 * (best_r * suy + best_a * svy)


@_jit_vec
def projected(x, y, w, lb, m, fixed_r0, r0, bnd, s, r):
    """Weighted residuals ``r`` (filled in place) at the exact linear optimum for ``theta``.

    ``s`` is a work buffer of the points' size. Returns ``(cost, A, R0)``. The unconstrained
    optimum is solved from centred moments (``R0 + g s`` with ``g = cov(s, y) / var(s)``): where
    the data see only a sliver of the curve, A and R0 run to huge values of opposite sign and the
    raw moments lose every digit to cancellation; the centred ones keep them.
    """
    B = math.exp(lb)
    sw = svv = svy = tw = ty = 0.0
    for i in range(x.size):
        si = frac_vec(x[i], B, m)
        s[i] = si
        w2 = w[i] * w[i]
        sw += w2 * si
        svv += w2 * si * si
        svy += w2 * si * y[i]
        tw += w2
        ty += w2 * y[i]
    gain = math.nan
    if fixed_r0:
        A, R0, _ = linear_from_moments(sw, svv, svy, tw, ty, fixed_r0, r0, bnd)
    else:
        s_mean, y_mean = sw / tw, ty / tw
        svc = syc = 0.0
        for i in range(x.size):
            w2 = w[i] * w[i]
            ds = s[i] - s_mean
            svc += w2 * ds * ds
            syc += w2 * ds * (y[i] - y_mean)
        suu = tw - 2 * sw + svv
        if tw * svc > 1e-12 * suu * svv + _TINY:
            gain = syc / svc
            R0 = y_mean - gain * s_mean
            A = R0 + gain
        else:
            A = R0 = y_mean
        if not (bnd[0] <= A <= bnd[1] and bnd[2] <= R0 <= bnd[3]):
            gain = math.nan  # a bound is active: the edges of the box decide
            A, R0, _ = linear_from_moments(sw, svv, svy, tw, ty, fixed_r0, r0, bnd)
    if math.isnan(gain):
        gain = A - R0
    cost = 0.0
    for i in range(x.size):
        ri = w[i] * (y[i] - (R0 + gain * s[i]))
        r[i] = ri
        cost += ri * ri
    return cost, A, R0


@_jit
def data_span(x, w, use_weights):
    """``(x_lo, x_hi, span)`` over the finite points (with ``w > 0`` if ``use_weights``)."""
    x_lo, x_hi = math.inf, -math.inf
    for i in range(x.size):
        if math.isfinite(x[i]) and (not use_weights or w[i] > 0):
            x_lo = min(x_lo, x[i])
            x_hi = max(x_hi, x[i])
    span = max(x_hi - x_lo, 1e-3 * max(1.0, abs(x_hi)))
    return x_lo, x_hi, span


@_jit
def theta_box(x, w, use_weights):
    """The search box on theta: ``(lb_lo, m_lo, lb_hi, m_hi)`` (see :func:`solver.theta_box`)."""
    x_lo, x_hi, span = data_span(x, w, use_weights)
    return math.log(1e-2 / span), x_lo - 5 * span, math.log(1e3 / span), x_hi + 5 * span


@_cached_njit(nogil=True, error_model="numpy", fastmath=_VECTOR_MATH)
def grid_rss(x, y, w, fixed_r0, r0, bnd, lb_grid, m_grid, rss):
    """Projected RSS on the (log B, m) grid, filled into ``rss`` (N_B, N_M); inf where undefined.

    ``exp(B (m_j - x_i))`` factors into ``exp(B (m_j - x0)) exp(B (x0 - x_i))`` about a centre
    ``x0`` of the grid, so a grid row costs one exponential per point and per midpoint instead of
    one per pair (both factors stay far from overflow: B times a span is at most 60).
    """
    n = x.size
    n_m = m_grid.size
    tw = ty = yy = 0.0
    for i in range(n):
        w2 = w[i] * w[i]
        tw += w2
        ty += w2 * y[i]
        yy += w2 * y[i] * y[i]
    x0 = 0.5 * (m_grid[0] + m_grid[n_m - 1])
    e_x = np.empty(n)
    w2 = np.empty(n)
    w2y = np.empty(n)
    for i in range(n):
        w2[i] = w[i] * w[i]
        w2y[i] = w2[i] * y[i]
    sw = np.empty(n_m)
    svv = np.empty(n_m)
    svy = np.empty(n_m)
    for b in range(lb_grid.size):
        B = math.exp(lb_grid[b])
        for i in range(n):
            e_x[i] = math.exp(B * (x0 - x[i]))
        for j in range(n_m):
            e_m = math.exp(B * (m_grid[j] - x0))
            a0 = a1 = a2 = 0.0
            for i in range(n):
                si = 1.0 / (1.0 + e_m * e_x[i])
                a0 += w2[i] * si
                a1 += w2[i] * si * si
                a2 += w2y[i] * si
            sw[j], svv[j], svy[j] = a0, a1, a2
        for j in range(n_m):
            _, _, q = linear_from_moments(sw[j], svv[j], svy[j], tw, ty, fixed_r0, r0, bnd)
            v = q + yy
            rss[b, j] = v if math.isfinite(v) else math.inf


@_jit
def grid_starts(x, y, w, fixed_r0, r0, bnd, top, starts, start_rss):
    """The ``top`` best local minima of the grid RSS into ``starts`` (top, 2) and ``start_rss``.

    A local minimum has no smaller neighbour among the eight around it (a diagonal valley, as A
    and C_mid trading off makes, would otherwise show spurious minima along its floor). Where
    fewer than ``top`` exist the best one is repeated.
    """
    x_lo, _, span = data_span(x, w, False)
    lb_grid = LOG_B_TIMES_SPAN - math.log(span)
    m_grid = x_lo + span * UNIT_M
    rss = np.empty((N_B, N_M))
    grid_rss(x, y, w, fixed_r0, r0, bnd, lb_grid, m_grid, rss)
    ranked = np.full(N_B * N_M, math.inf)
    for b in range(N_B):
        for j in range(N_M):
            v = rss[b, j]
            is_min = True
            for db in range(-1, 2):
                for dj in range(-1, 2):
                    bb, jj = b + db, j + dj
                    if (db or dj) and 0 <= bb < N_B and 0 <= jj < N_M and rss[bb, jj] < v:
                        is_min = False
            if is_min:
                ranked[b * N_M + j] = v
    first = -1
    for t in range(top):
        pick = -1
        for g in range(ranked.size):
            if math.isfinite(ranked[g]) and (pick < 0 or ranked[g] < ranked[pick]):
                pick = g
        if pick < 0:
            pick = first if first >= 0 else 0
        else:
            ranked[pick] = math.inf
        if first < 0:
            first = pick
        starts[t, 0] = lb_grid[pick // N_M]
        starts[t, 1] = m_grid[pick % N_M]
        start_rss[t] = rss[pick // N_M, pick % N_M]


@_jit
def varpro_lm(x, y, w, fixed_r0, r0, bnd, box, th0, th1, max_iter, ftol, s, r, r_shift, jac):
    """Levenberg-Marquardt on the variable-projection residual from ``(th0, th1)``.

    The Jacobian of the projected residual is taken by forward differences (exact linear
    parameters make it cheap and robust where a bound on A or R0 switches on). ``box`` is
    ``(lb_lo, m_lo, lb_hi, m_hi)``; ``s, r, r_shift`` (n,) and ``jac`` (2, n) are work buffers.
    Returns ``(log B, m, A, R0, cost, converged, iterations)``.
    """
    n = x.size
    th = np.empty(2)
    trial = np.empty(2)
    th[0] = _clip(th0, box[0], box[2])
    th[1] = _clip(th1, box[1], box[3])
    cost, A, R0 = projected(x, y, w, th[0], th[1], fixed_r0, r0, bnd, s, r)
    lam = 1e-3
    converged = False
    iterations = 0
    if not math.isfinite(cost):
        return th[0], th[1], A, R0, cost, converged, iterations
    for _ in range(max_iter):
        for d in range(2):
            h = 1e-7 * (1.0 + abs(th[d]))
            trial[0], trial[1] = th[0], th[1]
            trial[d] += h
            projected(x, y, w, trial[0], trial[1], fixed_r0, r0, bnd, s, r_shift)
            for i in range(n):
                jac[d, i] = (r_shift[i] - r[i]) / h
        g0 = g1 = h00 = h01 = h11 = 0.0
        for i in range(n):
            j0, j1 = jac[0, i], jac[1, i]
            g0 += j0 * r[i]
            g1 += j1 * r[i]
            h00 += j0 * j0
            h01 += j0 * j1
            h11 += j1 * j1
        # damping as lam * (diag(H) + 1e-30) on the diagonal (and lam * 1e-30 off it)
        d00 = h00 + lam * (h00 + 1e-30)
        d11 = h11 + lam * (h11 + 1e-30)
        d01 = h01 + lam * 1e-30
        det = d00 * d11 - d01 * d01
        step0 = -(d11 * g0 - d01 * g1) / det
        step1 = -(d00 * g1 - d01 * g0) / det
        step0 = 0.0 if math.isnan(step0) else _clip(step0, -_BIG, _BIG)
        step1 = 0.0 if math.isnan(step1) else _clip(step1, -_BIG, _BIG)
        trial[0] = _clip(th[0] + step0, box[0], box[2])
        trial[1] = _clip(th[1] + step1, box[1], box[3])
        cost_t, A_t, R0_t = projected(x, y, w, trial[0], trial[1], fixed_r0, r0, bnd, s, r_shift)
        better = cost_t < cost
        gain = cost - cost_t if better else 0.0
        moved = max(
            abs(trial[0] - th[0]) / (1.0 + abs(th[0])), abs(trial[1] - th[1]) / (1.0 + abs(th[1]))
        )
        if better:
            th[0], th[1], cost, A, R0 = trial[0], trial[1], cost_t, A_t, R0_t
            for i in range(n):
                r[i] = r_shift[i]
            lam /= 3.0
        else:
            lam *= 4.0
        iterations += 1
        if (better and (gain <= ftol * cost_t or moved < 1e-12)) or lam > 1e12:
            converged = True
            break
    return th[0], th[1], A, R0, cost, converged, iterations


@_jit
def _solve_spd(H, g, p, out):
    """Solve the p x p system ``H out = g`` by Gaussian elimination with partial pivoting.

    ``H`` and ``g`` are overwritten. Returns False if a pivot vanishes (singular).
    """
    for c in range(p):
        piv = c
        for rr in range(c + 1, p):
            if abs(H[rr, c]) > abs(H[piv, c]):
                piv = rr
        if not abs(H[piv, c]) > 0.0:
            return False
        if piv != c:
            for k in range(p):
                H[c, k], H[piv, k] = H[piv, k], H[c, k]
            g[c], g[piv] = g[piv], g[c]
        for rr in range(c + 1, p):
            f = H[rr, c] / H[c, c]
            for k in range(c, p):
                H[rr, k] -= f * H[c, k]
            g[rr] -= f * g[c]
    for c in range(p - 1, -1, -1):
        v = g[c]
        for k in range(c + 1, p):
            v -= H[c, k] * out[k]
        out[c] = v / H[c, c]
    return True


@_jit_vec
def _curve_cost(x, y, w, A, R0, lb, m, s, r):
    """Weighted residuals of the curve in the full parameters (``s``, ``r`` filled); the RSS."""
    B = math.exp(lb)
    cost = 0.0
    for i in range(x.size):
        si = frac_vec(x[i], B, m)
        s[i] = si
        ri = w[i] * (y[i] - R0 - (A - R0) * si)
        r[i] = ri
        cost += ri * ri
    return cost


@_jit_vec
def _normal_equations(x, w, A, R0, lb, m, fixed_r0, s, r, JtJ, Jtr):
    """``J^T J`` and ``J^T r`` of the weighted curve in (A, [R0,] log B, m); returns p."""
    B = math.exp(lb)
    # the ten products of the columns (A, R0, log B, m) and four gradients, as scalars
    aa = ar = ab = am = rr_ = rb = rm = bb = bm = mm = 0.0
    ga = gr = gb = gm = 0.0
    for i in range(x.size):
        si = s[i]
        wi = w[i]
        gain = (A - R0) * si * (1.0 - si) * B * wi
        dx = 0.0 if x[i] == -math.inf else x[i] - m
        ca = si * wi
        cr = (1.0 - si) * wi
        cb = gain * dx
        cm = -gain
        ri = r[i]
        aa += ca * ca
        ar += ca * cr
        ab += ca * cb
        am += ca * cm
        rr_ += cr * cr
        rb += cr * cb
        rm += cr * cm
        bb += cb * cb
        bm += cb * cm
        mm += cm * cm
        ga += ca * ri
        gr += cr * ri
        gb += cb * ri
        gm += cm * ri
    if fixed_r0:
        JtJ[0, 0], JtJ[0, 1], JtJ[0, 2] = aa, ab, am
        JtJ[1, 1], JtJ[1, 2], JtJ[2, 2] = bb, bm, mm
        Jtr[0], Jtr[1], Jtr[2] = ga, gb, gm
        p = 3
    else:
        JtJ[0, 0], JtJ[0, 1], JtJ[0, 2], JtJ[0, 3] = aa, ar, ab, am
        JtJ[1, 1], JtJ[1, 2], JtJ[1, 3] = rr_, rb, rm
        JtJ[2, 2], JtJ[2, 3], JtJ[3, 3] = bb, bm, mm
        Jtr[0], Jtr[1], Jtr[2], Jtr[3] = ga, gr, gb, gm
        p = 4
    for a in range(p):
        for b in range(a):
            JtJ[a, b] = JtJ[b, a]
    return p


@_jit
def full_lm(x, y, w, fixed_r0, r0, box, A, R0, lb, m, max_iter, s, r, s_t, r_t):
    """Levenberg-Marquardt in (A, [R0,] log B, m) with the analytic Jacobian.

    Marquardt's scaled damping; a step counts when it lowers the RSS. A and R0 are unbounded
    (callers check the bounds); (log B, m) are clipped into the search box ``box``: a step-like
    curve would otherwise send log B past exp's range. Converged when a taken
    step gains less than 1e-14 of the RSS or moves every parameter by less than 1e-12 of its
    size, or when a step fails to lower the RSS only by rounding. Returns
    ``(A, R0, log B, m, rss, ok, iterations)``; ok is False for a run that did not converge or
    left the finite numbers.
    """
    if fixed_r0:
        R0 = r0
    JtJ = np.empty((4, 4))
    Jtr = np.empty(4)
    H = np.empty((4, 4))
    g = np.empty(4)
    step = np.empty(4)
    P = np.array([A, R0, lb, m])
    cols = np.array([0, 2, 3, 3]) if fixed_r0 else np.array([0, 1, 2, 3])
    cost = _curve_cost(x, y, w, P[0], P[1], P[2], P[3], s, r)
    if not math.isfinite(cost):
        return P[0], P[1], P[2], P[3], cost, False, 0
    lam = 1e-4
    ok = False
    it = 0
    fresh = True
    p = 3 if fixed_r0 else 4
    trial = np.empty(4)
    while it < max_iter:
        it += 1
        if fresh:
            p = _normal_equations(x, w, P[0], P[1], P[2], P[3], fixed_r0, s, r, JtJ, Jtr)
        for a in range(p):
            for b in range(p):
                H[a, b] = JtJ[a, b]
            H[a, a] += lam * (JtJ[a, a] + 1e-300)
            g[a] = Jtr[a]
        if not _solve_spd(H, g, p, step):
            lam *= 8.0
            fresh = False
            if lam > 1e12:
                break
            continue
        for a in range(4):
            trial[a] = P[a]
        small = True
        for a in range(p):
            st = step[a]
            if not math.isfinite(st):
                st = 0.0
            trial[cols[a]] += st
            if abs(st) >= 1e-12 * (1.0 + abs(P[cols[a]])):
                small = False
        trial[2] = _clip(trial[2], box[0], box[2])
        trial[3] = _clip(trial[3], box[1], box[3])
        cost_t = _curve_cost(x, y, w, trial[0], trial[1], trial[2], trial[3], s_t, r_t)
        if math.isfinite(cost_t) and cost_t <= cost:
            gain = cost - cost_t
            for a in range(4):
                P[a] = trial[a]
            for i in range(x.size):
                s[i] = s_t[i]
                r[i] = r_t[i]
            cost = cost_t
            lam /= 4.0
            fresh = True
            if gain <= 1e-14 * cost or small:
                ok = True
                break
        else:
            if math.isfinite(cost_t) and abs(cost_t - cost) <= 1e-13 * cost:
                ok = True  # at the optimum a step fails to lower the RSS only by rounding
                break
            lam *= 8.0
            fresh = False
            if lam > 1e12:
                break
    ok = ok and math.isfinite(cost)
    for a in range(4):
        ok = ok and math.isfinite(P[a])
    return P[0], P[1], P[2], P[3], cost, ok, it


@_jit
def gauss_newton_polish(x, y, w, fixed_r0, r0, bnd, box, A, R0, lb, m, steps, s, r, s_t, r_t):
    """A few Gauss-Newton steps in the full parameters with the analytic Jacobian.

    Applied only where the linear parameters are strictly inside their bounds (on a bound the
    projected solution is already exact in them); a step is kept only if it lowers the RSS and
    stays inside the bounds and the search box ``box`` (a run with no S-curve rewards ever
    sharper steps: log B would run past exp's range). Returns ``(A, R0, log B, m, rss)``.
    """
    inside = bnd[0] < A < bnd[1]
    if not fixed_r0:
        inside = inside and bnd[2] < R0 < bnd[3]
    JtJ = np.empty((4, 4))
    Jtr = np.empty(4)
    H = np.empty((4, 4))
    g = np.empty(4)
    step = np.empty(4)
    scale = np.empty(4)
    cost = _curve_cost(x, y, w, A, R0, lb, m, s, r)
    if inside:
        for _ in range(steps):
            p = _normal_equations(x, w, A, R0, lb, m, fixed_r0, s, r, JtJ, Jtr)
            for a in range(p):
                scale[a] = math.sqrt(JtJ[a, a]) if JtJ[a, a] > 0 else 1.0
            for a in range(p):
                for b in range(p):
                    H[a, b] = JtJ[a, b] / (scale[a] * scale[b])
                H[a, a] += 1e-14
                g[a] = Jtr[a] / scale[a]
            if not _solve_spd(H, g, p, step):
                break
            for a in range(p):
                step[a] /= scale[a]
            new_A = A + step[0]
            if fixed_r0:
                new_R0, new_lb, new_m = R0, lb + step[1], m + step[2]
            else:
                new_R0, new_lb, new_m = R0 + step[1], lb + step[2], m + step[3]
            cost_new = _curve_cost(x, y, w, new_A, new_R0, new_lb, new_m, s_t, r_t)
            keep = (
                math.isfinite(cost_new)
                and cost_new <= cost
                and bnd[0] <= new_A <= bnd[1]
                and bnd[2] <= new_R0 <= bnd[3]
                and box[0] <= new_lb <= box[2]
                and box[1] <= new_m <= box[3]
            )
            if not keep:
                break
            A, R0, lb, m, cost = new_A, new_R0, new_lb, new_m, cost_new
            for i in range(x.size):
                s[i] = s_t[i]
                r[i] = r_t[i]
    return A, R0, lb, m, cost


@_jit
def solve_curve(x, y, w, fixed_r0, r0, bnd, starts, n_starts, max_iter, out):
    """One curve of :func:`solve_batch`: LM from each start, the best one polished.

    ``out`` (8,) receives ``A, R0, log B, m, rss, converged, at_theta_bound, iterations``.
    """
    n = x.size
    s, r, s_t, r_t = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    jac = np.empty((2, n))
    box = np.empty(4)
    box[0], box[1], box[2], box[3] = theta_box(x, w, True)
    best = -1
    b_lb = b_m = b_A = b_R0 = b_cost = 0.0
    b_conv, b_its = False, 0
    for t in range(n_starts):
        repeated = False
        for u in range(t):
            repeated = repeated or (starts[u, 0] == starts[t, 0] and starts[u, 1] == starts[t, 1])
        if repeated:  # the grid had fewer minima than starts: the same LM would run again
            continue
        lb, m, A, R0, cost, conv, its = varpro_lm(
            x, y, w, fixed_r0, r0, bnd, box, starts[t, 0], starts[t, 1], max_iter, 1e-13,
            s, r, s_t, jac,
        )  # fmt: skip
        if not math.isfinite(cost):
            cost = math.inf
        if best < 0 or cost < b_cost:
            best, b_lb, b_m, b_A, b_R0, b_cost, b_conv, b_its = t, lb, m, A, R0, cost, conv, its
    A, R0, lb, m, rss = gauss_newton_polish(
        x, y, w, fixed_r0, r0, bnd, box, b_A, b_R0, b_lb, b_m, 3, s, r, s_t, r_t
    )
    tol_b, tol_m = 1e-6 * (box[2] - box[0]), 1e-6 * (box[3] - box[1])
    at_bound = lb - box[0] < tol_b or box[2] - lb < tol_b or m - box[1] < tol_m
    at_bound = at_bound or box[3] - m < tol_m
    out[0], out[1], out[2], out[3], out[4] = A, R0, lb, m, rss
    out[5] = 1.0 if (b_conv and not at_bound) else 0.0
    out[6] = 1.0 if at_bound else 0.0
    out[7] = b_its


@_cached_njit(nogil=True, parallel=True, error_model="numpy")
def solve_batch(x, y, w, fixed_r0, r0, bnd, top, starts, use_grid, max_iter):
    """Every curve of a batch in parallel: ``(k, 8)`` rows of :func:`solve_curve`'s output.

    ``x`` is ``(1, n)`` (one compute axis for all) or ``(k, n)``; ``y, w`` are ``(k, n)``;
    ``starts`` is ``(k, t, 2)`` warm starts, used when ``use_grid`` is False (else ignored and the
    ``top`` best grid minima of each curve are refined).
    """
    k = y.shape[0]
    out = np.empty((k, 8))
    for c in prange(k):
        xc = x[0] if x.shape[0] == 1 else x[c]
        if use_grid:
            st = np.empty((top, 2))
            st_rss = np.empty(top)
            grid_starts(xc, y[c], w[c], fixed_r0, r0, bnd, top, st, st_rss)
            solve_curve(xc, y[c], w[c], fixed_r0, r0, bnd, st, top, max_iter, out[c])
        else:
            solve_curve(xc, y[c], w[c], fixed_r0, r0, bnd, starts[c], starts.shape[1], max_iter,
                        out[c])  # fmt: skip
    return out


@_jit
def _interior(value, lo, hi):
    # an infinite bound is never near
    return (lo == -math.inf or lo + 1e-7 * (1 + abs(lo)) < value) and (
        hi == math.inf or value < hi - 1e-7 * (1 + abs(hi))
    )


@_jit
def same_basin(x, y, w, fixed_r0, r0, bnd, opt0, opt1, st0, st1, start_rss, s, r):
    """True when the projected RSS has no barrier between a start and a known optimum.

    Six points on the segment: if none rises above the start's own RSS, descending from the start
    leads to the optimum already found.
    """
    for k in range(1, 7):
        t = k / 7.0
        cost, _, _ = projected(
            x, y, w, opt0 + t * (st0 - opt0), opt1 + t * (st1 - opt1), fixed_r0, r0, bnd, s, r
        )
        if not cost <= start_rss * (1 + 1e-9):
            return False
    return True


@_jit
def solve_single(x, y, w, fixed_r0, r0, bnd, starts, start_rss, refined, out):
    """One curve from its grid minima by LM in the full parameters (the interior optima).

    Every grid basin whose RSS is within 25% of the best is refined (unless no barrier separates
    it from the optimum already found). ``starts`` (8, 2), ``start_rss`` (8,) and ``refined``
    (8,) receive the grid minima and which were refined; ``out`` (5,) ``A, R0, log B, m, rss`` of
    the best optimum strictly inside the bounds and the search box. Returns ``(found,
    left_the_box)``: whether such an optimum was found, and whether some basin's LM ended outside
    (failed, on a bound or beyond the box: the bounded solver must then decide).
    """
    n = x.size
    s, r, s_t, r_t = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    top = starts.shape[0]
    grid_starts(x, y, w, fixed_r0, r0, bnd, top, starts, start_rss)
    box = np.empty(4)
    box[0], box[1], box[2], box[3] = theta_box(x, w, False)
    found = False
    left = False
    for i in range(top):
        refined[i] = False
        dup = False
        for j in range(i):
            if starts[j, 0] == starts[i, 0] and starts[j, 1] == starts[i, 1]:
                dup = True
        if start_rss[i] > 1.25 * start_rss[0] or dup:
            refined[i] = dup
            continue
        refined[i] = True
        if found and same_basin(
            x, y, w, fixed_r0, r0, bnd, out[2], out[3], starts[i, 0], starts[i, 1], start_rss[i],
            s, r,
        ):  # fmt: skip
            continue
        _, A0, R00 = projected(x, y, w, starts[i, 0], starts[i, 1], fixed_r0, r0, bnd, s, r)
        A, R0, lb, m, rss, ok, _ = full_lm(
            x, y, w, fixed_r0, r0, box, A0, R00, starts[i, 0], starts[i, 1], 200, s, r, s_t, r_t
        )
        if ok:
            # on a ridge toward a step (B large, a flat run's fit) LM may stop with the linear
            # parameters a few digits short of their optimum for its (log B, m): the exact
            # projection there is never worse (a flat 12-point curve, R0 fixed: 1.6e-6 of the RSS)
            cost, A1, R01 = projected(x, y, w, lb, m, fixed_r0, r0, bnd, s, r)
            if cost < rss * (1 - 1e-12):
                A, R0, rss = A1, R01, cost
        inside = (
            ok
            and _interior(A, bnd[0], bnd[1])
            and (fixed_r0 or _interior(R0, bnd[2], bnd[3]))
            and box[0] < lb < box[2]
            and box[1] < m < box[3]
        )
        if inside and (not found or rss < out[4]):
            found = True
            out[0], out[1], out[2], out[3], out[4] = A, R0, lb, m, rss
        left = left or not inside
    return found, left


@_cached_njit(nogil=True, parallel=True, error_model="numpy")
def warm_lm_batch(x, y, w, fixed_r0, r0, bnd, start, max_iter, out):
    """Refit every row of ``y, w`` (k, n) from one start ``(A, R0, log B, m)`` (the bootstrap).

    Each row: LM in the full parameters with the analytic Jacobian (resamples sit near the
    original optimum, so a few quadratically converging steps suffice). ``out`` (k, 6) receives
    ``A, R0, log B, m, rss, ok`` where ok means converged strictly inside the bounds and the
    search box (rows that are not go to :func:`solve_batch`, warm-started as well). ``x`` is
    ``(n,)``, shared by all rows; zero weights drop points, as resampling does.
    """
    k, n = y.shape
    for c in prange(k):
        wc = w[c]
        s, r, s_t, r_t = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        box = np.empty(4)
        box[0], box[1], box[2], box[3] = theta_box(x, wc, True)
        A, R0, lb, m, rss, ok, _ = full_lm(
            x, y[c], wc, fixed_r0, r0, box, start[0], start[1], start[2], start[3], max_iter,
            s, r, s_t, r_t,
        )  # fmt: skip
        inside = (
            ok
            and bnd[0] < A < bnd[1]
            and (fixed_r0 or bnd[2] < R0 < bnd[3])
            and box[0] < lb < box[2]
            and box[1] < m < box[3]
        )
        out[c, 0], out[c, 1], out[c, 2], out[c, 3], out[c, 4] = A, R0, lb, m, rss
        out[c, 5] = 1.0 if inside else 0.0


@_jit
def _log_prior(z, k, fixed_r0, r0, kinds, lows, highs, mus, sds):
    """Log prior of walker ``k`` of ``z`` with the change of variables; ``(lp, A, B, R0)``.

    ``lp`` is ``-inf`` outside the supports (see :func:`log_posterior`).
    """
    A, B, C_mid = z[k, 0], math.exp(z[k, 1]), math.exp(z[k, 2])
    R0 = r0 if fixed_r0 else z[k, 3]
    lp = z[k, 1] + z[k, 2]
    for p in range(4 if not fixed_r0 else 3):
        val = A if p == 0 else (B if p == 1 else (C_mid if p == 2 else R0))
        if not (lows[p] <= val <= highs[p]):
            return -math.inf, A, B, R0
        kind = kinds[p]
        if kind == 1:
            lp -= math.log(val)
        elif kind == 2:
            lp -= 0.5 * ((val - mus[p]) / sds[p]) ** 2
        elif kind == 3:
            lp -= 0.5 * ((math.log(val) - mus[p]) / sds[p]) ** 2 + math.log(val)
    return lp, A, B, R0


@_jit_vec
def log_posterior(z, x, y, w2, fixed_r0, r0, kinds, lows, highs, mus, sds, fitted_noise, out):
    """Log posterior of every walker ``z`` (W, d) in (A, log B, log C_mid[, R0]), into ``out``.

    Priors per natural parameter in the order (A, B, C_mid, R0): ``kinds`` 0 uniform,
    1 loguniform, 2 normal, 3 lognormal (as :class:`rlcurves.bayes.Prior`), with hard supports
    ``lows, highs`` and ``mus, sds``; the Jacobian of sampling log B and log C_mid is included.
    The likelihood is ``-n/2 log RSS`` with ``fitted_noise`` (the Jeffreys-integrated scale),
    else ``-RSS/2`` (``w2`` = 1 / sigma^2). ``-inf`` outside the priors' supports.
    """
    n = x.size
    for k in range(z.shape[0]):
        lp, A, B, R0 = _log_prior(z, k, fixed_r0, r0, kinds, lows, highs, mus, sds)
        if not math.isfinite(lp):
            out[k] = -math.inf
            continue
        m = z[k, 2]
        rss = 0.0
        for i in range(n):
            ri = y[i] - R0 - (A - R0) * frac_vec(x[i], B, m)
            rss += w2[i] * ri * ri
        like = -0.5 * n * math.log(rss) if fitted_noise else -0.5 * rss
        total = lp + like
        out[k] = total if math.isfinite(total) else -math.inf


@_jit
def rss_from_log_posterior(z, log_post, n, fixed_r0, r0, kinds, lows, highs, mus, sds, out):
    """The weighted RSS of every draw ``z`` (k, d) from its log posterior (fitted noise).

    ``log_post`` is :func:`log_posterior`'s value with ``fitted_noise`` (``n`` points): the RSS is
    ``exp(-2 (log_post - log_prior) / n)``, to within a few units in the last place of the RSS
    (``log_post`` holds ~16 digits of a number of order ``n``), without a pass over the points.
    """
    for k in range(z.shape[0]):
        lp, _, _, _ = _log_prior(z, k, fixed_r0, r0, kinds, lows, highs, mus, sds)
        out[k] = math.exp(-2.0 * (log_post[k] - lp) / n)


@_jit_vec
def walker_rss(z, x, y, w2, fixed_r0, r0, out):
    """Weighted RSS of every draw ``z`` (k, d) in (A, log B, log C_mid[, R0]), into ``out``.

    The posterior's noise draws need it for every kept draw (millions in a long run).
    """
    for k in range(z.shape[0]):
        A, B, m = z[k, 0], math.exp(z[k, 1]), z[k, 2]
        R0 = r0 if fixed_r0 else z[k, 3]
        rss = 0.0
        for i in range(x.size):
            ri = y[i] - R0 - (A - R0) * frac_vec(x[i], B, m)
            rss += w2[i] * ri * ri
        out[k] = rss


@_jit
def covariance_natural(x, y, w, A, R0, B, m, fixed_r0, cov):
    """Weighted RSS and the unscaled covariance ``(J^T J)^-1`` at an optimum, in natural units.

    ``J`` is the weighted Jacobian in ``(A, B, C_mid[, R0])`` (R0 dropped with ``fixed_r0``);
    ``cov`` (p, p) receives the inverse, or ``inf`` everywhere where ``J^T J`` is singular: a
    zero or non-finite column, or an eigenvalue of the column-scaled matrix below 1e-13 of the
    largest (as :func:`rlcurves.result.covariance` has always judged it). Returns the RSS.
    """
    p = cov.shape[0]
    C_mid = math.exp(m)
    gain = A - R0
    JtJ = np.zeros((p, p))
    col = np.empty(4)
    rss = 0.0
    for i in range(x.size):
        s = frac(x[i], B, m)
        wi = w[i]
        ri = wi * (y[i] - (R0 + gain * s))
        rss += ri * ri
        ds = s * (1.0 - s)
        dx = 0.0 if x[i] == -math.inf else x[i] - m
        col[0] = s * wi
        col[1] = gain * ds * dx * B / B * wi  # d/dB = d/dlog B / B
        col[2] = -gain * ds * B / C_mid * wi  # d/dC_mid = d/dm / C_mid
        col[3] = (1.0 - s) * wi
        for a in range(p):
            for b in range(a, p):
                JtJ[a, b] += col[a] * col[b]
    d = np.empty(p)
    ok = True
    for a in range(p):
        for b in range(a):
            JtJ[a, b] = JtJ[b, a]
        d[a] = math.sqrt(JtJ[a, a])
        ok = ok and d[a] > 0 and math.isfinite(d[a])
    for a in range(p):
        for b in range(p):
            cov[a, b] = math.inf
    if not ok:
        return rss
    scaled = np.empty((p, p))
    for a in range(p):
        for b in range(p):
            scaled[a, b] = JtJ[a, b] / (d[a] * d[b])
    eig = np.linalg.eigvalsh(scaled)
    if eig[0] > 1e-13 * eig[p - 1]:
        inv = np.linalg.inv(scaled)
        for a in range(p):
            for b in range(p):
                cov[a, b] = inv[a, b] / (d[a] * d[b])
    return rss


@_jit
def peak_stats(compute, reward, A, B, C_mid, R0):
    """The numbers :func:`rlcurves.fit.detect_peak` judges a run by (points sorted by compute).

    Returns ``(sd, rho, m, tail_gap, k, i_peak, smooth_peak, drop, latest, c_peak)``: the
    residuals' sd (ddof 4) and lag-1 correlation (clipped to [0, 0.9]), the tail length ``m`` and
    the tail's mean residual, the smoothing window ``k``, where the smoothed curve (running mean
    of ``k``) first peaks and its value there, the fall from it to the last smoothed value, the
    mean of the last ``m`` rewards, and the compute at the peak's centre.
    """
    order = np.argsort(compute, kind="mergesort")
    n = compute.size
    r = np.empty(n)
    res = np.empty(n)
    lm = math.log(C_mid)
    mean = 0.0
    for j in range(n):
        i = order[j]
        r[j] = reward[i]
        x = math.log(compute[i]) if compute[i] > 0 else -math.inf
        res[j] = reward[i] - (R0 + (A - R0) * frac(x, B, lm))
        mean += res[j]
    mean /= n
    ss = 0.0
    for j in range(n):
        ss += (res[j] - mean) ** 2
    sd = math.sqrt(ss / (n - 4)) if n > 4 else math.nan
    # lag-1 Pearson correlation, as np.corrcoef(res[:-1], res[1:])
    ma = mb = 0.0
    for j in range(n - 1):
        ma += res[j]
        mb += res[j + 1]
    ma /= n - 1
    mb /= n - 1
    sab = saa = sbb = 0.0
    for j in range(n - 1):
        da, db = res[j] - ma, res[j + 1] - mb
        sab += da * db
        saa += da * da
        sbb += db * db
    rho = sab / math.sqrt(saa * sbb)
    rho = _clip(_clip(rho, -1.0, 1.0), 0.0, 0.9)
    m = max(5, n // 5)
    tail = latest = 0.0
    for j in range(n - m, n):
        tail += res[j]
        latest += r[j]
    k = max(3, n // 10)
    inv_k = 1.0 / k
    best, i_peak, last = -math.inf, 0, 0.0
    for j in range(n - k + 1):
        v = 0.0
        for i in range(j, j + k):
            v += r[i] * inv_k
        if v > best:
            best, i_peak = v, j
        last = v
    return (
        sd,
        rho,
        m,
        tail / m,
        k,
        i_peak,
        best,
        best - last,
        latest / m,
        compute[order[i_peak + k // 2]],
    )


# ---- one fit_sigmoid call in two compiled passes (validation, then solve + summary) ----------
# Layout of fit_one's ``out``: the optimum, its natural parameters, the covariance's RSS, then
# the ten numbers of peak_stats (NaN when the window has fewer than 15 points).
FIT_OUT = 17


@_jit
def scan_inputs(c, r, lo, hi, fixed_r0, r0, window):
    """One pass over a fit's data: is it fittable as it stands, and the fit window.

    Fills ``window`` (``lo <= c <= hi``) and returns ``(ok, n_window, r_min, r_max, range)``:
    ``r_min, r_max`` over all rewards (the "auto" bounds look at them), ``range`` the spread of
    the rewards inside the window. ``ok`` is True only when
    every check of :func:`rlcurves.fit.fit_sigmoid` passes: finite values, compute >= 0, at least
    as many points in the window as parameters, enough distinct compute values there, and a
    reward that is not constant (or differs from a fixed R0). When it is False the caller runs
    the checks in Python, which say what is wrong.
    """
    n = c.size
    ok = True
    r_min, r_max = math.inf, -math.inf
    c_lo, c_hi = math.inf, -math.inf
    w_lo, w_hi = math.inf, -math.inf
    first = math.nan
    n_win = 0
    for i in range(n):
        ci, ri = c[i], r[i]
        if not (math.isfinite(ci) and math.isfinite(ri) and ci >= 0.0):
            ok = False
        r_min = min(r_min, ri)
        r_max = max(r_max, ri)
        inside = ci >= lo and ci <= hi
        window[i] = inside
        if inside:
            if n_win == 0:
                first = ri
            n_win += 1
            c_lo = min(c_lo, ci)
            c_hi = max(c_hi, ci)
            w_lo = min(w_lo, ri)
            w_hi = max(w_hi, ri)
    n_params = 3 if fixed_r0 else 4
    if not ok or n_win < n_params:
        return False, n_win, r_min, r_max, w_hi - w_lo
    distinct = 1
    if c_lo < c_hi:
        distinct = 2
        for i in range(n):
            if window[i] and c_lo < c[i] < c_hi:
                distinct = 3
                break
    if distinct < n_params - 1 or (w_lo == w_hi and (not fixed_r0 or first == r0)):
        return False, n_win, r_min, r_max, w_hi - w_lo
    return True, n_win, r_min, r_max, w_hi - w_lo


@_jit
def fit_one(c, r, window, n_win, fixed_r0, r0, bnd, starts, start_rss, refined, cov, out):
    """:func:`solve_single`, :func:`covariance_natural` and :func:`peak_stats` in one call.

    The points of ``c, r`` inside ``window`` (``n_win`` of them, unit weights) are fitted as
    :func:`rlcurves.solver.solve_single` fits them; when its answer is an interior optimum that
    no other basin could beat (found, no basin's LM left the box, no unrefined grid minimum
    within 25% of its RSS) the covariance (``cov``, unscaled) and the peak numbers are computed
    at it, all into ``out`` (:data:`FIT_OUT`), and True is returned. Otherwise False: the bounded
    solver must decide, and the caller takes the general path.
    """
    cw = np.empty(n_win)
    rw = np.empty(n_win)
    x = np.empty(n_win)
    w = np.ones(n_win)
    j = 0
    for i in range(c.size):
        if window[i]:
            cw[j] = c[i]
            rw[j] = r[i]
            x[j] = math.log(c[i]) if c[i] > 0 else -math.inf
            j += 1
    sol = np.empty(5)
    found, left = solve_single(x, rw, w, fixed_r0, r0, bnd, starts, start_rss, refined, sol)
    if not found or left:
        return False
    for t in range(starts.shape[0]):
        if not refined[t] and start_rss[t] <= 1.25 * sol[4]:
            return False
    A, R0, lb, m = sol[0], sol[1], sol[2], sol[3]
    B, C_mid = math.exp(lb), math.exp(m)
    out[0], out[1], out[2], out[3], out[4], out[5] = A, R0, lb, m, B, C_mid
    out[6] = covariance_natural(x, rw, w, A, R0, B, math.log(C_mid), fixed_r0, cov)
    if n_win < 15:
        for t in range(7, FIT_OUT):
            out[t] = math.nan
        return True
    stats = peak_stats(cw, rw, A, B, C_mid, R0)
    out[7], out[8], out[9], out[10], out[11] = stats[0], stats[1], stats[2], stats[3], stats[4]
    out[12], out[13], out[14], out[15], out[16] = stats[5], stats[6], stats[7], stats[8], stats[9]
    return True


@_cached_njit(nogil=True, error_model="numpy", fastmath=_VECTOR_MATH)
def _coarse_grid_row(S, y, w, fixed_r0, r0, w2, w2y):
    """One row of :func:`coarse_grid_rss`: ``(index, rss)`` of its best grid point."""
    n = y.size
    tw = ty = 0.0
    for i in range(n):
        v = w[i] * w[i]
        w2[i] = v
        tw += v
        ty += v * y[i]
    y_mean = 0.0 if fixed_r0 else ty / tw
    yy = 0.0
    for i in range(n):
        d = y[i] - r0 if fixed_r0 else y[i] - y_mean
        w2y[i] = w2[i] * d
        yy += w2[i] * d * d
    pick, pick_rss = 0, math.inf
    for g in range(S.shape[0]):
        s0 = 0.0 if fixed_r0 else S[g, 0]
        sv = svv = svy = 0.0
        for i in range(n):
            s = S[g, i] - s0
            sv += w2[i] * s
            svv += w2[i] * s * s
            svy += w2y[i] * s
        if fixed_r0:
            rss = yy - svy * svy / svv
        else:
            var = svv - sv * sv / tw
            rss = yy - svy * svy / var if var > 0 else math.inf
        if not math.isfinite(rss):
            rss = math.inf
        if g == 0 or rss < pick_rss:
            pick, pick_rss = g, rss
    return pick, pick_rss


@_jit
def coarse_grid_rss(S, y, w, fixed_r0, r0, best, best_rss):
    """Best point of a grid of curve shapes for every row: the bootstrap's basin screen.

    ``S`` (G, n) holds the fraction of gain of every grid point at the shared compute axis;
    ``y, w`` are (k, n). The linear parameters are unbounded here (a screen, not a fit): with R0
    free the RSS of the best ``R0 + (A - R0) s``, with R0 fixed that of the best gain (``inf``
    where undefined). ``best`` (k,) receives the index of each row's smallest RSS (the first one
    on ties, as ``np.argmin``), ``best_rss`` (k,) that RSS (see
    :func:`rlcurves.bootstrap.coarse_grid`).

    With R0 free the moments are centred (the rewards on their weighted mean, each grid curve on
    its value at the first point): where a grid curve is nearly flat over the data (s within
    1e-9 of 1, say) the raw moments lose every digit to cancellation and could rank that point
    best; the centred ones keep them, as :func:`projected` does. Serial: the screen covers 128
    rows, a millisecond, which threads on a busy machine only slow down.
    """
    n = y.shape[1]
    w2, w2y = np.empty(n), np.empty(n)
    for c in range(y.shape[0]):
        best[c], best_rss[c] = _coarse_grid_row(S, y[c], w[c], fixed_r0, r0, w2, w2y)


@_jit
def de_half_step(coords, log_prob, s_idx, c_idx, i1, i2, noise, log_u, g0, sigma, accepted,
                 x, y, w2, fixed_r0, r0, kinds, lows, highs, mus, sds, fitted_noise):  # fmt: skip
    """One half-sweep of :class:`rlcurves.bayes.BlockDEMove` with the compiled log posterior.

    Walker ``s_idx[b, j]`` proposes ``coords[s] + gamma (coords[c1] - coords[c2])`` with
    ``c1, c2 = c_idx[b, i1[b, j]], c_idx[b, i2[b, j]]`` and ``gamma = g0 (1 + sigma noise)``, and
    takes it when its log posterior (:func:`log_posterior`, arguments from ``x`` on) minus its
    current one exceeds ``log_u``: ``coords``, ``log_prob`` and ``accepted`` are updated in place.
    The same arithmetic, in the same order, as the numpy move (the random numbers come from it):
    the same seed gives the same chain.
    """
    n_blocks, n_s = s_idx.shape
    ndim = coords.shape[1]
    q = np.empty((n_blocks * n_s, ndim))
    for b in range(n_blocks):
        for j in range(n_s):
            a, c = c_idx[b, i1[b, j]], c_idx[b, i2[b, j]]
            gamma = g0 * (1.0 + sigma * noise[b, j])
            s = s_idx[b, j]
            for d in range(ndim):
                q[b * n_s + j, d] = coords[s, d] + gamma * (coords[a, d] - coords[c, d])
    new_lp = np.empty(n_blocks * n_s)
    log_posterior(q, x, y, w2, fixed_r0, r0, kinds, lows, highs, mus, sds, fitted_noise, new_lp)
    for b in range(n_blocks):
        for j in range(n_s):
            t = b * n_s + j
            s = s_idx[b, j]
            if new_lp[t] - log_prob[s] > log_u[t]:
                for d in range(ndim):
                    coords[s, d] = q[t, d]
                log_prob[s] = new_lp[t]
                accepted[s] = True


# ---- the sweep's exact risk (rlcurves.decide._ExactRisk) ----------------------------------------
@_cached_njit(nogil=True)
def _share_below(d, grid, lo, hi, strict, out):
    """``out[i]`` = the share of the sorted draws ``d`` below (``strict``) or at most ``grid[lo +
    i]`` for ``i < hi - lo``: ``searchsorted(d, grid[lo:hi], "left" or "right") / d.size`` by
    one merge of the two sorted arrays."""
    n = d.size
    k = 0
    for i in range(hi - lo):
        v = grid[lo + i]
        if strict:
            while k < n and d[k] < v:
                k += 1
        else:
            while k < n and d[k] <= v:
                k += 1
        out[i] = k / n


@_cached_njit(nogil=True)
def exact_risk_times(d, grid, upto, strict, product, zero):
    """A run's factor joins a product over ``grid[:upto]``: ``P(X < grid)`` (``strict``) or
    ``P(X <= grid)`` of its sorted draws ``d`` multiplies ``product`` where it is positive and
    counts in ``zero`` where it is 0."""
    share = np.empty(upto)
    _share_below(d, grid, 0, upto, strict, share)
    for i in range(upto):
        if share[i] > 0.0:
            product[i] *= share[i]
        else:
            zero[i] += 1


@_cached_njit(nogil=True)
def exact_risk_with(d, at, y, F, f_zero, G, g_zero, suffix, start, end, f_out, g_out):
    """The exact risk with a kept run of sorted draws ``d`` stopped too, priced over the window
    ``[start, end)`` of the terms it changes (:class:`rlcurves.decide._ExactRisk`): ``F``, ``G``
    are the products of the stopped runs' ``P(X <= at)`` and the kept runs' ``P(X < y)`` over
    their nonzero factors, ``f_zero``, ``g_zero`` the counts of zero factors, ``suffix`` the
    suffix sums of the terms. The run's own factors over the window are left in ``f_out``
    (``end - start + 1``) and ``g_out`` (``end - start``) for :func:`exact_risk_stop`."""
    _share_below(d, at, start, end + 1, False, f_out)
    _share_below(d, y, start, end, True, g_out)
    total = 0.0
    k = start
    f_prev = F[k] * f_out[0] if f_zero[k] + (f_out[0] <= 0.0) == 0 else 0.0
    for i in range(end - start):
        k = start + i
        f_next = F[k + 1] * f_out[i + 1] if f_zero[k + 1] + (f_out[i + 1] <= 0.0) == 0 else 0.0
        if g_out[i] > 0.0:
            g_new = G[k] / g_out[i] if g_zero[k] == 0 else 0.0
        else:
            g_new = G[k] if g_zero[k] == 1 else 0.0
        total += (f_next - f_prev) * g_new
        f_prev = f_next
    return total + suffix[end]


@_cached_njit(nogil=True)
def exact_risk_stop(F, f_zero, G, g_zero, suffix, start, end, f_out, g_out):
    """Move the run priced last by :func:`exact_risk_with` (its factors ``f_out``, ``g_out`` over
    ``[start, end)``) from the kept runs to the stopped: its factors join ``F`` and leave ``G``;
    below ``start`` its ``P(X <= at)`` and ``P(X < y)`` are 0 (a zero factor joins the stopped
    product and leaves the kept one, and the terms there are 0); the suffix sums are recomputed
    from ``end`` down."""
    for i in range(end - start + 1):
        k = start + i
        if f_out[i] > 0.0:
            F[k] *= f_out[i]
        else:
            f_zero[k] += 1
    for i in range(end - start):
        k = start + i
        if g_out[i] > 0.0:
            G[k] /= g_out[i]
        else:
            g_zero[k] -= 1
    for k in range(start):
        f_zero[k] += 1
        g_zero[k] -= 1
    acc = suffix[end]
    f_next = F[end] if f_zero[end] == 0 else 0.0
    for k in range(end - 1, start - 1, -1):
        f_k = F[k] if f_zero[k] == 0 else 0.0
        g_k = G[k] if g_zero[k] == 0 else 0.0
        acc += (f_next - f_k) * g_k
        suffix[k] = acc
        f_next = f_k
    for k in range(start):
        suffix[k] = suffix[start]
