"""A compiled, step-for-step port of scipy's bounded Trust Region Reflective least squares.

:func:`bounded_polish` does what ``scipy.optimize.least_squares(residual, p0, jac=jacobian,
bounds=(lower, upper), method="trf", xtol=..., ftol=..., gtol=..., max_nfev=...)`` does for the
sigmoid's residual ``w * (y - R0 - (A - R0) s(x; exp(log B), m))`` and its analytic Jacobian, the
polish :func:`rlcurves.solver._bounded_single` runs in the full parameters ``[A, R0, log B, m]``
(``[A, log B, m]`` with R0 fixed). It ports scipy 1.17.1's ``scipy/optimize/_lsq/``:

- ``least_squares.py``: the checks on the bounds and the start, and the start moved strictly
  inside the bounds (``make_strictly_feasible`` with its default ``rstep=1e-10``); ``x_scale``
  defaults to 1 for 'trf' (no Jacobian scaling), the loss is 'linear' and ``tr_solver`` 'exact';
- ``trf.py``: ``trf_bounds`` (the Coleman-Li scaling, ``theta = max(0.995, 1 - g_norm)``, the
  inner loop that shrinks the trust region until the cost drops or ``max_nfev`` is spent, the
  same ``nfev`` count and status codes: 0 ``max_nfev`` reached, 1 ``gtol``, 2 ``ftol``, 3
  ``xtol``, 4 both) and ``select_step`` (the constrained, reflected and Cauchy steps);
- ``common.py``: ``solve_lsq_trust_region`` (More's method on one SVD per iteration),
  ``intersect_trust_region``, ``build_quadratic_1d``, ``minimize_quadratic_1d``,
  ``evaluate_quadratic``, ``update_tr_radius``, ``check_termination``, ``step_size_to_bound``,
  ``CL_scaling_vector``, ``find_active_constraints`` and ``make_strictly_feasible``.

Why: on a step-shaped curve of a few points (a jump between two evaluations) ``log B`` runs to
its bound and scipy crawls up to ``max_nfev`` evaluations of a Python residual, tens of
milliseconds a call, half the time of the library's slowest operation. Where the polish stops
moves the bootstrap resamples warm-started from it, and a calibration measured on real runs with
them, so this is the same algorithm, not another optimizer: it should stop where scipy stops.

To stop where scipy stops the port repeats scipy's floating-point operations, not just its
formulas: every ``np.dot``, ``J.dot`` and ``norm`` is numba's ``np.dot`` (BLAS ``ddot`` /
``dgemv`` with the same transposition as numpy's call, hence the same kernel and summation
order), the SVD is numba's ``np.linalg.svd`` (LAPACK ``dgesdd`` from the same library as
``scipy.linalg.svd``), the sums of 3 or 4 terms add left to right as numpy's do, and scalar
``x ** 2`` and ``x ** 0.5`` call libm's ``pow`` as numpy's scalars do. The transcendental
functions must match numpy's too: where numpy computes ``exp`` and array ``power`` with the SVML
routines it carries (x86-64 with AVX-512), this module calls those same routines
(``__svml_exp8_ha``, ``__svml_pow8_ha`` exported by numpy's ``_multiarray_umath``), otherwise
libm's. Which one numpy uses is found on the first call by comparing both with numpy on probe
values; the BLAS and LAPACK results are checked the same way (:func:`arithmetic_matches_scipy`
says whether everything matched bit for bit). So it does: against scipy on 3,000 drawn polish
problems (``tests/test_trf.py``'s kinds) and on the 692 polish calls made while fitting
prefixes of every corpus run, the same status, ``nfev``, parameters and cost, bit for bit, in
every one. It has to be exact: with libm's exp in place of numpy's (an ulp apart in ~5% of the
values) a sixth of the problems stopped after another number of evaluations.

Nothing is compiled at import: the kernels compile on the first call (or load from numba's
on-disk cache).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import math
import os
import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._kernels import _cached_njit

__all__ = ["arithmetic_matches_scipy", "available", "bounded_polish"]

_jit = _cached_njit(nogil=True, error_model="numpy")

EPS = float(np.finfo(float).eps)
# the external routines the kernels call, by names of this module's own (LLVM does not recognize
# them as library calls, so it cannot rewrite pow(x, 2) as x * x or pow(x, 0.5) as sqrt(x),
# which numpy does not do either); their addresses are registered before the first call
_SYM_EXP8 = "rlcurves_trf_svml_exp8"
_SYM_POW8 = "rlcurves_trf_svml_pow8"
_SYM_POW = "rlcurves_trf_libm_pow"
_V8 = ir.VectorType(ir.DoubleType(), 8)

# error codes of the kernel, raised as scipy raises them
_ERRORS = {
    1: (ValueError, "Residuals are not finite in the initial point."),
    2: (ValueError, "`s` is zero."),
    3: (ValueError, "`x` is not within the trust region."),
    4: (ValueError, "array must not contain infs or NaNs"),
}


# ---- the external math routines -----------------------------------------------------------------
@intrinsic
def _svml_exp8(typingctx, buf):
    """``buf[:8] = exp(buf[:8])`` by SVML's ``__svml_exp8_ha`` (numpy's exp on AVX-512)."""
    sig = types.void(buf)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(ary.data, _V8.as_pointer())
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V8, [_V8]), _SYM_EXP8)
        builder.store(builder.call(fn, [builder.load(ptr, align=8)]), ptr, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _svml_pow8(typingctx, buf, expo):
    """``buf[:8] = buf[:8] ** expo[:8]`` by SVML's ``__svml_pow8_ha`` (numpy's array power)."""
    sig = types.void(buf, expo)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        b = context.make_array(signature.args[1])(context, builder, args[1])
        pa = builder.bitcast(a.data, _V8.as_pointer())
        pb = builder.bitcast(b.data, _V8.as_pointer())
        fnty = ir.FunctionType(_V8, [_V8, _V8])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _SYM_POW8)
        out = builder.call(fn, [builder.load(pa, align=8), builder.load(pb, align=8)])
        builder.store(out, pa, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _libm_pow(typingctx, a, b):
    """libm's ``pow(a, b)``, what numpy's float64 scalars (and Python floats) compute for ``**``."""
    sig = types.float64(types.float64, types.float64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), ir.DoubleType()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _SYM_POW)
        return builder.call(fn, args)

    return sig, codegen


@_jit
def _exp_inplace(t, n, mode, buf):
    """``t[:n] = exp(t[:n])`` as numpy computes it: SVML 8 lanes at a time (mode 1) or libm."""
    if mode == 1:
        for i in range(0, n, 8):
            k = min(8, n - i)
            for j in range(8):
                buf[j] = t[i + j] if j < k else 0.0
            _svml_exp8(buf)
            for j in range(k):
                t[i + j] = buf[j]
    else:
        for i in range(n):
            t[i] = math.exp(t[i])


@_jit
def _exp_scalar(v, mode, buf):
    if mode == 1:
        buf[0] = v
        for j in range(1, 8):
            buf[j] = 0.0
        _svml_exp8(buf)
        return buf[0]
    return math.exp(v)


@_jit
def _cube_inplace(t, mode, buf, expo):
    """``t = t ** 3`` as numpy's array power computes it (SVML, mode 1, or libm)."""
    n = t.size
    if mode == 1:
        for i in range(0, n, 8):
            k = min(8, n - i)
            for j in range(8):
                buf[j] = t[i + j] if j < k else 0.0
                expo[j] = 3.0
            _svml_pow8(buf, expo)
            for j in range(k):
                t[i + j] = buf[j]
    else:
        for i in range(n):
            t[i] = _libm_pow(t[i], 3.0)


