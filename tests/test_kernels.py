"""The compiled solver (numba kernels) against the numpy one it replaced (reference_solver.py).

Same optimum to 1e-9 relative RSS on the property-test curves (scales 1e1 to 1e24, 12-80 points,
noise 0.1-4%), fixed and free R0, one at a time and batched; the bootstrap's warm refit against
the reference's warm-started batch; the compiled log posterior against the model written in numpy.
"""

import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import reference_solver as ref
from hypothesis import example, given, settings
from test_fit_properties import curves, make_curve

from rlcurves import _kernels as K
from rlcurves import fit_sigmoid, sigmoid
from rlcurves import solver as S
from rlcurves.model import log_compute

PASS_RATE = ((0.0, 1.0), (0.0, 1.0))  # the bounds fit_sigmoid picks for a pass rate


def both_bounds(box=PASS_RATE):
    return S.Bounds(*box), ref.Bounds(*box)


def rel(a, b):
    return abs(a - b) / b


# the property tests' example budget; the rest (derandomized in CI) is the profile's: conftest.py
PROPERTY_SETTINGS = settings(max_examples=40)


@PROPERTY_SETTINGS
@given(curves())
# issue 38, both a rise between the first two of 12 points: with R0 fixed the two RSS end 3.6e-9
# apart on the way to a step; with R0 free the reference crawls to its iteration limit
@example(make_curve(1.0, 12, 3.0, 0.5, 0.0, 5.0, 0.0, 0.0078125, 0))
@example(make_curve(6.497953582808343, 12, 4.000209283926395, 0.3, 0.0, 4.000209283926395, 0.0,
                    0.001, 12))  # fmt: skip
