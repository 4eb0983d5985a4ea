"""rlcurves._trf.bounded_polish, the compiled port of scipy's bounded TRF, against scipy itself.

The polish it replaces (:func:`rlcurves.solver._bounded_single`) is ``least_squares(method="trf")``
with the tolerances at 1e-15 and ``max_nfev=2000``; downstream results depend on exactly where
it stops, so the port must stop where scipy stops: same status, same ``nfev``, same parameters.
The problems are drawn as the polish meets them (starts from ``solve_batch``, the search box
from ``theta_box``): smooth noisy sigmoids of 6-60 points, step-shaped curves of 4-8 points
(a jump between two evaluations: log B runs to its upper bound and scipy crawls, often to
``max_nfev``), flat noisy curves, pass-rate bounds that bind (A above 1 or R0 below 0 without
them), a first point at compute 0 (``x = -inf``), bootstrap-like weights with zeros, R0 fixed
and free.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy.optimize import least_squares

from rlcurves import _trf
from rlcurves import solver as S
from rlcurves._trf import bounded_polish
from rlcurves.model import sigmoid

KINDS = ("smooth", "step", "flat", "active", "zero_compute", "zero_weights")
PASS_RATE = ((0.0, 1.0), (0.0, 1.0))
UNBOUNDED = ((-np.inf, np.inf), (-np.inf, np.inf))
N_PER_KIND = 60  # 360 problems: scipy takes ~6 s on them, the port ~0.1 s


def draw_problem(rng, kind):
    """One polish problem ``(x, y, w, r0, p0, lower, upper)`` of the given kind."""
    scale = 10.0 ** rng.uniform(1, 20)
    n = int(rng.integers(4, 9) if kind == "step" else rng.integers(6, 41 if kind == "flat" else 61))
    span = rng.uniform(1, 5)  # decades of compute
    compute = scale * np.geomspace(1.0, 10.0**span, n)
    noise = rng.uniform(0.001, 0.04)
    box = PASS_RATE if rng.random() < 0.5 else UNBOUNDED
    if kind == "step":
        k = int(rng.integers(1, n))
        low, high = np.sort(rng.uniform(0.0, 1.0, 2))
        y = np.where(np.arange(n) < k, low, high) + rng.normal(0, rng.uniform(0, 0.01), n)
    elif kind == "flat":
        y = rng.uniform(0.1, 0.9) + rng.normal(0, noise, n)
    elif kind == "active":
        box = PASS_RATE
        A, R0 = rng.uniform(0.4, 0.9), rng.uniform(0.05, 0.3)
        if rng.random() < 0.5:
            A = rng.uniform(1.05, 1.8)  # an asymptote above 1: A's upper bound binds
        else:
            R0 = rng.uniform(-0.5, -0.05)  # a start below 0: R0's lower bound binds
        mid = scale * 10.0 ** rng.uniform(0.3 * span, 1.3 * span)
        y = sigmoid(compute, A, rng.uniform(0.5, 4), mid, R0) + rng.normal(0, noise, n)
    else:
        A, R0 = rng.uniform(0.3, 0.95), rng.uniform(0.0, 0.3)
        mid = scale * 10.0 ** rng.uniform(-0.5, span + 0.5)
        y = sigmoid(compute, A, rng.uniform(0.4, 6), mid, R0) + rng.normal(0, noise, n)
        y = np.clip(y, 0.0, 1.0)
    x = np.log(compute)
    w = np.ones(n)
    if kind == "zero_compute":  # a first evaluation at compute 0
        x = np.concatenate([[-np.inf], x])
        y = np.concatenate([[y[0] - abs(rng.normal(0, 0.05))], y])
        w = np.ones(n + 1)
    if kind == "zero_weights" or (kind != "step" and rng.random() < 0.2):
        w = rng.integers(0, 3, x.size).astype(float)  # a bootstrap resample's counts
        if rng.random() < 0.5:
            w *= rng.uniform(5, 50)  # and 1 / sigma
        w[rng.choice(x.size, 4, replace=False)] = np.maximum(w[:4], 1.0)  # keep a few points
    r0 = None if rng.random() < 0.5 else float(np.clip(y[0], *box[1]))
    # the start and the box as _bounded_single makes them
    sol = S.solve_batch(x, y[None], w[None], r0, S.Bounds(*box))
    lo, hi, _ = S.theta_box(x[None])
    p0 = np.array([sol.A[0], sol.R0[0], sol.log_B[0], sol.m[0]])
    lower = np.array([box[0][0], box[1][0], lo[0, 0], lo[0, 1]])
    upper = np.array([box[0][1], box[1][1], hi[0, 0], hi[0, 1]])
    if r0 is not None:
        p0, lower, upper = p0[[0, 2, 3]], lower[[0, 2, 3]], upper[[0, 2, 3]]
    return x, y, w, r0, np.clip(p0, lower, upper), lower, upper


def scipy_polish(x, y, w, r0, p0, lower, upper, max_nfev=2000):
    """The call the port replaces, as _bounded_single makes it (rlcurves.solver.scipy_polish, the
    solver's own scipy path): (x, cost, nfev, status)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return S.scipy_polish(
            x, y, w, r0, p0, lower, upper, xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=max_nfev
        )