@_jit
def _probe_kernel(v, exp_mode, pow_mode):
    """exp of every value, exp of the first one as a scalar, and |v| ** 3: the probe of
    :func:`_math_modes`."""
    buf = np.zeros(8)
    expo = np.zeros(8)
    e = v.copy()
    _exp_inplace(e, e.size, exp_mode, buf)
    first = _exp_scalar(v[0], exp_mode, buf)
    c = np.abs(v)
    _cube_inplace(c, pow_mode, buf, expo)
    return e, first, c


# ---- the model ----------------------------------------------------------------------------------
@_jit
def _unpack(p, fixed, r0):
    if fixed:
        return p[0], r0, p[1], p[2]
    return p[0], p[1], p[2], p[3]


@_jit
def _exp_terms(p, fixed, r0, xd, t, mode, buf):
    """``t = exp(B (m - x))`` as numpy computes it, and ``(A, R0, B, m)``."""
    A, R0, lb, m = _unpack(p, fixed, r0)
    B = _exp_scalar(lb, mode, buf)
    for i in range(xd.size):
        t[i] = B * (m - xd[i])
    _exp_inplace(t, xd.size, mode, buf)
    return A, R0, B, m


@_jit
def _residual(p, fixed, r0, xd, yd, wd, f, t, mode, buf):
    """``f = w * (y - R0 - (A - R0) * fraction_of_gain(x, exp(log B), m))``, numpy's operations."""
    A, R0, _, _ = _exp_terms(p, fixed, r0, xd, t, mode, buf)
    gain = A - R0
    for i in range(xd.size):
        s = 1.0 / (t[i] + 1.0)
        f[i] = wd[i] * ((yd[i] - R0) - gain * s)


@_jit
def _jacobian(p, fixed, r0, xd, wd, J, t, mode, buf):
    """``-(jacobian_internal(x, A, R0, exp(log B), m)) * w[:, None]`` (columns 0, 2, 3 with R0
    fixed), numpy's operations."""
    A, R0, B, m = _exp_terms(p, fixed, r0, xd, t, mode, buf)
    gain = A - R0
    for i in range(xd.size):
        s = 1.0 / (t[i] + 1.0)
        ds = s * (1.0 - s)
        dx = 0.0 if xd[i] == -np.inf else xd[i] - m
        d_logb = gain * ds * dx * B
        d_m = -gain * ds * B
        wi = wd[i]
        J[i, 0] = -s * wi
        if fixed:
            J[i, 1] = -d_logb * wi
            J[i, 2] = -d_m * wi
        else:
            J[i, 1] = -(1.0 - s) * wi
            J[i, 2] = -d_logb * wi
            J[i, 3] = -d_m * wi