# issue 38: flat within the noise (signal 0.1): the compiled solver's RSS 0.29% below the reference
@example(
    make_curve(3.8138484134009394, 65, 3.4759132356982403, 0.5277944788163763,
               0.21247400920098922, 4.84505326675299, -0.5, 0.013444006349738469, 18761)
)  # fmt: skip
def test_single_fit_matches_numpy_reference(curve):
    compute, reward, _, signal = curve
    x, w = log_compute(compute), np.ones(compute.size)
    new_b, ref_b = both_bounds()
    for r0 in (None, float(np.clip(reward[0], 0, 1))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = ref.solve_single(x, reward, w, r0, ref_b)
        got = S.solve_single(x, reward, w, r0, new_b)
        # Where the data leave B or C_mid open, the RSS surface is a flat valley or runs off to a
        # step (B -> inf between two points) whose infimum is approached, not attained, and on
        # a rise within the noise it has a local minimum for every step fitted into the noise:
        # the two solvers may stop at different points (issue 38: a step at the first of 12
        # points, R0 fixed, RSS 3.6e-9 apart; a flat 65-point curve where the compiled solver
        # found an RSS 0.27% below the reference's). There the compiled solver must be no
        # worse than the reference, to the global property test's 1e-7
        # (test_exact_fit_is_global; in 1,120 such fits drawn as here it never was, and was
        # better once). Where they are determined: the same optimum to 1e-9.
        if determined(x, reward, expected, r0):
            assert rel(got.rss[0], expected.rss[0]) <= 1e-9, (r0, got, expected)
        else:
            assert got.rss[0] <= expected.rss[0] * (1 + 1e-7), (r0, got, expected)
            continue
        if signal < 10 or got.at_theta_bound[0] or expected.at_theta_bound[0]:
            # a nearly unidentified curve (a rise of under 10 noise sd inside the data, or a
            # step between two points): the RSS is flat along B or C_mid, and where along it
            # either solver stops, and so its "converged" verdict, depends on the rounding of
            # the fastmath grid on the CPU at hand (seen on this project's dev machine, not in
            # CI: a 15-point step curve at signal 6.5, a flat 12-point one at 6.3, equal RSS
            # both). Equal RSS is the contract there.
            continue
        assert got.converged[0] == expected.converged[0]


def determined(x, reward, solution, r0):
    """Whether the data determine B and C_mid at a solution: their standard errors
    (``s^2 (J^T J)^-1`` at the solution) finite and smaller than the estimates themselves."""
    from rlcurves.result import covariance

    B, C_mid = math.exp(solution.log_B[0]), math.exp(solution.m[0])
    A, R0 = float(solution.A[0]), float(solution.R0[0])
    _, se, _ = covariance(
        np.exp(x), reward, np.ones(x.size), A, B, C_mid, R0,
        r0_fixed=r0 is not None, scale_by_residuals=True,
    )  # fmt: skip
    return se["B"] < B and se["C_mid"] < C_mid


def property_like_curves(seed, k, n):
    """``k`` curves drawn as the property tests draw them, on one grid of ``n`` points each."""
    rng = np.random.default_rng(seed)
    compute, reward = np.empty((k, n)), np.empty((k, n))
    for i in range(k):
        scale, span = 10 ** rng.uniform(1, 24), rng.uniform(1, 5)
        c = scale * np.geomspace(1, 10**span, n)
        A, R0, B = rng.uniform(0.3, 0.95), rng.uniform(0, 0.3), rng.uniform(0.4, 6)
        C_mid = scale * 10 ** rng.uniform(-0.5, span + 0.5)
        noise = rng.uniform(0.001, 0.04)
        compute[i] = c
        reward[i] = np.clip(sigmoid(c, A, B, C_mid, R0) + rng.normal(0, noise, n), 0, 1)
    return compute, reward


@pytest.mark.parametrize("r0", [None, 0.1])
def test_batch_matches_numpy_reference(r0):
    compute, reward = property_like_curves(3, 60, 40)
    x, w = log_compute(compute), np.ones_like(reward)
    new_b, ref_b = both_bounds()
    got = S.solve_batch(x, reward, w, r0, new_b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = ref.solve_batch(x, reward, w, r0, ref_b)
    done = expected.converged
    assert done.mean() > 0.8  # the comparison covers most curves
    np.testing.assert_allclose(got.rss[done], expected.rss[done], rtol=1e-9)
    # a curve whose LM crawls (a bound switching on and off) may stop a few iterations either side
    # of the iteration limit: the verdict agrees on nearly all
    assert got.converged[done].mean() >= 0.95
    np.testing.assert_array_equal(got.at_theta_bound[done], expected.at_theta_bound[done])


def test_batch_on_a_shared_axis_with_integer_weights_and_warm_starts(paper_curve, rng):
    """The bootstrap's use: one compute axis, pairs-resample counts as weights, warm starts."""
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward)
    x = log_compute(fit.fit_compute)
    k, n = 200, x.size
    w = np.sqrt(rng.multinomial(n, np.full(n, 1 / n), size=k).astype(float))
    y = np.broadcast_to(fit.fit_reward, (k, n)).copy()
    theta0 = np.tile([math.log(fit.B), math.log(fit.C_mid)], (k, 1))
    new_b, ref_b = both_bounds()
    for kwargs in ({}, {"theta0": theta0}):
        got = S.solve_batch(x, y, w, None, new_b, **kwargs)
        expected = ref.solve_batch(x, y, w, None, ref_b, **kwargs)
        done = expected.converged
        assert done.mean() > 0.95
        np.testing.assert_allclose(got.rss[done], expected.rss[done], rtol=1e-9)


def test_warm_refit_matches_reference_warm_started_batch(paper_curve, rng):
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward)
    x = log_compute(fit.fit_compute)
    e = fit.residuals - fit.residuals.mean()
    y = fit.predict(fit.fit_compute) + rng.choice(e, size=(300, x.size))
    w = np.ones_like(y)
    start = [fit.A, fit.R0, math.log(fit.B), math.log(fit.C_mid)]
    new_b, ref_b = both_bounds()
    got = S.warm_refit(x, y, w, None, new_b, start)
    theta0 = np.tile(start[2:], (len(y), 1))
    expected = ref.solve_batch(x, y, w, None, ref_b, theta0=theta0)
    assert got.converged.all()
    np.testing.assert_allclose(got.rss, expected.rss, rtol=1e-9)
    # fixed R0 as well
    got = S.warm_refit(x, y, w, fit.R0, new_b, start)
    expected = ref.solve_batch(x, y, w, fit.R0, ref_b, theta0=theta0)
    np.testing.assert_allclose(got.rss, expected.rss, rtol=1e-9)


