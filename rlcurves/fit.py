"""fit_sigmoid: the public entry point of the sigmoid fit, and its batched sibling."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._data import _column, as_float_array, is_bound, resolve_xy
from .errors import IdentifiabilityWarning, NotConvergedWarning, RLCurvesError
from .model import log_compute, sigmoid
from .result import SigmoidFit, covariance, residual_variance, standard_errors
from .solver import Bounds, solve_batch, solve_single

Method = Literal["auto", "exact", "paper-grid", "lmfit"]
BoundsArg = Literal["auto"] | None | Mapping[str, tuple[float, float]]

_METHODS = ("auto", "exact", "paper-grid", "lmfit")
# Relative standard error above which a parameter is reported as poorly identified: beyond +-50%
# the symmetric interval says little and the profile/posterior intervals should be used.
_POORLY_IDENTIFIED = 0.5


def fit_sigmoid(
    compute: ArrayLike | str,
    reward: ArrayLike | str,
    *,
    data: pd.DataFrame | None = None,
    r0: float | None = None,
    min_compute: float | None = None,
    max_compute: float | None = None,
    sigma: ArrayLike | str | None = None,
    method: Method = "auto",
    bounds: BoundsArg = "auto",
    absolute_sigma: bool = False,
    options: Mapping[str, Any] | None = None,
    label: str | None = None,
    loss: Literal["linear", "soft_l1", "huber"] = "linear",
    f_scale: float | None = None,
) -> SigmoidFit:
    """Fit ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` by least squares, without a start guess.

    Parameters
    ----------
    compute, reward : array_like or str
        Compute (e.g. GPU-hours, FLOPs; >= 0, 0 meaning the start) and reward (e.g. validation
        pass rate). Column names when ``data`` is a DataFrame.
    data : pandas.DataFrame, optional
        Table holding the columns named by ``compute``, ``reward`` (and ``sigma`` if a string).
    r0 : float, optional
        Fix R0 (the paper's practice: the starting model's measured pass rate). None fits it.
    min_compute, max_compute : float, optional
        Fit window (inclusive). The paper drops the first ~1.5k GPU-hours (``min_compute=1500``).
    sigma : array_like or str, optional
        Per-point standard deviations: weighted least squares with weights ``1 / sigma``.
    method : {"auto", "exact", "paper-grid", "lmfit"}
        "auto"/"exact": the exact variable-projection solver (global least-squares optimum, no
        start guess). "paper-grid": the paper's procedure (grid over A and C_mid, curve_fit for
        B), for comparison with published numbers; grid overridable through ``options``.
        "lmfit": lmfit's Model.fit started from the exact solution (see :class:`SigmoidModel`).
    bounds : "auto", None or dict
        Box bounds on A and R0. "auto": when every reward lies in [0, 1] (a pass rate), A and R0
        are kept in [0, 1]; otherwise unbounded. None: unbounded. A dict such as
        ``{"A": (0, 1), "R0": (-1, 1)}`` sets them explicitly. B > 0 and C_mid > 0 always.
    absolute_sigma : bool
        With ``sigma``: treat it as absolute (covariance not rescaled by the residuals), as in
        scipy's curve_fit.
    options : dict, optional
        Method-specific settings, e.g. ``{"A_grid": ..., "C_mid_grid": ...}`` for "paper-grid".
    label : str, optional
        A name carried by the result (used in reports, comparisons and plots).
    loss : {"linear", "soft_l1", "huber"}
        "linear": least squares. "soft_l1" or "huber": a robust loss for isolated bad
        evaluations (as scipy's ``least_squares``), by iteratively reweighted exact fits; the
        final weights are kept as ``sigma`` so that bootstrap and intervals see them.
    f_scale : float, optional
        Residual scale of the robust loss (where it turns from quadratic to linear); default
        1.4826 times the median absolute residual of the least-squares fit.

    Returns
    -------
    SigmoidFit
        Parameters, standard errors, covariance, fit statistics, ``converged`` and ``message``.

    Raises
    ------
    RLCurvesError
        Bad input: NaN/inf, negative compute, mismatched lengths, missing columns, a constant
        reward, or fewer usable points than parameters in the window.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> fit.converged
    True
    >>> print(f"A = {fit.A:.2f} +- {fit.stderr['A']:.2f}, B = {fit.B:.1f}")
    A = 0.62 +- 0.02, B = 2.0
    >>> round(float(fit.predict(16_000)), 2)
    0.61
    """
    if method not in _METHODS:
        raise RLCurvesError(f"unknown method {method!r}; choose one of {list(_METHODS)}")
    for name, bound in (("min_compute", min_compute), ("max_compute", max_compute)):
        # text was numpy's UFuncTypeError; nan an empty window "[nan, inf]"
        if bound is not None and not is_bound(bound):
            raise RLCurvesError(
                f"{name}= must be a compute value (a number) or None, got {bound!r}",
                **{name: bound},
            )
    if sigma is None and loss == "linear" and method in ("auto", "exact"):
        fit = _exact_fast(
            compute, reward, data, r0, min_compute, max_compute, bounds, absolute_sigma, label
        )
        if fit is not None:
            return fit
    c, r, s = resolve_xy(compute, reward, data, sigma)
    if r0 is not None:
        try:
            r0_value = float(r0)
        except (TypeError, ValueError):
            r0_value = math.nan
        if not math.isfinite(r0_value):
            raise RLCurvesError(f"r0= must be a finite number or None, got {r0!r}", r0=r0)
        r0 = r0_value
    window = _window(c, min_compute, max_compute)
    _check_fittable(c[window], r[window], r0, min_compute, max_compute)
    box = resolve_bounds(bounds, r, r0)
    fit_args = dict(
        compute=c,
        reward=r,
        sigma=s,
        window=window,
        r0_fixed=r0,
        bounds=box,
        absolute_sigma=absolute_sigma,
        min_compute=min_compute,
        max_compute=max_compute,
        label=label,
    )
    opts = dict(options or {})
    if loss not in ("linear", "soft_l1", "huber"):
        raise RLCurvesError(f"loss must be 'linear', 'soft_l1' or 'huber', got {loss!r}")
    robust_note = ""
    if loss != "linear":
        if method not in ("auto", "exact"):
            raise RLCurvesError(f"loss={loss!r} needs method='exact' (or 'auto')")
        s, robust_note = _robust_sigma(c, r, s, window, r0, box, loss, f_scale)
        fit_args["sigma"] = s
    if method in ("auto", "exact"):
        weights = np.ones(window.sum()) if s is None else 1.0 / s[window]
        sol = solve_single(log_compute(c[window]), r[window], weights, r0, box)
        params = dict(
            A=float(sol.A[0]),
            B=float(np.exp(sol.log_B[0])),
            C_mid=float(np.exp(sol.m[0])),
            R0=float(sol.R0[0]),
        )
        notes = []
        if sol.at_theta_bound[0]:
            notes.append(
                "the best fit runs to the edge of the search range (C_mid or B not identified by "
                "the data: the run is probably far from its midpoint); fix r0, fit a longer run, "
                "or use profile intervals"
            )
        elif not sol.converged[0]:
            notes.append(
                f"the solver stopped after {sol.iterations[0]} iterations without converging"
            )
        fit = build_fit(params, bool(sol.converged[0]), "exact", notes, **fit_args)
        if robust_note:
            fit.message = f"{fit.message}; {robust_note}"
        return _with_units(data, compute, reward, fit)
    if method == "paper-grid":
        from .paper_grid import fit_paper_grid

        params, ok, note = fit_paper_grid(c[window], r[window], r0, s, window, **opts)
        return _with_units(
            data, compute, reward, build_fit(params, ok, "paper-grid", [note], **fit_args)
        )
    from .lmfit_model import fit_with_lmfit

    params, ok, note = fit_with_lmfit(c, r, s, window, r0, box, **opts)
    return _with_units(
        data, compute, reward, build_fit(params, ok, "lmfit", [note] if note else [], **fit_args)
    )


def _exact_fast(compute, reward, data, r0, min_compute, max_compute, bounds, absolute_sigma, label):
    """The common exact fit (no sigma, least squares) in two compiled passes, or None.

    Validation, the fit window, the solver, the covariance and the peak numbers run compiled
    (:func:`rlcurves._kernels.scan_inputs`, :func:`rlcurves._kernels.fit_one`); only the result
    is assembled here. Anything unusual (input a check would reject, an optimum on a bound or
    beyond the search box, a second basin to settle) returns None, and :func:`fit_sigmoid` takes
    the general path, which says what is wrong or settles it: the answers are the same either way.
    """
    from . import _kernels as K

    c, r = compute, reward
    if data is not None:
        if not isinstance(data, pd.DataFrame):
            return None
        c, r = _column(data, compute, "compute"), _column(data, reward, "reward")
    try:
        c = np.asarray(c, dtype=float)
        r = np.asarray(r, dtype=float)
        fixed = r0 is not None
        r0v = float(r0) if fixed else 0.0
        lo = -math.inf if min_compute is None else float(min_compute)
        hi = math.inf if max_compute is None else float(max_compute)
    except (TypeError, ValueError):
        return None
    if c.ndim != 1 or c.shape != r.shape or not math.isfinite(r0v):
        return None
    window = np.empty(c.size, dtype=np.bool_)
    ok, n_win, r_min, r_max, r_range = K.scan_inputs(c, r, lo, hi, fixed, r0v, window)
    if not ok:
        return None
    r0_fixed = r0v if fixed else None
    if isinstance(bounds, str) and bounds == "auto":
        box = _auto_bounds(r_min, r_max, r0_fixed)
    else:
        box = resolve_bounds(bounds, r, r0_fixed)
    top = K.GRID_TOP_SINGLE
    p = 3 if fixed else 4
    cov, out = np.empty((p, p)), np.empty(K.FIT_OUT)
    bnd = np.array([box.A[0], box.A[1], box.R0[0], box.R0[1]])
    if not K.fit_one(
        c, r, window, n_win, fixed, r0v, bnd,
        np.empty((top, 2)), np.empty(top), np.zeros(top, dtype=np.bool_), cov, out,
    ):  # fmt: skip
        return None
    A, R0, _, _, B, C_mid, rss = out[:7].tolist()
    cov *= residual_variance(rss, n_win - p)
    stderr = standard_errors(cov)
    peak = _peak_words(n_win, A, *out[7:].tolist())
    fit = _assemble(
        {"A": A, "B": B, "C_mid": C_mid, "R0": R0},
        True,
        "exact",
        [],
        cov,
        stderr,
        rss,
        n_win,
        r_range,
        peak,
        compute=c,
        reward=r,
        sigma=None,
        window=window,
        r0_fixed=r0_fixed,
        bounds=box,
        absolute_sigma=absolute_sigma,
        min_compute=min_compute,
        max_compute=max_compute,
        label=label,
    )
    return _with_units(data, compute, reward, fit)


def _with_units(data, compute, reward, fit: SigmoidFit) -> SigmoidFit:
    from ._format import units_of

    fit.units = units_of(data, compute, reward)
    return fit


def _robust_sigma(c, r, s, window, r0, box, loss, f_scale, max_iter=50):
    """Iteratively reweighted exact fits for a robust loss: per-point sigma and a note."""
    x, y = log_compute(c[window]), r[window]
    w0 = np.ones(y.size) if s is None else 1.0 / s[window]
    w, scale, prev = w0.copy(), f_scale, None
    for _ in range(max_iter):
        sol = solve_single(x, y, w, r0, box)
        p = np.array([sol.A[0], sol.log_B[0], sol.m[0], sol.R0[0]], dtype=float)
        res = w0 * (y - sigmoid(c[window], p[0], math.exp(p[1]), math.exp(p[2]), p[3]))
        if scale is None:
            scale = 1.4826 * float(np.median(np.abs(res))) or float(np.std(res)) or 1.0
        z = np.abs(res) / scale
        if loss == "soft_l1":
            factor = 1.0 / np.sqrt(1.0 + z**2)
        else:  # huber
            factor = np.where(z <= 1.0, 1.0, 1.0 / np.maximum(z, 1e-300))
        w = w0 * np.sqrt(factor)
        if prev is not None and np.allclose(p, prev, rtol=1e-9, atol=1e-12):
            break
        prev = p
    sigma = np.ones(c.size) if s is None else np.array(s, dtype=float)
    sigma[window] = 1.0 / w
    low = int(np.sum(factor < 0.5))
    note = f"robust loss {loss} (f_scale {scale:.3g}): {low} of {y.size} points weighted below half"
    return sigma, note


def build_fit(
    params: dict[str, float],
    converged: bool,
    method: str,
    notes: list[str],
    *,
    compute: np.ndarray,
    reward: np.ndarray,
    sigma: np.ndarray | None,
    window: np.ndarray,
    r0_fixed: float | None,
    bounds: Bounds,
    absolute_sigma: bool,
    min_compute: float | None,
    max_compute: float | None,
    label: str | None,
) -> SigmoidFit:
    """Assemble a SigmoidFit from parameters: covariance, identification checks and message."""
    cw, rw = compute[window], reward[window]
    weights = np.ones(cw.size) if sigma is None else 1.0 / sigma[window]
    covar, stderr, rss = covariance(
        cw,
        rw,
        weights,
        params["A"],
        params["B"],
        params["C_mid"],
        params["R0"],
        r0_fixed=r0_fixed is not None,
        scale_by_residuals=sigma is None or not absolute_sigma,
    )
    return _assemble(
        params,
        converged,
        method,
        notes,
        covar,
        stderr,
        rss,
        int(cw.size),
        float(rw.max() - rw.min()),
        detect_peak(cw, rw, params),
        compute=compute,
        reward=reward,
        sigma=sigma,
        window=window,
        r0_fixed=r0_fixed,
        bounds=bounds,
        absolute_sigma=absolute_sigma,
        min_compute=min_compute,
        max_compute=max_compute,
        label=label,
    )


def _assemble(
    params: dict[str, float],
    converged: bool,
    method: str,
    notes: list[str],
    covar: np.ndarray,
    stderr: dict[str, float],
    rss: float,
    n_points: int,
    reward_range: float,
    peak: str,
    *,
    compute: np.ndarray,
    reward: np.ndarray,
    sigma: np.ndarray | None,
    window: np.ndarray,
    r0_fixed: float | None,
    bounds: Bounds,
    absolute_sigma: bool,
    min_compute: float | None,
    max_compute: float | None,
    label: str | None,
) -> SigmoidFit:
    """The identification checks, the message and the SigmoidFit, from a fit's covariance.

    ``n_points`` and ``reward_range`` are the number and the spread of the rewards in the window;
    ``peak`` the words of :func:`detect_peak` ("" when the run did not peak).
    """
    notes = [note for note in notes if note]
    reward_range = reward_range or 1.0
    for name in ("A", "B", "C_mid", "R0"):
        value, err = params[name], stderr[name]
        # A and R0 are levels: near 0 their error is judged against the data's range instead
        scale = max(abs(value), reward_range) if name in ("A", "R0") else abs(value)
        if math.isinf(err):
            notes.append(f"{name} is not determined by the data (singular Jacobian)")
        elif math.isfinite(err) and scale > 0 and err / scale > _POORLY_IDENTIFIED:
            what = "the estimate" if scale == abs(value) else "the reward range"
            notes.append(
                f"{name} is poorly identified (standard error {err:.3g} is "
                f"{err / scale:.0%} of {what})"
            )
    for name, (lo, hi) in (("A", bounds.A), ("R0", bounds.R0)):
        if name == "R0" and r0_fixed is not None:
            continue
        if any(math.isfinite(b) and abs(params[name] - b) <= 1e-9 * (1 + abs(b)) for b in (lo, hi)):
            notes.append(f"{name} sits on its bound {params[name]:g} (bounds {lo:g}..{hi:g})")
    dof = int(n_points - len(covar))
    if dof == 0:
        notes.append("no degrees of freedom left (as many points as parameters): no errors")
    message = "; ".join(notes) if notes else "converged: exact least-squares optimum"
    if not converged:
        message = "NOT CONVERGED: " + message
        warnings.warn(message, NotConvergedWarning, stacklevel=4)
    elif notes:
        warnings.warn(message, IdentifiabilityWarning, stacklevel=4)
    if peak:
        message = f"{message}; {peak}"
    return SigmoidFit(
        params=params,
        stderr=stderr,
        covar=covar,
        rss=rss,
        n=n_points,
        dof=dof,
        converged=converged,
        message=message,
        method=method,
        compute=compute,
        reward=reward,
        sigma=sigma,
        window=window,
        r0_fixed=r0_fixed,
        bounds=bounds,
        absolute_sigma=absolute_sigma,
        min_compute=min_compute,
        max_compute=max_compute,
        label=label,
        peak=peak,
    )


# A run "peaked" when the last fifth of its window sits below the fitted curve by more than this
# many standard errors of its mean (autocorrelation-corrected), or its smoothed curve fell that
# far from its maximum: real RL runs rise, flatten and sag (entropy collapse, overfitting the
# train pool), which the sigmoid cannot follow, so its ceiling overstates where the run is going.
_PEAK_SE = 3.0


def detect_peak(compute: np.ndarray, reward: np.ndarray, params: dict[str, float]) -> str:
    """Say in words whether the end of the window sags below the fit or the run turned down.

    Returns "" when it does not (or with fewer than 15 points in the window).
    """
    from . import _kernels as K

    c, r = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    if c.size < 15:
        return ""
    stats = K.peak_stats(
        np.ascontiguousarray(c), np.ascontiguousarray(r),
        float(params["A"]), float(params["B"]), float(params["C_mid"]), float(params["R0"]),
    )  # fmt: skip
    return _peak_words(c.size, float(params["A"]), *stats)


def _peak_words(n, A, sd, rho, m, tail_gap, k, i_peak, peak, drop, latest, c_peak) -> str:
    """:func:`detect_peak`'s verdict from the numbers of ``_kernels.peak_stats`` (n points)."""
    if not sd > 0:
        return ""
    m, k, i_peak = int(m), int(k), int(i_peak)
    # the tail's mean residual against its autocorrelation-corrected standard error
    se = sd / math.sqrt(m) * math.sqrt((1 + rho) / (1 - rho))
    below = tail_gap < -_PEAK_SE * se
    turned = i_peak < n - k + 1 - m and drop > _PEAK_SE * se
    if not (below or turned):
        return ""
    side = "below" if tail_gap < 0 else "above"
    return (
        f"this run peaked at {peak:.3g} near {c_peak:,.0f}; the fitted ceiling "
        f"{A:.3g} is not supported by the latest evaluations (the last {m} average "
        f"{latest:.3g}, {abs(tail_gap):.2g} {side} the fitted curve)"
    )


def _window(c: np.ndarray, lo: float | None, hi: float | None) -> np.ndarray:
    window = np.ones(c.shape, dtype=bool)
    if lo is not None:
        window &= c >= lo
    if hi is not None:
        window &= c <= hi
    return window


def _check_fittable(c, r, r0, lo, hi) -> None:
    n_params = 3 if r0 is not None else 4
    where = f" in the window [{lo if lo is not None else 0}, {hi if hi is not None else 'inf'}]"
    if c.size < n_params:
        fixes = "widen the window (min_compute= or max_compute=) or add points"
        if r0 is None:
            fixes = (
                "widen the window (min_compute= or max_compute=), add points, or fix R0 with r0="
            )
        raise RLCurvesError(
            f"only {c.size} point(s){where}, fewer than the {n_params} parameters to fit; {fixes}.",
            n_points=int(c.size),
            n_params=n_params,
        )
    # at least three distinct values are all that is asked: the extremes and one in between
    lo, hi = c.min(), c.max()
    distinct = 1 if lo == hi else (3 if np.any((c > lo) & (c < hi)) else 2)
    if distinct < n_params - 1:
        raise RLCurvesError(
            f"only {distinct} distinct compute value(s){where}: the curve's shape cannot be "
            f"determined; at least {n_params - 1} are needed.",
            distinct=int(distinct),
        )
    if r.max() == r.min() and (r0 is None or r[0] == r0):
        raise RLCurvesError(
            f"reward is constant ({r[0]:g} at all {r.size} points{where}): there is no curve to "
            "fit. Check that the right column was passed as reward.",
            value=float(r[0]),
        )


def _auto_bounds(r_min: float, r_max: float, r0: float | None) -> Bounds:
    """The "auto" bounds: A and R0 in [0, 1] when every reward (and a fixed R0) is a rate."""
    is_rate = r_min >= 0 and r_max <= 1
    if is_rate and (r0 is None or 0 <= r0 <= 1):
        return Bounds(A=(0.0, 1.0), R0=(0.0, 1.0))
    return Bounds()


def resolve_bounds(bounds: BoundsArg, reward: np.ndarray, r0: float | None) -> Bounds:
    """Turn the ``bounds`` argument into box bounds on A and R0 (see :func:`fit_sigmoid`)."""
    if bounds is None:
        return Bounds()
    if isinstance(bounds, str):
        if bounds != "auto":
            raise RLCurvesError(f"bounds must be 'auto', None or a dict, got {bounds!r}")
        return _auto_bounds(float(reward.min()), float(reward.max()), r0)
    unknown = set(bounds) - {"A", "R0"}
    if unknown:
        raise RLCurvesError(
            f"bounds can be set for A and R0 only, got {sorted(unknown)}; B > 0 and C_mid > 0 "
            "always hold."
        )
    out = Bounds()
    for name, pair in bounds.items():
        lo, hi = (float(v) for v in pair)
        if not lo < hi:
            raise RLCurvesError(
                f"bounds for {name} must satisfy lower < upper, got {pair}; to hold "
                f"{name} (almost) fixed give a narrow interval, e.g. (a - 1e-9, a + 1e-9)"
                + ("; for R0 use r0=a" if name == "R0" else "")
            )
        setattr(out, name, (lo, hi))
    return out


def fit_sigmoid_batch(
    compute: ArrayLike,
    rewards: ArrayLike,
    *,
    r0: float | None = None,
    sigma: ArrayLike | None = None,
    bounds: BoundsArg = "auto",
    chunk_size: int = 256,
) -> pd.DataFrame:
    """Fit many curves at once, vectorized (a sweep of runs sharing a compute grid).

    Parameters
    ----------
    compute : array_like, shape (n,) or (k, n)
        Compute points, shared by all curves or one row per curve.
    rewards : array_like, shape (k, n)
        One curve per row.
    r0, sigma, bounds
        As in :func:`fit_sigmoid` (sigma broadcast to ``rewards``).
    chunk_size : int
        Curves solved per vectorized pass (bounds memory: the start grid holds
        ``chunk_size * 560 * n`` floats).

    Returns
    -------
    pandas.DataFrame
        One row per curve: ``A, B, C_mid, R0, rss, converged``.

    Raises
    ------
    RLCurvesError
        ``rewards`` that is not 2-D, a ``compute`` grid of another shape, negative compute,
        or NaN/inf values.

    Examples
    --------
    >>> import numpy as np
    >>> compute = np.linspace(0, 16_000, 41)
    >>> rng = np.random.default_rng(0)
    >>> noise = rng.normal(0, 0.01, (100, 41))
    >>> rewards = rlcurves.sigmoid(compute, 0.61, 1.92, 2542, 0.3) + noise
    >>> table = rlcurves.fit_sigmoid_batch(compute, rewards)  # one row per curve
    >>> len(table), list(table.columns[:4])
    (100, ['A', 'B', 'C_mid', 'R0'])
    >>> round(float(table["A"].median()), 2)
    0.61
    """
    try:
        y = np.asarray(rewards, dtype=float)
    except ValueError as err:
        raise RLCurvesError(
            "rewards must be a 2-D array (curves x points) of numbers, every curve on the same "
            f"compute points ({err}); curves of different lengths: fit each with fit_sigmoid, "
            "or fit_runs on a long table"
        ) from None
    if y.ndim != 2:
        raise RLCurvesError(f"rewards must be 2-D (curves x points), got shape {y.shape}")
    c = np.asarray(compute, dtype=float)
    if c.shape not in (y.shape, y.shape[1:]):
        raise RLCurvesError(
            f"compute shape {c.shape} does not match rewards {y.shape}: pass ({y.shape[1]},) or "
            f"{y.shape}"
        )
    for arr, role in ((c, "compute"), (y, "rewards")):
        if not np.all(np.isfinite(arr)):
            raise RLCurvesError(f"{role} contains NaN or inf; drop or impute those points first")
    if (c < 0).any():
        raise RLCurvesError("compute must be >= 0")
    w = (
        np.ones_like(y)
        if sigma is None
        else 1.0
        / np.broadcast_to(
            as_float_array(np.ravel(sigma), "sigma").reshape(np.shape(sigma)), y.shape
        )
    )
    box = resolve_bounds(bounds, y, r0)
    x = log_compute(c)
    rows = []
    for start in range(0, y.shape[0], chunk_size):
        sl = slice(start, start + chunk_size)
        xs = x[sl] if x.ndim == 2 else x
        sol = solve_batch(xs, y[sl], w[sl], r0, box)
        rows.append(
            pd.DataFrame(
                {
                    "A": sol.A,
                    "B": np.exp(sol.log_B),
                    "C_mid": np.exp(sol.m),
                    "R0": sol.R0,
                    "rss": sol.rss,
                    "converged": sol.converged,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)