# ---- scipy/optimize/_lsq/common.py --------------------------------------------------------------
@_jit
def _norm(a):
    # numpy.linalg.norm of a vector: sqrt(x.dot(x))
    return math.sqrt(np.dot(a, a))


@_jit
def _max_abs(a):
    # norm(a, ord=np.inf) = abs(a).max(): NaN propagates
    out = abs(a[0])
    for i in range(1, a.size):
        v = abs(a[i])
        if v != v:
            return v
        if v > out:
            out = v
    return out


@_jit
def _py_max(a, b):
    # Python's max(a, b): b only if b > a
    return b if b > a else a


@_jit
def _py_min(a, b):
    # Python's min(a, b): b only if b < a
    return b if b < a else a


@_jit
def _np_maximum(a, b):
    if a != a or b != b:
        return np.nan
    return a if a >= b else b


@_jit
def _np_minimum(a, b):
    if a != a or b != b:
        return np.nan
    return a if a <= b else b


@_jit
def _in_bounds(x, lb, ub):
    for i in range(x.size):
        if not (x[i] >= lb[i] and x[i] <= ub[i]):
            return False
    return True


@_jit
def _step_size_to_bound(x, s, lb, ub, hits):
    """``step_size_to_bound``: the step along ``s`` to the first bound; ``hits`` (-1, 0, 1)."""
    n = x.size
    steps = np.empty(n)
    for i in range(n):
        if s[i] != 0:
            steps[i] = _np_maximum((lb[i] - x[i]) / s[i], (ub[i] - x[i]) / s[i])
        else:
            steps[i] = np.inf
    min_step = steps[0]
    for i in range(1, n):
        if min_step != min_step:
            break
        v = steps[i]
        if v != v or v < min_step:
            min_step = v
    for i in range(n):
        if steps[i] == min_step:
            hits[i] = 1 if s[i] > 0 else (-1 if s[i] < 0 else 0)
        else:
            hits[i] = 0
    return min_step


@_jit
def _make_strictly_feasible(x, lb, ub, rstep):
    """``make_strictly_feasible`` (with ``find_active_constraints(x, lb, ub, rstep)``)."""
    n = x.size
    x_new = x.copy()
    for i in range(n):
        active = 0
        if rstep == 0:
            if x[i] <= lb[i]:
                active = -1
            if x[i] >= ub[i]:
                active = 1
        else:
            lower_dist = x[i] - lb[i]
            upper_dist = ub[i] - x[i]
            lower_threshold = rstep * _np_maximum(1.0, abs(lb[i]))
            upper_threshold = rstep * _np_maximum(1.0, abs(ub[i]))
            if np.isfinite(lb[i]) and lower_dist <= _np_minimum(upper_dist, lower_threshold):
                active = -1
            if np.isfinite(ub[i]) and upper_dist <= _np_minimum(lower_dist, upper_threshold):
                active = 1
        if rstep == 0:
            if active == -1:
                x_new[i] = np.nextafter(lb[i], ub[i])
            elif active == 1:
                x_new[i] = np.nextafter(ub[i], lb[i])
        else:
            if active == -1:
                x_new[i] = lb[i] + rstep * _np_maximum(1.0, abs(lb[i]))
            elif active == 1:
                x_new[i] = ub[i] - rstep * _np_maximum(1.0, abs(ub[i]))
        if x_new[i] < lb[i] or x_new[i] > ub[i]:
            x_new[i] = 0.5 * (lb[i] + ub[i])
    return x_new


@_jit
def _cl_scaling_vector(x, g, lb, ub, v, dv):
    """``CL_scaling_vector``: Coleman-Li's ``v`` and its derivative ``dv``, in place."""
    for i in range(x.size):
        v[i] = 1.0
        dv[i] = 0.0
        if g[i] < 0 and np.isfinite(ub[i]):
            v[i] = ub[i] - x[i]
            dv[i] = -1.0
        if g[i] > 0 and np.isfinite(lb[i]):
            v[i] = x[i] - lb[i]
            dv[i] = 1.0


@_jit
def _intersect_trust_region(x, s, Delta):
    """``intersect_trust_region``: (t_neg, t_pos, error code)."""
    a = np.dot(s, s)
    if a == 0:
        return 0.0, 0.0, 2
    b = np.dot(x, s)
    c = np.dot(x, x) - _libm_pow(Delta, 2.0)
    if c > 0:
        return 0.0, 0.0, 3
    d = math.sqrt(b * b - a * c)
    q = -(b + math.copysign(d, b))
    t1 = q / a
    t2 = c / q
    if t1 < t2:
        return t1, t2, 0
    return t2, t1, 0