def test_unbounded_fit_is_never_worse_than_reference_on_its_own_start_grid():
    """Without bounds (not a pass rate) the single fit may take a different route to a basin,
    but on curves whose rise is well above the noise it ends at least as low (to 1e-9)."""
    compute, reward = property_like_curves(11, 30, 50)
    unbounded = ((-np.inf, np.inf), (-np.inf, np.inf))
    new_b, ref_b = both_bounds(unbounded)
    worse = 0
    for c, y in zip(compute, reward, strict=True):
        x, w = log_compute(c), np.ones(c.size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = ref.solve_single(x, y, w, None, ref_b)
        got = S.solve_single(x, y, w, None, new_b)
        worse += got.rss[0] > expected.rss[0] * (1 + 1e-9)
    assert worse <= 1, worse


def reference_log_posterior(z, x, y, w2, r0, priors, fitted_noise):
    """rlcurves.bayes' posterior written out in numpy (uniform A, R0; log-uniform B, C_mid)."""
    A, B, C_mid = z[:, 0], np.exp(z[:, 1]), np.exp(z[:, 2])
    R0 = np.full(len(z), r0) if r0 is not None else z[:, 3]
    lp = z[:, 1] + z[:, 2] - np.log(B) - np.log(C_mid)
    for value, (lo, hi) in zip((A, B, C_mid, R0), priors, strict=True):
        lp = np.where((value >= lo) & (value <= hi), lp, -np.inf)
    s = 1 / (1 + np.exp(B[:, None] * (np.log(C_mid)[:, None] - x[None, :])))
    rss = np.sum(w2 * (y - R0[:, None] - (A - R0)[:, None] * s) ** 2, axis=1)
    like = -0.5 * x.size * np.log(rss) if fitted_noise else -0.5 * rss
    return np.where(np.isfinite(lp), lp + like, -np.inf)


@pytest.mark.parametrize("r0", [None, 0.3])
@pytest.mark.parametrize("fitted_noise", [True, False])
def test_log_posterior_matches_the_model_in_numpy(paper_curve, rng, r0, fitted_noise):
    compute, reward, _ = paper_curve
    x = log_compute(compute)
    w2 = np.full(x.size, 1 / 0.008**2)
    priors = [(0.0, 1.0), (0.01, 50.0), (100.0, 1e5), (0.0, 1.0)]
    d = 3 if r0 is not None else 4
    center = np.array([0.61, math.log(1.92), math.log(2542.0), 0.3])[:d]
    z = center + rng.normal(0, 0.3, (500, d))  # some walkers outside the supports
    kinds = np.array([0, 1, 1, 0])
    lows, highs = np.array([p[0] for p in priors]), np.array([p[1] for p in priors])
    out = np.empty(len(z))
    K.log_posterior(
        z, x, reward, w2, r0 is not None, r0 or 0.0, kinds, lows, highs,
        np.zeros(4), np.ones(4), fitted_noise, out,
    )  # fmt: skip
    expected = reference_log_posterior(z, x, reward, w2, r0, priors, fitted_noise)
    outside = ~np.isfinite(expected)
    assert 0 < outside.sum() < len(z)
    np.testing.assert_array_equal(out[outside], -np.inf)
    np.testing.assert_allclose(out[~outside], expected[~outside], rtol=1e-12)


@pytest.mark.parametrize("r0", [None, 0.3])
def test_regression_the_rss_of_a_draw_follows_from_its_log_posterior(paper_curve, rng, r0):
    """The posterior's noise draws take each draw's RSS from the log posterior the sampler kept
    (fitted noise): the RSS a pass over the points gives, to a few units in the last place, with
    normal and lognormal priors too."""
    compute, reward, _ = paper_curve
    x = log_compute(compute)
    w2 = np.ones(x.size)
    d = 3 if r0 is not None else 4
    center = np.array([0.61, math.log(1.92), math.log(2542.0), 0.3])[:d]
    z = center + rng.normal(0, 0.05, (400, d))
    kinds = np.array([2, 1, 3, 0])
    lows, highs = np.array([0.0, 0.01, 100.0, 0.0]), np.array([1.0, 50.0, 1e5, 1.0])
    mus, sds = np.array([0.6, 0.0, 8.0, 0.0]), np.array([0.2, 1.0, 2.0, 1.0])
    args = (r0 is not None, r0 or 0.0)
    log_post, rss, got = np.empty(len(z)), np.empty(len(z)), np.empty(len(z))
    K.log_posterior(z, x, reward, w2, *args, kinds, lows, highs, mus, sds, True, log_post)
    assert np.isfinite(log_post).all()
    K.walker_rss(z, x, reward, w2, *args, rss)
    K.rss_from_log_posterior(z, log_post, x.size, *args, kinds, lows, highs, mus, sds, got)
    np.testing.assert_allclose(got, rss, rtol=1e-13)


def test_regression_the_vectorized_exponential_is_libms_to_one_ulp():
    """fast_exp (what the hot loops over a curve's points use, vectorized) against math.exp:
    within one unit in the last place over the whole range, as a loop compiled the way the
    kernels compile theirs; infinities, NaN, overflow and the subnormal range as libm's."""
    from numba import njit

    @njit(error_model="numpy", fastmath=K._VECTOR_MATH)
    def vector(a, out):
        for i in range(a.size):
            out[i] = K.fast_exp(a[i])

    @njit(error_model="numpy", fastmath=K._VECTOR_MATH)
    def fractions(x, B, m, out):
        for i in range(x.size):
            out[i] = K.frac_vec(x[i], B, m)

    rng = np.random.default_rng(9)
    a = np.concatenate([rng.uniform(-708, 709.7, 200_000), rng.uniform(-3, 3, 100_000)])
    got, want = np.empty_like(a), np.array([math.exp(v) for v in a])
    vector(a, got)
    assert np.max(np.abs(got - want) / want) <= 2.3e-16  # one ulp is 2.2e-16 at most
    special = np.array([np.inf, -np.inf, np.nan, 709.8, 709.78, 709.5, -745.3, -740.0, 0.0, -0.0])
    vector(special, got[: special.size])
    with np.errstate(over="ignore"):
        want = np.exp(special)
    np.testing.assert_array_equal(got[[0, 1, 3, 8, 9]], want[[0, 1, 3, 8, 9]])
    assert np.isnan(got[2]) and got[6] == 0.0
    np.testing.assert_allclose(got[[4, 5]], want[[4, 5]], rtol=2.3e-16)
    assert abs(got[7] - want[7]) <= 2 * np.nextafter(0, 1) + 1e-15 * want[7]  # subnormal
    x = np.array([-np.inf, 0.0, 5.0, 7.8, 1e3, np.inf])
    s = np.empty_like(x)
    fractions(x, 1.9, 7.8, s)
    assert s[0] == 0.0 and s[-1] == 1.0 and s[3] == 0.5
    np.testing.assert_allclose(s[1:5], 1 / (1 + np.exp(1.9 * (7.8 - x[1:5]))), rtol=1e-15)


def test_importing_rlcurves_compiles_nothing():
    code = (
        "import rlcurves, rlcurves._kernels as K, numba\n"
        "d = [v for v in vars(K).values() if isinstance(v, numba.core.registry.CPUDispatcher)]\n"
        "assert len(d) > 10, d\n"
        "print(sum(len(f.signatures) for f in d))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0", out


def test_covariance_matches_the_numpy_formula():
    """The compiled covariance (J^T J, its inverse, standard errors) against the numpy code it
    replaced, on the property-test curves: free and fixed R0, weights, C = 0, absolute sigma."""
    import reference_fit_summary as numpy_summary

    from rlcurves.result import covariance

    compute, reward = property_like_curves(7, 30, 40)
    rng = np.random.default_rng(8)
    for c, y in zip(compute, reward, strict=True):
        c = np.concatenate([[0.0], c[1:]])
        w = rng.uniform(0.5, 2.0, c.size)
        fit = fit_sigmoid(c, y) if np.ptp(y) > 0 else None
        if fit is None:
            continue
        p = fit.params
        for r0_fixed in (False, True):
            for scale in (True, False):
                args = (c, y, w, p["A"], p["B"], p["C_mid"], p["R0"])
                kw = dict(r0_fixed=r0_fixed, scale_by_residuals=scale)
                cov, se, rss = covariance(*args, **kw)
                cov_ref, se_ref, rss_ref = numpy_summary.covariance(*args, **kw)
                assert rss == pytest.approx(rss_ref, rel=1e-12)
                assert np.isfinite(cov).all() == np.isfinite(cov_ref).all()
                if np.isfinite(cov_ref).all():
                    # variances to 1e-7; covariances on the scale of sqrt(var_i var_j) (an
                    # entry that is 1e-14 of it is rounding noise in either version)
                    d = np.sqrt(np.diag(cov_ref))
                    np.testing.assert_allclose(np.diag(cov), d**2, rtol=1e-7)
                    np.testing.assert_allclose(cov / np.outer(d, d), cov_ref / np.outer(d, d),
                                               rtol=0, atol=1e-7)  # fmt: skip
                assert list(se) == list(se_ref)
                for name, v in se_ref.items():
                    assert se[name] == pytest.approx(v, rel=1e-7, nan_ok=True), name


def test_covariance_of_an_undetermined_parameter_is_infinite():
    from rlcurves.result import covariance

    c = np.linspace(100, 1000, 12)
    # the curve is flat over the data (C_mid far below it, B large): B and C_mid cannot be told
    cov, se, _ = covariance(
        c, np.full(12, 0.6) + 0.01 * np.sin(c), np.ones(12), 0.6, 40.0, 1.0, 0.1,
        r0_fixed=False, scale_by_residuals=True,
    )  # fmt: skip
    assert np.isinf(cov).all() and all(math.isinf(v) for v in se.values())


def test_peak_check_matches_the_numpy_version():
    import reference_fit_summary as numpy_summary

    from rlcurves.fit import detect_peak

    rng = np.random.default_rng(3)
    said = 0
    for i in range(60):
        n = int(rng.integers(15, 90))
        c = np.sort(rng.uniform(0, 16000, n))
        truth = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)
        y = sigmoid(c, **truth) + rng.normal(0, 0.01, n)
        if i % 2:  # a run that sags at the end
            y -= np.clip((c - 0.7 * c.max()) / c.max(), 0, None) * rng.uniform(0, 0.3)
        shuffled = rng.permutation(n)  # the check sorts by compute itself
        got = detect_peak(c[shuffled], y[shuffled], truth)
        assert got == numpy_summary.detect_peak(c[shuffled], y[shuffled], truth)
        said += bool(got)
    assert 5 < said < 55


def fit_both_ways(*args, **kwargs):
    """``fit_sigmoid`` through its compiled fast path and through the general one.

    Returns ``(fast, general)``: each the fit (or the error raised) and the warnings seen;
    ``fast`` is None where the fast path declined (and the general one ran anyway).
    """
    from unittest import mock

    import rlcurves.fit as F

    def run(declined):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                if declined:
                    with mock.patch.object(F, "_exact_fast", lambda *a, **k: None):
                        out = fit_sigmoid(*args, **kwargs)
                else:
                    out = fit_sigmoid(*args, **kwargs)
            except Exception as err:  # the same error either way is the point
                out = err
        return out, [(w.category, str(w.message), w.filename) for w in seen]

    c, r = args[0], args[1]
    try:
        taken = F._exact_fast(
            c, r, None, kwargs.get("r0"), kwargs.get("min_compute"), kwargs.get("max_compute"),
            kwargs.get("bounds", "auto"), False, None,
        ) is not None  # fmt: skip
    except Exception:  # it raised for the caller: compared below
        taken = True
    return (run(False) if taken else None), run(True)


# The solver's stopping rule on the cost: Levenberg-Marquardt stops once a step gains at most
# 1e-13 of the cost (rlcurves._kernels.solve_curve, ftol), then Gauss-Newton polishes.
SOLVER_FTOL = 1e-13
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_words(got: str, want: str) -> bool:
    """Two printed texts are the same but for a number rounded the other way at its last digit."""
    if _NUMBER.split(got) != _NUMBER.split(want):
        return False
    for a, b in zip(_NUMBER.findall(got), _NUMBER.findall(want), strict=True):
        if a != b:
            mantissa = re.split("[eE]", b)[0]
            decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
            exponent = int(re.split("[eE]", b)[1]) if re.search("[eE]", b) else 0
            if abs(float(a) - float(b)) > 1.000001 * 10.0 ** (exponent - decimals):
                return False
    return True


def assert_same_fit(fast, general):
    """The compiled path's fit is the general path's fit, to the solver's own precision.

    The two paths run the same algorithm but not the same floating-point operations (the
    compiled one takes ``log(compute)`` from libm, the general one from numpy's SIMD log, which
    differs in the last bit on some inputs and CPUs), so where the optimum is flat (B and C_mid
    poorly identified) they may stop at points of the valley 1e-10 apart in the parameters
    (issue 38). What they must share:

    - everything that is not a number: which path raised what, the verdict, flags, window, data;
    - the cost: RSS within ``SOLVER_FTOL`` of each other (the solver stops within that of the
      optimum);
    - what the cost identifies: the fitted curve on the data within ``2 sqrt(FTOL rss)`` in the
      2-norm (near a least-squares optimum the cost's excess is ``|f - f*|^2``), and each
      parameter within ``2 sqrt(FTOL dof)`` of its standard errors (the same bound through the
      covariance ``s^2 (J^T J)^-1``); a parameter the data leave undetermined (infinite standard
      error) is compared only through the curve;
    - the covariance the fast path reports is the general path's formula at the fast path's
      parameters (to 1e-9 of ``se_i se_j``);
    - messages, warnings and ``summary()`` the same text, a printed number allowed to round the
      other way at its last digit.
    """
    from rlcurves.result import covariance

    (got, got_warn), (want, want_warn) = fast, general
    assert len(got_warn) == len(want_warn)
    for (g_cat, g_msg, g_file), (w_cat, w_msg, w_file) in zip(got_warn, want_warn, strict=True):
        assert (g_cat, g_file) == (w_cat, w_file) and same_words(g_msg, w_msg), (g_msg, w_msg)
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want)
        return
    same = ("n", "dof", "converged", "method", "r0_fixed", "bounds")
    same += ("absolute_sigma", "min_compute", "max_compute", "label", "units", "sigma")
    for attr in same:
        assert getattr(got, attr) == getattr(want, attr), attr
    for attr in ("compute", "reward", "window"):
        np.testing.assert_array_equal(getattr(got, attr), getattr(want, attr))
        assert getattr(got, attr).dtype == getattr(want, attr).dtype
    for attr in ("message", "peak"):
        assert same_words(getattr(got, attr), getattr(want, attr)), attr
    assert same_words(got.summary(), want.summary()) and same_words(repr(got), repr(want))
    # the cost, and the curve it identifies
    assert abs(got.rss - want.rss) <= SOLVER_FTOL * want.rss + 1e-300
    c = want.fit_compute
    gap = np.linalg.norm(got.predict(c) - want.predict(c))
    assert gap <= 2 * math.sqrt(SOLVER_FTOL * want.rss) + 1e-15, gap
    # the parameters, in standard errors where the data determine them
    assert list(got.params) == list(want.params) and list(got.stderr) == list(want.stderr)
    room = 2 * math.sqrt(SOLVER_FTOL * want.dof)
    for name, value in want.params.items():
        se = want.stderr[name]
        if math.isnan(se):  # fixed R0
            assert got.params[name] == value, name
        elif math.isfinite(se):
            assert abs(got.params[name] - value) <= room * se + 1e-12 * abs(value), name
    # the covariance: the general formula at the fast path's parameters
    cov, se, _ = covariance(
        c, want.fit_reward, np.ones(c.size), got.A, got.B, got.C_mid, got.R0,
        r0_fixed=got.r0_fixed is not None, scale_by_residuals=True,
    )  # fmt: skip
    assert list(se) == list(got.stderr)
    np.testing.assert_array_equal(np.isinf(got.covar), np.isinf(cov))
    scale = np.sqrt(np.abs(np.outer(np.diag(cov), np.diag(cov))))
    finite = np.isfinite(cov)
    assert np.all(np.abs(got.covar[finite] - cov[finite]) <= 1e-9 * scale[finite] + 1e-300)
    for name, value in se.items():
        assert got.stderr[name] == pytest.approx(value, rel=1e-9, nan_ok=True), name