@pytest.fixture(scope="module")
def drawn():
    """360 problems (60 of each kind, seeded) and scipy's answer to each."""
    rng = np.random.default_rng(20260917)
    out = []
    for i in range(N_PER_KIND * len(KINDS)):
        kind = KINDS[i % len(KINDS)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prob = draw_problem(rng, kind)
        out.append((kind, prob, scipy_polish(*prob)))
    return out


def compare(drawn):
    """Per problem: (kind, same status, same nfev, params and cost bit for bit, max relative
    parameter difference, relative cost difference port - scipy, scipy's nfev)."""
    rows = []
    for kind, prob, (xs, cs, ns, ss) in drawn:
        xp, cp, n_p, sp = bounded_polish(*prob)
        relp = float(np.max(np.abs(xp - xs) / np.maximum(np.abs(xs), 1e-300)))
        rows.append(
            (
                kind,
                sp == ss,
                n_p == ns,
                np.array_equal(xp, xs) and cp == cs,
                relp,
                (cp - cs) / max(cs, 1e-300),
                ns,
            )
        )
    return rows


def test_the_draw_covers_the_polish_cases(drawn):
    """The draw holds what it claims: crawls to max_nfev, every status but xtol-only, fixed and
    free R0, compute 0, zero weights, and answers with A or R0 on a bound."""
    nfev = np.array([d[2][2] for d in drawn])
    status = {d[2][3] for d in drawn}
    assert (nfev >= 1000).sum() >= 10 and (nfev == 2000).sum() >= 3
    assert {0, 1, 2, 3} <= status
    assert 100 < sum(d[1][3] is None for d in drawn) < 260
    assert sum(np.isneginf(d[1][0][0]) for d in drawn) >= N_PER_KIND
    assert sum((d[1][2] == 0).any() for d in drawn) >= N_PER_KIND
    on_bound = 0
    for _, (_, _, _, r0, _, lower, upper), (xs, _, _, _) in drawn:
        k = 1 if r0 is not None else 2  # A, or A and R0
        on_bound += bool(np.any(np.minimum(xs[:k] - lower[:k], upper[:k] - xs[:k]) < 1e-8))
    assert on_bound >= 20


def test_stops_where_scipy_stops(drawn):
    """Where the kernels compute with numpy's and scipy's arithmetic bit for bit (the probes of
    arithmetic_matches_scipy: numpy's SVML exp and power on x86-64 with AVX-512, libm's
    elsewhere; the same BLAS kernels and LAPACK SVD), the port repeats scipy's iterates exactly:
    the same status, nfev, parameters and cost, bit for bit, in every problem.

    Measured: 3,000 of 3,000 drawn problems identical (this draw, another seed), and 692 of 692
    polish calls recorded while fitting prefixes of every corpus run (fixed and free R0, 19 of
    them crawling past 1,000 evaluations). It is deterministic arithmetic, so there is no margin
    to give: a difference is a porting error. (The one found while porting: with R0 fixed,
    numpy lays the Jacobian ``J[:, [0, 2, 3]]`` out in Fortran order, so ``J.T.dot(f)`` runs
    another BLAS kernel; before the port did the same, 22 of 300 problems differed, all with
    R0 fixed.)
    """
    if not _trf.arithmetic_matches_scipy():
        pytest.skip(
            "the kernels' arithmetic is not numpy's here "
            f"({_trf._math_modes()['exact_parts']}): test_stays_close_to_scipy checks the rest"
        )
    rows = compare(drawn)
    differ = [(i, r) for i, r in enumerate(rows) if not (r[1] and r[2] and r[3])]
    assert not differ, differ[:5]


def test_stays_close_to_scipy(drawn):
    """Whatever the arithmetic: scipy's answer in nearly every problem. The margins are what
    rounding alone does to scipy's own stopping point, measured with libm's exp and pow in place
    of numpy's SVML ones on this machine (an ulp apart in ~5% of the exps), on two draws of
    3,000 problems (seeds 7 and 11): the same status in 95.8% and 95.8%, the same nfev in 84.6%
    and 84.9% (35 and 47 of 101 crawls), parameters within 1e-8 or cost within 1e-12 relative
    in 99.6% and 99.7%; a cost worse than scipy's by more than 1e-6 relative in 1 and 0 of
    3,000 (7.5e-6 at most), and once 1.5% better: on a crawl the cost's last digits decide
    each step, and now and then the basin. So no bound on the worst case here; that holds
    only with scipy's arithmetic (test_stops_where_scipy_stops: identical).
    test_libm_arithmetic_stays_close runs this comparison on this machine."""
    check_close(compare(drawn))


def check_close(rows):
    n = len(rows)
    assert sum(r[1] for r in rows) >= 0.9 * n  # same status (95.8% measured)
    assert sum(r[2] for r in rows) >= 0.75 * n  # same nfev (84.6%)
    same = sum(r[4] <= 1e-8 or abs(r[5]) <= 1e-12 for r in rows)
    assert same >= 0.98 * n  # same answer (99.6%)
    assert sum(r[5] > 1e-6 for r in rows) <= 0.01 * n  # worse by 1e-6 (1 in 3,000)


def test_libm_arithmetic_stays_close(drawn, monkeypatch):
    """The port's libm path (numpy's exp and power where numpy has no SVML) runs and stays as
    close to scipy as rounding allows (test_stays_close_to_scipy's margins)."""
    modes = dict(_trf._math_modes())
    monkeypatch.setitem(_trf._READY, "exp_mode", 0)
    monkeypatch.setitem(_trf._READY, "pow_mode", 0)
    rows = compare(drawn)
    check_close(rows)
    if modes["exp_mode"] == 1:  # here the libm path is a different arithmetic from scipy's
        assert sum(r[3] for r in rows) < len(rows)


def test_degenerate_inputs_behave_as_scipy():
    """Inputs scipy rejects are rejected with scipy's errors; a start on a bound moves 1e-10
    inside as in scipy; a max_nfev of a few evaluations, all-zero weights (zero gradient) and
    unbounded A and R0 give scipy's answers."""
    rng = np.random.default_rng(5)
    x, y, w, r0, p0, lower, upper = draw_problem(rng, "step")
    while r0 is not None:
        x, y, w, r0, p0, lower, upper = draw_problem(rng, "step")
    lower[:2], upper[:2] = 0.0, 1.0

    def same_as_scipy(*args, **kw):
        got, want = bounded_polish(*args, **kw), scipy_polish(*args, **kw)
        assert np.array_equal(got[0], want[0]) and got[1:] == want[1:], (got, want)

    def same_error(*args):
        with pytest.raises(ValueError) as scipy_err:
            scipy_polish(*args)
        with pytest.raises(ValueError) as port_err:
            bounded_polish(*args)
        assert str(port_err.value) == str(scipy_err.value)

    on_bounds = np.array([1.0, 0.0, upper[2], lower[3]])  # every parameter on a bound
    same_as_scipy(x, y, w, None, on_bounds, lower, upper)
    for max_nfev in (1, 2, 7):
        same_as_scipy(x, y, w, None, p0, lower, upper, max_nfev=max_nfev)
    same_as_scipy(x, y, np.zeros_like(w), None, p0, lower, upper)
    free = (np.array([-np.inf, -np.inf, *lower[2:]]), np.array([np.inf, np.inf, *upper[2:]]))
    same_as_scipy(x, y, w, None, p0, *free)

    outside = on_bounds + np.array([1e-9, 0.0, 0.0, 0.0])
    same_error(x, y, w, None, outside, lower, upper)
    same_error(x, y, w, None, p0, upper, lower)  # lower above upper
    nan_y = y.copy()
    nan_y[1] = np.nan
    same_error(x, nan_y, w, None, p0, lower, upper)  # residuals not finite at the start

    # what scipy does otherwise, the port refuses: no finite bound (scipy's unbounded TRF, not
    # ported), a start of the wrong length, arrays of different lengths
    with pytest.raises(ValueError, match="at least one bound must be finite"):
        bounded_polish(x, y, w, None, p0, np.full(4, -np.inf), np.full(4, np.inf))
    with pytest.raises(ValueError, match="p0 must have 3 entries"):
        bounded_polish(x, y, w, 0.1, p0, lower, upper)
    with pytest.raises(ValueError, match="1-D arrays"):
        bounded_polish(x, y[:-1], w, None, p0, lower, upper)


def test_nothing_compiles_at_import():
    code = (
        "import rlcurves._trf as T; "
        "assert not T._trf_bounds.signatures and not T._READY, 'compiled at import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_the_math_routines_the_solver_polishes_with_scipy(monkeypatch):
    """Where the compiled polish cannot find its math routines (no libm ``pow`` to register),
    ``available()`` says so and the solver's bounded fits are polished by scipy itself: the same
    fit, not an error."""
    from rlcurves import fit_sigmoid

    c = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    y = np.array([0.1, 0.11, 0.1, 0.5, 0.49, 0.5])  # a step: the bounded polish decides it
    S._solved.clear()
    compiled = fit_sigmoid(c, y).params
    exact = _trf.arithmetic_matches_scipy()

    def no_pow():
        raise RuntimeError("rlcurves._trf: libm's pow was not found")

    monkeypatch.setattr(_trf, "_READY", {})
    monkeypatch.setattr(_trf, "_UNAVAILABLE", [])
    monkeypatch.setattr(_trf, "_libm_pow_address", no_pow)
    import scipy.optimize

    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return least_squares(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "least_squares", counted)
    S._solved.clear()
    assert not _trf.available()
    fallback = fit_sigmoid(c, y).params
    assert calls  # the fit took the bounded polish, scipy's here
    S._solved.clear()
    if exact:
        assert fallback == compiled  # the port is scipy's iterates, bit for bit
    else:  # a crawl along log B may stop elsewhere by rounding; the levels stay
        assert [fallback[k] for k in ("A", "R0")] == pytest.approx(
            [compiled[k] for k in ("A", "R0")], abs=1e-6
        )