@_jit
def _phi_and_derivative(alpha, suf, s, Delta, mode, buf, expo):
    n = s.size
    denom = np.empty(n)
    for i in range(n):
        denom[i] = s[i] * s[i] + alpha
    q = np.empty(n)
    for i in range(n):
        q[i] = suf[i] / denom[i]
    p_norm = _norm(q)
    phi = p_norm - Delta
    _cube_inplace(denom, mode, buf, expo)  # denom ** 3
    total = 0.0
    for i in range(n):
        term = suf[i] * suf[i] / denom[i]
        total = term if i == 0 else total + term  # np.sum below 8 terms: left to right
    phi_prime = -total / p_norm
    return phi, phi_prime


@_jit
def _solve_lsq_trust_region(n, m, uf, s, V, Delta, initial_alpha, pow_mode, buf, expo):
    """``solve_lsq_trust_region(n, m, uf, s, V, Delta, initial_alpha)``: (p, alpha)."""
    rtol = 0.01
    max_iter = 10
    suf = s * uf
    if m >= n:
        threshold = EPS * m * s[0]
        full_rank = s[n - 1] > threshold
    else:
        full_rank = False
    if full_rank:
        p = -np.dot(V, uf / s)
        if _norm(p) <= Delta:
            return p, 0.0
    alpha_upper = _norm(suf) / Delta
    if full_rank:
        phi, phi_prime = _phi_and_derivative(0.0, suf, s, Delta, pow_mode, buf, expo)
        alpha_lower = -phi / phi_prime
    else:
        alpha_lower = 0.0
    if not full_rank and initial_alpha == 0:
        alpha = _py_max(0.001 * alpha_upper, _libm_pow(alpha_lower * alpha_upper, 0.5))
    else:
        alpha = initial_alpha
    for _ in range(max_iter):
        if alpha < alpha_lower or alpha > alpha_upper:
            alpha = _py_max(0.001 * alpha_upper, _libm_pow(alpha_lower * alpha_upper, 0.5))
        phi, phi_prime = _phi_and_derivative(alpha, suf, s, Delta, pow_mode, buf, expo)
        if phi < 0:
            alpha_upper = alpha
        ratio = phi / phi_prime
        alpha_lower = _py_max(alpha_lower, alpha - ratio)
        alpha -= (phi + Delta) * ratio / Delta
        if abs(phi) < rtol * Delta:
            break
    q = np.empty(n)
    for i in range(n):
        q[i] = suf[i] / (s[i] * s[i] + alpha)
    p = -np.dot(V, q)
    p *= Delta / _norm(p)
    return p, alpha


@_jit
def _evaluate_quadratic(J, g, s, diag):
    Js = np.dot(J, s)
    q = np.dot(Js, Js)
    q += np.dot(s * diag, s)
    lin = np.dot(s, g)
    return 0.5 * q + lin


@_jit
def _build_quadratic_1d(J, g, s, diag):
    v = np.dot(J, s)
    a = np.dot(v, v)
    a += np.dot(s * diag, s)
    a *= 0.5
    b = np.dot(g, s)
    return a, b


@_jit
def _build_quadratic_1d_s0(J, g, s, diag, s0):
    v = np.dot(J, s)
    a = np.dot(v, v)
    a += np.dot(s * diag, s)
    a *= 0.5
    b = np.dot(g, s)
    u = np.dot(J, s0)
    b += np.dot(u, v)
    c = 0.5 * np.dot(u, u) + np.dot(g, s0)
    s0d = s0 * diag
    b += np.dot(s0d, s)
    c += 0.5 * np.dot(s0d, s0)
    return a, b, c


@_jit
def _minimize_quadratic_1d(a, b, lo, hi, c):
    """``minimize_quadratic_1d``: (t, value) at the least of lo, hi and the interior extremum."""
    t = np.empty(3)
    t[0] = lo
    t[1] = hi
    nt = 2
    if a != 0:
        extremum = -0.5 * b / a
        if lo < extremum and extremum < hi:
            t[2] = extremum
            nt = 3
    best = -1
    best_y = 0.0
    for i in range(nt):
        y = t[i] * (a * t[i] + b) + c
        if y != y:  # np.argmin: the first NaN
            return t[i], y
        if best < 0 or y < best_y:
            best = i
            best_y = y
    return t[best], best_y


@_jit
def _update_tr_radius(Delta, actual_reduction, predicted_reduction, step_norm, bound_hit):
    if predicted_reduction > 0:
        ratio = actual_reduction / predicted_reduction
    elif predicted_reduction == actual_reduction and actual_reduction == 0:
        ratio = 1.0
    else:
        ratio = 0.0
    if ratio < 0.25:
        Delta = 0.25 * step_norm
    elif ratio > 0.75 and bound_hit:
        Delta *= 2.0
    return Delta, ratio


@_jit
def _check_termination(dF, F, dx_norm, x_norm, ratio, ftol, xtol):
    ftol_satisfied = dF < ftol * F and ratio > 0.25
    xtol_satisfied = dx_norm < xtol * (xtol + x_norm)
    if ftol_satisfied and xtol_satisfied:
        return 4
    if ftol_satisfied:
        return 2
    if xtol_satisfied:
        return 3
    return -1