@PROPERTY_SETTINGS
@given(curves())
# the curve Hypothesis shrank to on this machine when the general path's numpy log and the
# compiled path's libm log differed in the last bit of one point (issue 38): a flat optimum
@example(make_curve(1.5, 72, 3.2150599436942824, 0.5, 0.25, 1.0, 0.0, 0.015625, 0))
# the unshrunk curve of the same failure (A 6e-10 apart with min_compute = its third point)
@example(
    make_curve(1.5, 72, 3.2150599436942824, 0.7010503479022224, 0.1032457531984656,
               0.9882679495105092, 2.00001, 0.001, 77918)
)  # fmt: skip
def test_regression_the_compiled_fit_path_gives_the_general_paths_fit(curve):
    """fit_sigmoid's one-call compiled path (validation, solve, covariance, peak check) against
    the general path it short-cuts: the same fit to the solver's precision (assert_same_fit
    says what that means), free and fixed R0, with and without a window (where it declines, an
    optimum on a bound, nothing is compared)."""
    compute, reward, _, _ = curve
    cases = [{}, {"r0": float(reward[0])}, {"min_compute": float(compute[2])}]
    for kw in cases:
        fast, general = fit_both_ways(compute, reward, **kw)
        if fast is not None:
            assert_same_fit(fast, general)


def test_regression_the_compiled_fit_path_on_peaked_runs_data_frames_and_bad_input():
    import pandas as pd

    rng = np.random.default_rng(5)
    truth = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)
    taken = peaked = 0
    for i in range(30):
        n = int(rng.integers(10, 90))
        c = np.sort(rng.uniform(0, 16000, n))
        y = sigmoid(c, **truth) + rng.normal(0, 0.01, n)
        if i % 2:  # a run that sags at the end
            y -= np.clip((c - 0.7 * c.max()) / c.max(), 0, None) * rng.uniform(0, 0.3)
        fast, general = fit_both_ways(c, y, max_compute=float(c[-2]) if i % 3 else None)
        if fast is not None:
            assert_same_fit(fast, general)
            taken += 1
            peaked += bool(fast[0].peak)
    assert taken >= 25 and peaked >= 3
    # a DataFrame with units in its attrs, and the errors the checks raise (the fast path
    # declines and the general one says what is wrong)
    c = np.linspace(0, 16000, 41)[1:]
    y = sigmoid(c, **truth) + rng.normal(0, 0.01, c.size)
    df = pd.DataFrame({"gpu_hours": c, "val": y})
    df.attrs["compute_unit"] = "GPU-hours"
    fits = [fit_sigmoid("gpu_hours", "val", data=df, label="run")]
    fits.append(fit_sigmoid(c, y, label="run"))
    assert fits[0].units == {"compute": "GPU-hours", "reward": "val"} and fits[1].units == {}
    assert fits[0].params == fits[1].params
    bad = [
        (np.r_[c[:-1], np.nan], y, {}),
        (c, np.r_[y[:-1], np.inf], {}),
        (-c, y, {}),
        (c, np.full(c.size, 0.5), {}),
        (c, np.full(c.size, 0.5), {"r0": 0.5}),
        (c, y, {"min_compute": 1e9}),
        (c[:3], y[:3], {}),
        (np.full(c.size, 5.0), y, {}),
        (c, y, {"r0": math.nan}),
        (c, y, {"bounds": "tight"}),
        (c, y[:-1], {}),
    ]
    for c_bad, y_bad, kw in bad:
        fast, general = fit_both_ways(c_bad, y_bad, **kw)
        assert isinstance(general[0], Exception), kw
        if fast is not None:  # the data pass the checks, the bounds do not: the same error
            assert_same_fit(fast, general)