@_jit
def _compute_grad(J, f, fixed):
    """``compute_grad``: ``J.T.dot(f)``. With R0 fixed the polish's Jacobian is
    ``J[:, [0, 2, 3]]``, which numpy lays out in Fortran order, so numpy's ``J.T`` is C-ordered
    and BLAS runs its transposed kernel (another summation order): the same here."""
    if fixed:
        return np.dot(np.ascontiguousarray(J.T), f)
    return np.dot(J.T, f)


# ---- scipy/optimize/_lsq/trf.py -----------------------------------------------------------------
@_jit
def _select_step(x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub, theta):
    """``select_step``: (step, step_h, predicted reduction, error code). ``p``, ``p_h`` change."""
    n = x.size
    xp = x + p
    if _in_bounds(xp, lb, ub):
        p_value = _evaluate_quadratic(J_h, g_h, p_h, diag_h)
        return p, p_h, -p_value, 0

    hits = np.empty(n, dtype=np.int64)
    p_stride = _step_size_to_bound(x, p, lb, ub, hits)

    r_h = p_h.copy()
    for i in range(n):
        if hits[i] != 0:
            r_h[i] *= -1
    r = d * r_h

    p *= p_stride
    p_h *= p_stride
    x_on_bound = x + p

    _, to_tr, err = _intersect_trust_region(p_h, r_h, Delta)
    if err:
        return p, p_h, 0.0, err
    hits2 = np.empty(n, dtype=np.int64)
    to_bound = _step_size_to_bound(x_on_bound, r, lb, ub, hits2)

    r_stride = _py_min(to_bound, to_tr)
    if r_stride > 0:
        r_stride_l = (1 - theta) * p_stride / r_stride
        if r_stride == to_bound:
            r_stride_u = theta * to_bound
        else:
            r_stride_u = to_tr
    else:
        r_stride_l = 0.0
        r_stride_u = -1.0

    if r_stride_l <= r_stride_u:
        a, b, c = _build_quadratic_1d_s0(J_h, g_h, r_h, diag_h, p_h)
        r_stride, r_value = _minimize_quadratic_1d(a, b, r_stride_l, r_stride_u, c)
        r_h *= r_stride
        r_h += p_h
        r = r_h * d
    else:
        r_value = np.inf

    p *= theta
    p_h *= theta
    p_value = _evaluate_quadratic(J_h, g_h, p_h, diag_h)

    ag_h = -g_h
    ag = d * ag_h

    to_tr = Delta / _norm(ag_h)
    to_bound = _step_size_to_bound(x, ag, lb, ub, hits2)
    if to_bound < to_tr:
        ag_stride = theta * to_bound
    else:
        ag_stride = to_tr

    a, b = _build_quadratic_1d(J_h, g_h, ag_h, diag_h)
    ag_stride, ag_value = _minimize_quadratic_1d(a, b, 0.0, ag_stride, 0.0)
    ag_h *= ag_stride
    ag *= ag_stride

    if p_value < r_value and p_value < ag_value:
        return p, p_h, -p_value, 0
    elif r_value < p_value and r_value < ag_value:
        return r, r_h, -r_value, 0
    else:
        return ag, ag_h, -ag_value, 0