def grid_rss_two_pass(S, y, w, r0):
    """The bootstrap screen's RSS at every grid point, in numpy: unbounded linear least squares
    by two-pass centred moments (accurate also where a grid curve is nearly flat)."""
    w2 = w * w
    if r0 is not None:
        d = y - r0
        a = np.einsum("kn,gn->kg", w2 * d, S)
        rss = np.sum(w2 * d * d, axis=1)[:, None] - a * a / np.einsum("kn,gn->kg", w2, S * S)
        return np.where(np.isfinite(rss), rss, np.inf)
    tw = w2.sum(axis=1)
    yc = y - ((w2 * y).sum(axis=1) / tw)[:, None]
    s_mean = np.einsum("kn,gn->kg", w2, S) / tw[:, None]  # (k, G)
    sc = S[None, :, :] - s_mean[:, :, None]  # (k, G, n)
    var = np.einsum("kn,kgn->kg", w2, sc * sc)
    cov = np.einsum("kn,kgn->kg", w2 * yc, sc)
    with np.errstate(divide="ignore", invalid="ignore"):
        rss = np.sum(w2 * yc * yc, axis=1)[:, None] - np.where(var > 0, cov * cov / var, np.inf)
    return np.where(np.isfinite(rss), rss, np.inf)


@pytest.mark.parametrize("r0", [None, 0.1])
def test_regression_the_compiled_bootstrap_screen_finds_the_grids_best_point(r0):
    """The basin guard's grid screen (rlcurves.bootstrap.coarse_grid, compiled) picks each
    resample's best grid point with its RSS, against the same least squares in numpy, on
    resamples of the property-test curves with integer (pairs) weights, zero weights included.
    (The raw-moment numpy screen it replaced ranked some nearly flat grid curves best by
    cancellation; the compiled one centres its moments.)"""
    from rlcurves.bootstrap import _GRID_B_TIMES_SPAN, _GRID_M_IN_SPANS, coarse_grid
    from rlcurves.model import fraction_of_gain

    compute, reward = property_like_curves(11, 12, 40)
    rng = np.random.default_rng(12)
    rows = np.arange(50)
    for c, y0 in zip(compute, reward, strict=True):
        x = log_compute(c)
        y = y0 + rng.normal(0, 0.01, (50, c.size))
        w = np.sqrt(rng.multinomial(c.size, np.full(c.size, 1 / c.size), size=50)).astype(float)
        theta, rss, _ = coarse_grid(x, y, w, r0)
        span = x.max() - x.min()
        lb, m = np.meshgrid(np.log(_GRID_B_TIMES_SPAN / span), x.min() + span * _GRID_M_IN_SPANS)
        lb, m = lb.ravel(), m.ravel()
        S = fraction_of_gain(x[None, :], np.exp(lb)[:, None], m[:, None])
        want = grid_rss_two_pass(S, y, w, r0)
        picked = np.array([np.flatnonzero((lb == t0) & (m == t1))[0] for t0, t1 in theta])
        # a grid curve within 1e-6 of flat over the data is known to the digits S keeps of its
        # variation (a few): there both ways agree to that, elsewhere to rounding
        np.testing.assert_allclose(rss, want[rows, picked], rtol=2e-2)
        np.testing.assert_allclose(want[rows, picked], want.min(axis=1), rtol=2e-2)
        shaped = np.ptp(S, axis=1) > 1e-6
        best, best_rss = np.empty(50, dtype=np.int64), np.empty(50)
        fixed = r0 is not None
        K.coarse_grid_rss(np.ascontiguousarray(S[shaped]), y, w, fixed, r0 or 0.0, best, best_rss)
        # the best point, or (a tie to rounding) one whose RSS is the smallest as well
        np.testing.assert_allclose(best_rss, want[:, shaped][rows, best], rtol=1e-9)
        np.testing.assert_allclose(best_rss, want[:, shaped].min(axis=1), rtol=1e-9)