@_jit
def _trf_bounds(
    xd, yd, wd, fixed, r0, x0, lb, ub, ftol, xtol, gtol, max_nfev, exp_mode, pow_mode, x_out
):
    """``least_squares``' start, then ``trf_bounds``: (cost, nfev, status, error code); the
    solution in ``x_out``."""
    n = x0.size
    m = xd.size
    buf = np.zeros(8)
    expo = np.zeros(8)
    t = np.empty(m)

    x = _make_strictly_feasible(x0, lb, ub, 1e-10)
    x_out[:] = x
    f = np.empty(m)
    _residual(x, fixed, r0, xd, yd, wd, f, t, exp_mode, buf)
    for i in range(m):
        if not np.isfinite(f[i]):
            return np.nan, 1, -1, 1
    J = np.empty((m, n))
    _jacobian(x, fixed, r0, xd, wd, J, t, exp_mode, buf)
    nfev = 1

    cost = 0.5 * np.dot(f, f)
    g = _compute_grad(J, f, fixed)
    v = np.empty(n)
    dv = np.empty(n)
    _cl_scaling_vector(x, g, lb, ub, v, dv)
    q = np.empty(n)
    for i in range(n):
        q[i] = x[i] * 1.0 / math.sqrt(v[i])  # x0 * scale_inv / v**0.5, scale_inv = 1
    Delta = _norm(q)
    if Delta == 0:
        Delta = 1.0

    f_augmented = np.zeros(m + n)
    J_augmented = np.zeros((m + n, n))
    J_h = np.empty((m, n))
    d = np.empty(n)
    diag_h = np.empty(n)
    g_h = np.empty(n)
    f_new = np.empty(m)
    alpha = 0.0
    status = -1

    while True:
        _cl_scaling_vector(x, g, lb, ub, v, dv)
        gv = g * v
        g_norm = _max_abs(gv)
        if g_norm < gtol:
            status = 1
        if status != -1 or nfev == max_nfev:
            break

        for i in range(n):
            d[i] = math.sqrt(v[i]) * 1.0  # v**0.5 * scale
            diag_h[i] = g[i] * dv[i] * 1.0  # g * dv * scale
            g_h[i] = d[i] * g[i]
        f_augmented[:m] = f
        for i in range(m):
            for j in range(n):
                J_h[i, j] = J[i, j] * d[j]
                J_augmented[i, j] = J_h[i, j]
        for i in range(n):
            for j in range(n):
                J_augmented[m + i, j] = 0.0
            J_augmented[m + i, i] = math.sqrt(diag_h[i])
        for i in range(m + n):
            for j in range(n):
                if not np.isfinite(J_augmented[i, j]):
                    return cost, nfev, -1, 4
        U, s, Vt = np.linalg.svd(J_augmented, full_matrices=False)
        V = Vt.T
        uf = np.dot(U.T, f_augmented)

        theta = _py_max(0.995, 1 - g_norm)

        actual_reduction = -1.0
        cost_new = cost
        x_new = x
        while actual_reduction <= 0 and nfev < max_nfev:
            p_h, alpha = _solve_lsq_trust_region(n, m, uf, s, V, Delta, alpha, pow_mode, buf, expo)
            p = d * p_h
            step, step_h, predicted_reduction, err = _select_step(
                x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub, theta
            )
            if err:
                return cost, nfev, -1, err

            x_new = _make_strictly_feasible(x + step, lb, ub, 0.0)
            _residual(x_new, fixed, r0, xd, yd, wd, f_new, t, exp_mode, buf)
            nfev += 1

            step_h_norm = _norm(step_h)

            finite = True
            for i in range(m):
                if not np.isfinite(f_new[i]):
                    finite = False
                    break
            if not finite:
                Delta = 0.25 * step_h_norm
                continue

            cost_new = 0.5 * np.dot(f_new, f_new)
            actual_reduction = cost - cost_new
            Delta_new, ratio = _update_tr_radius(
                Delta,
                actual_reduction,
                predicted_reduction,
                step_h_norm,
                step_h_norm > 0.95 * Delta,
            )

            step_norm = _norm(step)
            status = _check_termination(
                actual_reduction, cost, step_norm, _norm(x), ratio, ftol, xtol
            )
            if status != -1:
                break

            alpha *= Delta / Delta_new
            Delta = Delta_new

        if actual_reduction > 0:
            x = x_new
            f[:] = f_new
            cost = cost_new
            _jacobian(x, fixed, r0, xd, wd, J, t, exp_mode, buf)
            g = _compute_grad(J, f, fixed)

    x_out[:] = x
    return cost, nfev, max(status, 0), 0


# ---- which exp and pow numpy computes with ------------------------------------------------------
_READY: dict = {}
_READY_LOCK = threading.Lock()