def test_regression_a_read_only_install_imports_and_compiles_without_a_cache(tmp_path):
    """With the package folder and the user's cache folder read-only (and no NUMBA_CACHE_DIR),
    numba refused ``cache=True`` at decoration and ``import rlcurves`` raised RuntimeError
    ("cannot cache function '_clip': no locator available"). Now it warns once and the kernels
    compile in memory. (A whole first fit that way took 23 s under load 5, 11 s of CPU: too long
    here, so one small kernel stands for them.)"""
    import os
    import shutil

    pkg, home = tmp_path / "site", tmp_path / "home"
    src = Path(K.__file__).parent
    shutil.copytree(src, pkg / "rlcurves", ignore=shutil.ignore_patterns("__pycache__"))
    home.mkdir()
    for root, dirs, files in os.walk(tmp_path):
        for name in dirs + files:
            os.chmod(Path(root) / name, 0o555 if name in dirs else 0o444)
    os.chmod(pkg, 0o555)
    os.chmod(home, 0o555)
    prefix = []
    if os.geteuid() == 0:  # root writes anywhere: drop the capability that lets it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: no folder can be made read-only")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home), PYTHONPATH=str(pkg))
    code = (
        "import rlcurves, rlcurves._kernels as K\n"
        f"assert rlcurves.__file__.startswith({str(pkg)!r}), rlcurves.__file__\n"
        "print(K._NO_CACHE_WARNED, K.frac(0.0, 2.0, 0.0))\n"
    )
    try:
        out = subprocess.run(
            [*prefix, sys.executable, "-W", "always", "-c", code],
            env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    finally:
        for root, dirs, _ in os.walk(tmp_path):
            for name in dirs:
                os.chmod(Path(root) / name, 0o755)
        os.chmod(pkg, 0o755)
        os.chmod(home, 0o755)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[True]", "0.5"], out
    assert "no writable folder to cache" in out.stderr and "NUMBA_CACHE_DIR" in out.stderr


def test_same_words_allows_a_number_to_round_the_other_way_at_its_last_digit():
    assert same_words("A = 0.4920 +- 0.013 (3.1e-05)", "A = 0.4921 +- 0.013 (3.1e-05)")
    assert same_words("n 72, 3.2e-05", "n 72, 3.1e-05")
    assert not same_words("A = 0.4920", "A = 0.4922")
    assert not same_words("n 72", "n 74") and not same_words("B is poorly", "C is poorly")


def test_hypothesis_examples_do_not_depend_on_imported_modules(tmp_path):
    """Issue 38: Hypothesis mixes literals from the project's imported modules into its draws,
    so a derandomized property test drew other curves once a CLI test had imported
    rlcurves.cli. conftest.py pins that pool; importing a new module full of literals in the
    strategies' ranges must leave the examples as they were."""
    seen = []

    @settings(max_examples=25, derandomize=True, database=None)
    @given(curves())
    def draw(curve):
        seen.append(curve[1])

    draw()
    before, seen[:] = list(seen), []
    module = tmp_path / "literals_for_hypothesis.py"
    floats = ", ".join(f"{v:.6f}" for v in np.linspace(0.0013, 23.7, 400))
    module.write_text(f"FLOATS = [{floats}]\nINTS = {list(range(12, 81))}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import literals_for_hypothesis  # noqa: F401

        draw()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("literals_for_hypothesis", None)
    assert len(seen) == len(before)
    for got, want in zip(seen, before, strict=True):
        np.testing.assert_array_equal(got, want)


# A short window whose last evaluation jumps: its best fit is a step at the end with A on its
# bound, which takes the bounded polish (tens of milliseconds), the case the memory is for.
STEP_AT_THE_END = (
    np.arange(2.0, 17.0, 2.0),
    np.array([0.0818, 0.0692, 0.0884, 0.1062, 0.0758, 0.1028, 0.0866, 0.1342]),
)


@pytest.mark.filterwarnings("ignore::rlcurves.IdentifiabilityWarning")
def test_a_repeated_fit_is_solved_once_and_its_answer_is_a_copy(monkeypatch):
    from collections import OrderedDict

    monkeypatch.setattr(S, "_solved", OrderedDict())
    calls = []
    solve = S._solve_single
    monkeypatch.setattr(S, "_solve_single", lambda *a: calls.append(1) or solve(*a))
    c, y = STEP_AT_THE_END
    first = fit_sigmoid(c, y)
    first_params = dict(first.params)
    again = fit_sigmoid(c, y)
    assert len(calls) == 1 and again.params == first_params
    sol = S.solve_single(log_compute(c), y, np.ones(c.size), None, first.bounds)
    sol.A[0] = -1.0  # a caller that writes into its answer does not write into the memory
    assert len(calls) == 1 and fit_sigmoid(c, y).params == first_params
    fit_sigmoid(c, y + 1e-9)  # other data: solved
    assert len(calls) == 2
    monkeypatch.setattr(S, "SOLVED_KEEP", 0)
    assert fit_sigmoid(c, y).params == first_params and len(calls) == 3


def test_regression_a_flat_curve_on_the_step_ridge_gets_its_exact_linear_parameters():
    """A random Hypothesis seed found it (test_single_fit_matches_numpy_reference): a flat
    12-point curve (signal 0.1 noise sd), R0 fixed at the first point; the full LM stopped on the
    ridge toward a step (log B 5.94) with A a few digits short of its optimum for that (log B, m),
    an RSS 1.6e-6 above the reference's. The exact projection at the solver's (log B, m) now
    settles A, and the compiled solver is no worse than the reference."""
    compute = 10.0 * np.geomspace(1.0, 10.0, 12)
    reward = np.array(
        [
            0.31158076,
            0.32686417,
            0.31191335,
            0.26124533,
            0.33061969,
            0.31660645,
            0.28617591,
            0.32138134,
            0.31484749,
            0.31284838,
            0.30471824,
            0.32106205,
        ]
    )
    x, w = log_compute(compute), np.ones(compute.size)
    new_b, ref_b = both_bounds()
    r0 = float(reward[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = ref.solve_single(x, reward, w, r0, ref_b)
    got = S.solve_single(x, reward, w, r0, new_b)
    assert got.rss[0] <= expected.rss[0] * (1 + 1e-12)
    # A is the exact linear optimum at the solver's (log B, m): the projection moves nothing
    cost, A, _ = K.projected(x, reward, w, got.log_B[0], got.m[0], True, r0, S._bnd(new_b),
                             np.empty(12), np.empty(12))  # fmt: skip
    assert got.A[0] == pytest.approx(A, rel=1e-9) and got.rss[0] == pytest.approx(cost, rel=1e-12)