def _numpy_svml() -> tuple[int, int] | None:
    """Addresses of numpy's ``__svml_exp8_ha`` and ``__svml_pow8_ha``, where numba can call them
    (exported by numpy's umath module, and numba compiling for this host's AVX-512, which passes
    8 doubles in one register as SVML expects)."""
    import llvmlite.binding as llb
    from numba.core import config

    if (config.CPU_NAME and config.CPU_NAME != "host") or config.CPU_FEATURES:
        return None  # compiling for another target than this host: maybe another vector ABI
    if not llb.get_host_cpu_features().get("avx512f", False):
        return None
    here = os.path.join(os.path.dirname(np.__file__), "_core")
    for path in glob.glob(os.path.join(here, "_multiarray_umath*")):
        try:
            lib = ctypes.CDLL(path)
            exp8 = ctypes.cast(lib.__svml_exp8_ha, ctypes.c_void_p).value
            pow8 = ctypes.cast(lib.__svml_pow8_ha, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
        if exp8 and pow8:
            return exp8, pow8
    return None


def _libm_pow_address() -> int:
    for name in (None, ctypes.util.find_library("m"), ctypes.util.find_library("c"), "msvcrt"):
        try:
            lib = ctypes.CDLL(name)
            address = ctypes.cast(lib.pow, ctypes.c_void_p).value
        except (OSError, AttributeError, TypeError):
            continue
        if address:
            return address
    raise RuntimeError("rlcurves._trf: libm's pow was not found")


def _probe_values() -> np.ndarray:
    rng = np.random.default_rng(20260917)
    return np.concatenate(
        [
            rng.uniform(-3.0, 3.0, 997),
            rng.uniform(-60.0, 60.0, 1000),
            rng.uniform(-745.0, 709.0, 200),
            [0.0, 1e-300, -1e-18, 709.5, -708.5, -744.0, 710.0, -746.0, np.inf, -np.inf],
        ]
    )


def _math_modes() -> dict:
    """Register the external routines and find which exp and power match numpy's bit for bit."""
    with _READY_LOCK:
        if _READY:
            return _READY
        import llvmlite.binding as llb

        pow_address = _libm_pow_address()
        svml = _numpy_svml()
        llb.add_symbol(_SYM_POW, pow_address)
        # without SVML the kernels never call these (mode 0); libm's pow only keeps them linkable
        llb.add_symbol(_SYM_EXP8, svml[0] if svml else pow_address)
        llb.add_symbol(_SYM_POW8, svml[1] if svml else pow_address)

        v = _probe_values()
        with np.errstate(all="ignore"):
            want_exp = np.exp(v)
            want_first = np.exp(np.float64(v[0]))
            want_cube = np.abs(v) ** 3
        exp_mode = pow_mode = 0
        exact_exp = exact_pow = False
        for mode in (1, 0) if svml else (0,):
            e, first, c = _probe_kernel(v, mode, mode)
            if not exact_exp and np.array_equal(e, want_exp) and first == want_first:
                exp_mode, exact_exp = mode, True
            if not exact_pow and np.array_equal(c, want_cube):
                pow_mode, exact_pow = mode, True
        # numpy's float64 scalars raise to a power with libm's pow (Delta**2, the square root
        # of alpha_lower * alpha_upper), which is not always x * x or sqrt(x)
        bases = np.abs(v[:300]) * 1.37
        exact_scalar = all(
            float(np.float64(b) ** 2) == _probe_pow(b, 2.0)
            and float(np.float64(b) ** 0.5) == _probe_pow(b, 0.5)
            for b in bases
        )
        exact_blas = _probe_linear_algebra()
        _READY.update(
            exp_mode=exp_mode,
            pow_mode=pow_mode,
            exact=exact_exp and exact_pow and exact_scalar and exact_blas,
            exact_parts={
                "exp": exact_exp,
                "array power": exact_pow,
                "scalar power": exact_scalar,
                "blas/lapack": exact_blas,
            },
        )
        return _READY


@_jit
def _probe_pow_kernel(a, b):
    return _libm_pow(a, b)


def _probe_pow(a: float, b: float) -> float:
    return float(_probe_pow_kernel(float(a), float(b)))


@_jit
def _probe_linear_algebra_kernel(a, b, M, Ma, f):
    """The BLAS and LAPACK calls of the polish, as the kernels make them."""
    n = M.shape[1]
    vv = np.array([np.dot(a, b), np.dot(a[:n], b[:n])])
    mv = np.dot(M, a[:n])
    mtv = np.dot(M.T, b[: M.shape[0]])
    mtv_f = np.dot(np.ascontiguousarray(M.T), b[: M.shape[0]])
    U, s, Vt = np.linalg.svd(Ma, full_matrices=False)
    uf = np.dot(U.T, f)
    vq = np.dot(Vt.T, a[:n])
    return vv, mv, mtv, mtv_f, s, uf, vq


def _probe_linear_algebra() -> bool:
    """Whether numba's BLAS and LAPACK (scipy's library) give numpy's ``dot`` and
    ``scipy.linalg.svd``'s bits on the polish's shapes."""
    from scipy.linalg import svd

    rng = np.random.default_rng(20260918)
    for m, n in ((4, 3), (5, 4), (9, 3), (17, 4), (40, 4), (97, 3)):
        a = rng.standard_normal(m + n) * 10.0 ** rng.uniform(-4, 4, m + n)
        b = rng.standard_normal(m + n)
        M = rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-3, 3, (m, n))
        Ma = np.zeros((m + n, n))
        Ma[:m] = M
        Ma[m:] = np.diag(np.sqrt(np.abs(rng.standard_normal(n))) * (rng.random(n) < 0.7))
        f = np.zeros(m + n)
        f[:m] = b[:m]
        got = _probe_linear_algebra_kernel(a, b, M, Ma, f)
        U, s, Vt = svd(Ma, full_matrices=False)
        want = (
            np.array([np.dot(a, b), np.dot(a[:n], b[:n])]),
            M.dot(a[:n]),
            M.T.dot(b[:m]),
            np.asfortranarray(M).T.dot(b[:m]),
            s,
            U.T.dot(f),
            Vt.T.dot(a[:n]),
        )
        if not all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)):
            return False
    return True


def arithmetic_matches_scipy() -> bool:
    """Whether the kernels compute with numpy's and scipy's arithmetic, bit for bit, here.

    Probed once per process on the first call: ``exp`` and array ``**`` (numpy's SVML routines
    or libm), scalar ``**`` (libm's ``pow``), the BLAS ``dot`` / ``gemv`` calls and the LAPACK SVD
    of the polish's shapes. Where all match, :func:`bounded_polish` repeats scipy's iterates
    exactly; where one does not, it still runs scipy's algorithm, but its iterates may part from
    scipy's by rounding (and, on a step-shaped curve, stop elsewhere along the crawl).
    """
    return bool(_math_modes()["exact"])


def available() -> bool:
    """Whether the compiled polish can run here: its external math routines found and registered
    (libm's ``pow`` at least). Where they are not, :func:`rlcurves.solver._bounded_single` uses
    scipy's ``least_squares`` itself, which the port reproduces."""
    if _UNAVAILABLE:
        return False
    try:
        _math_modes()
    except (RuntimeError, OSError):
        _UNAVAILABLE.append(True)  # found once per process
        return False
    return True


_UNAVAILABLE: list[bool] = []


# ---- the public entry ---------------------------------------------------------------------------
def bounded_polish(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    r0: float | None,
    p0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    max_nfev: int = 2000,
    ftol: float = 1e-15,
    xtol: float = 1e-15,
    gtol: float = 1e-15,
) -> tuple[np.ndarray, float, int, int]:
    """scipy's ``least_squares(method="trf")`` on the sigmoid's weighted residual, compiled.

    Runs what ``scipy.optimize.least_squares(residual, p0, jac=jacobian, bounds=(lower, upper),
    method="trf", ftol=ftol, xtol=xtol, gtol=gtol, max_nfev=max_nfev)`` runs (scipy 1.17.1), for
    ``residual(p) = w * (y - R0 - (A - R0) * fraction_of_gain(x, exp(log B), m))`` and its
    analytic Jacobian, as :func:`rlcurves.solver._bounded_single` calls it, and stops where it
    stops.

    Parameters
    ----------
    x : ndarray, shape (n,)
        Log compute (``-inf`` for C = 0, where the fraction of the gain is 0).
    y : ndarray, shape (n,)
        Rewards.
    w : ndarray, shape (n,)
        Weights (``1 / sigma``; 0 drops a point).
    r0 : float or None
        Fixed R0, or None to fit it.
    p0 : ndarray, shape (4,) or (3,)
        Start: ``[A, R0, log B, m]``, or ``[A, log B, m]`` when ``r0`` is given. Like scipy, it
        must lie within the bounds (a start on a bound is moved 1e-10 relative inside).
    lower, upper : ndarray, shape like ``p0``
        Bounds (infinite where unbounded; each lower strictly below its upper, and at least one
        finite: scipy runs another algorithm, not ported, when none is).
    max_nfev : int
        Most residual evaluations (scipy's count, the start included).
    ftol, xtol, gtol : float
        scipy's tolerances on the cost's drop, the step and the scaled gradient.

    Returns
    -------
    p : ndarray
        The parameters where the polish stopped (scipy's ``res.x``).
    cost : float
        ``0.5 * sum(residual(p) ** 2)`` (scipy's ``res.cost``).
    nfev : int
        Residual evaluations (scipy's ``res.nfev``).
    status : int
        scipy's ``res.status``: 0 ``max_nfev`` reached, 1 ``gtol``, 2 ``ftol``, 3 ``xtol``,
        4 ``ftol`` and ``xtol``.

    Raises
    ------
    ValueError
        Where scipy raises it: bounds not strictly increasing, a start outside them, residuals
        not finite at the start, tolerances all below machine epsilon, a non-finite Jacobian
        (scipy's SVD check), and the trust-region intersection's own errors.
    numpy.linalg.LinAlgError
        The SVD did not converge (as in scipy).
    """
    xd = np.ascontiguousarray(x, dtype=np.float64)
    yd = np.ascontiguousarray(y, dtype=np.float64)
    wd = np.ascontiguousarray(w, dtype=np.float64)
    if xd.ndim != 1 or yd.shape != xd.shape or wd.shape != xd.shape or xd.size == 0:
        raise ValueError("x, y and w must be 1-D arrays of one non-zero length")
    fixed = r0 is not None
    n = 3 if fixed else 4
    x0 = np.atleast_1d(np.asarray(p0, dtype=np.float64)).copy()
    lb = np.atleast_1d(np.asarray(lower, dtype=np.float64)).copy()
    ub = np.atleast_1d(np.asarray(upper, dtype=np.float64)).copy()
    if x0.shape != (n,):
        raise ValueError(f"p0 must have {n} entries ({'R0 fixed' if fixed else 'R0 free'})")
    if lb.shape != x0.shape or ub.shape != x0.shape:
        raise ValueError("Inconsistent shapes between bounds and `x0`.")
    if np.any(lb >= ub):
        raise ValueError("Each lower bound must be strictly less than each upper bound.")
    if not np.all((x0 >= lb) & (x0 <= ub)):
        raise ValueError("Initial guess is outside of provided bounds")
    if np.all(lb == -np.inf) and np.all(ub == np.inf):
        raise ValueError("at least one bound must be finite (scipy's unbounded TRF is not ported)")
    if int(max_nfev) <= 0:
        raise ValueError("`max_nfev` must be None or positive integer.")
    tols = [0.0 if t is None else float(t) for t in (ftol, xtol, gtol)]
    if all(t < EPS for t in tols):
        raise ValueError(
            f"At least one of the tolerances must be higher than machine epsilon ({EPS:.2e})."
        )
    modes = _math_modes()
    out = np.empty(n)
    cost, nfev, status, err = _trf_bounds(
        xd,
        yd,
        wd,
        fixed,
        0.0 if r0 is None else float(r0),
        x0,
        lb,
        ub,
        tols[0],
        tols[1],
        tols[2],
        int(max_nfev),
        modes["exp_mode"],
        modes["pow_mode"],
        out,
    )
    if err:
        kind, message = _ERRORS[int(err)]
        raise kind(message)
    return out, float(cost), int(nfev), int(status)
