"""Profile-likelihood intervals for A, B, C_mid and for the curve's value at a given compute.

For a quantity ``q`` the profile is the least residual sum of squares with ``q`` held fixed and
every other parameter re-optimized. The interval is where the profile stays below the likelihood
ratio threshold: with the noise level estimated from the residuals (the usual case) the F form
``(RSS(q) - RSS_min) / (RSS_min / dof) <= t_{dof}^2``, which reduces to the exact t interval for a
linear model; with known (absolute) sigma the chi-square form ``RSS(q) - RSS_min <= chi2_1``.
Intervals are asymmetric where the data say so, and where the profile never rises above the
threshold before a bound (A <= 1 for a pass rate, a midpoint far beyond the data), the interval
is open on that side: the bound is reported with ``lower_open``/``upper_open`` set (``inf`` for B or
C_mid, whose search range is arbitrary).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .errors import RLCurvesError
from .model import fraction_of_gain, log_compute
from .solver import theta_box

if TYPE_CHECKING:
    from .result import SigmoidFit

PROFILED = ("A", "B", "C_mid")


@dataclass(eq=False)
class ProfileResult:
    """Profile-likelihood intervals of a fit.

    Attributes
    ----------
    intervals : pandas.DataFrame
        Columns ``parameter, estimate, lower, upper, lower_open, upper_open``.
    traces : dict of pandas.DataFrame
        Per parameter, the profile evaluated during the search: ``value, rss, statistic``.
    level : float
        Coverage the intervals were computed for.
    threshold : float
        The statistic's critical value at ``level``.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=1500)
    >>> prof = fit.profile(["A"], level=0.9)
    >>> ci = prof.ci().set_index("parameter")
    >>> print(f"A in [{ci.loc['A', 'lower']:.2f}, {ci.loc['A', 'upper']:.2f}]")
    A in [0.60, 0.62]
    """

    intervals: pd.DataFrame
    traces: dict[str, pd.DataFrame]
    level: float
    threshold: float
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        # the intervals only: the traces are long tables (they stay in .traces)
        table = self.intervals.to_string(index=False)
        return f"ProfileResult(level={self.level:g}, traces for {list(self.traces)})\n{table}"

    def ci(self, level: float | None = None) -> pd.DataFrame:
        """The intervals (``parameter, estimate, lower, upper, lower_open, upper_open``)."""
        if level is not None and not math.isclose(level, self.level):
            raise RLCurvesError(
                f"this profile was computed at level {self.level}; call fit.profile(level={level})"
            )
        return self.intervals


class _Problem:
    """The fit's data and a parametrization with one quantity held fixed."""

    def __init__(self, fit: SigmoidFit) -> None:
        self.c = fit.fit_compute
        self.x = log_compute(self.c)
        self.y = fit.fit_reward
        self.w = np.ones(self.c.size) if fit.sigma is None else 1.0 / fit.fit_sigma
        self.r0 = fit.r0_fixed
        self.bounds = fit.bounds
        lo, hi, _ = theta_box(self.x[None])
        self.theta_lo, self.theta_hi = lo[0], hi[0]
        p = fit.params
        self.full = np.array([p["A"], p["R0"], math.log(p["B"]), math.log(p["C_mid"])])
        self.rss_min = float(fit.rss)

    def rss(self, A, R0, lb, m) -> np.ndarray:
        s = fraction_of_gain(self.x, np.exp(lb), m)
        r = self.w * (self.y - R0 - (A - R0) * s)
        return r

    def profile_point(self, target: str, value: float, z0: np.ndarray, at_x: float | None):
        """Least RSS with ``target`` held at ``value``; returns (rss, z)."""
        from scipy.optimize import least_squares

        if target == "value":
            return self.value_point(value, z0, at_x)
        if target == "A":  # A is the curve's value at infinite compute
            return self.value_point(value, z0, math.inf)
        names, lo, hi = self.free(target)
        a_lo, a_hi = self.bounds.A

        def unpack(z):
            full = dict(zip(names, z, strict=True))
            if self.r0 is not None:
                full["R0"] = self.r0
            if target == "A":
                full["A"] = value
            elif target == "B":
                full["lb"] = value
            elif target == "C_mid":
                full["m"] = value
            else:  # the curve's value at at_x: A follows from the others
                s_at = fraction_of_gain(at_x, math.exp(full["lb"]), full["m"])
                full["A"] = full["R0"] + (value - full["R0"]) / max(s_at, 1e-300)
            return full["A"], full["R0"], full["lb"], full["m"]

        def residual(z):
            A, R0, lb, m = unpack(z)
            r = self.rss(A, R0, lb, m)
            if target == "value":  # A is derived here, so its bounds become a penalty
                penalty = max(a_lo - A, 0.0) + max(A - a_hi, 0.0)
                r = np.append(r, 1e4 * penalty * np.sqrt(self.rss_min + 1e-300))
            return r

        z0 = np.clip(z0, lo + 1e-12 * (1 + np.abs(lo)), hi - 1e-12 * (1 + np.abs(hi)))
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = least_squares(
                residual, z0, bounds=(lo, hi), method="trf", ftol=1e-10, xtol=1e-10, max_nfev=200
            )
        r = residual(res.x)
        return float(np.dot(r, r)), res.x

    def value_residuals(self, value: float, theta: np.ndarray, at_x: float) -> np.ndarray:
        """Weighted residuals, shape ``(..., n + 1)``, with the curve held at ``value`` at ``at_x``.

        Given ``(log B, m)`` the constraint ``R0 (1 - s_at) + A s_at = value`` leaves the curve
        ``R0 (1 - s / s_at) + value * s / s_at``, linear in R0, so R0 (or nothing, when fixed) is
        solved in closed form within its bounds and the bounds A's imply; the last entry is a
        penalty pushing back from ``(log B, m)`` where no R0 keeps A within its bounds.
        Vectorized over leading dimensions of ``theta`` (``(..., 2)``).
        """
        a_lo, a_hi = self.bounds.A
        r_lo, r_hi = self.bounds.R0
        lb, m = theta[..., 0:1], theta[..., 1:2]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            s = fraction_of_gain(self.x, np.exp(lb), m)
            s_at = np.maximum(fraction_of_gain(at_x, np.exp(lb), m), 1e-12)
            u = s / s_at
            if self.r0 is not None:
                R0 = np.full_like(s_at, self.r0)
                A = R0 + (value - R0) / s_at
                penalty = np.maximum(a_lo - A, 0.0) + np.maximum(A - a_hi, 0.0)
            else:
                d = self.w * (1.0 - u)
                dd = np.sum(d * d, axis=-1, keepdims=True)
                base = self.w * (self.y - value * u)
                R0 = np.where(dd > 0, np.sum(d * base, axis=-1, keepdims=True) / dd, value)
                one_minus = np.maximum(1.0 - s_at, 1e-12)
                lo_r = np.maximum(r_lo, (value - a_hi * s_at) / one_minus)
                hi_r = np.minimum(r_hi, (value - a_lo * s_at) / one_minus)
                penalty = np.maximum(lo_r - hi_r, 0.0)
                R0 = np.where(lo_r <= hi_r, np.clip(R0, lo_r, hi_r), 0.5 * (lo_r + hi_r))
            r = self.w * (self.y - R0 * (1.0 - u) - value * u)
            out = np.concatenate([r, 1e4 * math.sqrt(self.rss_min + 1e-300) * penalty], axis=-1)
        return np.where(np.isfinite(out), out, 1e6)

    def value_point(self, value: float, z0: np.ndarray, at_x: float):
        """Least RSS with the curve held at ``value`` at ``x = at_x``, over ``(log B, m)`` only.

        A grid over the search box finds the basin (the constraint can move the optimum far from
        the last one); least squares refines the best grid point and the warm start ``z0``.
        """
        from scipy.optimize import least_squares

        lo, hi = self.theta_lo, self.theta_hi
        grid = np.stack(
            np.meshgrid(np.linspace(lo[0], hi[0], 24), np.linspace(lo[1], hi[1], 24)), axis=-1
        ).reshape(-1, 2)
        r = self.value_residuals(value, grid, at_x)
        starts = [grid[np.argmin(np.sum(r * r, axis=-1))], np.asarray(z0, dtype=float)]
        best = (math.inf, starts[0])
        for z_start in starts:
            z_start = np.clip(z_start, lo + 1e-9 * (1 + np.abs(lo)), hi - 1e-9 * (1 + np.abs(hi)))
            res = least_squares(
                lambda z: self.value_residuals(value, z, at_x),
                z_start,
                bounds=(lo, hi),
                method="trf",
                ftol=1e-10,
                xtol=1e-10,
                max_nfev=200,
            )
            rr = self.value_residuals(value, res.x, at_x)
            rss = float(np.dot(rr, rr))
            if rss < best[0]:
                best = (rss, res.x)
        return best

    def free(self, target: str):
        """Names and bounds of the parameters re-optimized when ``target`` is held fixed."""
        spec = {
            "A": self.bounds.A,
            "R0": self.bounds.R0,
            "lb": (self.theta_lo[0], self.theta_hi[0]),
            "m": (self.theta_lo[1], self.theta_hi[1]),
        }
        held = {"A": "A", "B": "lb", "C_mid": "m", "value": "A"}[target]
        names = [n for n in ("A", "R0", "lb", "m") if n != held]
        if self.r0 is not None:
            names.remove("R0")
        lo = np.array([spec[n][0] for n in names], dtype=float)
        hi = np.array([spec[n][1] for n in names], dtype=float)
        return names, lo, hi

    def start(self, target: str) -> np.ndarray:
        if target in ("value", "A"):
            return self.full[2:].copy()
        names, _, _ = self.free(target)
        full = dict(zip(("A", "R0", "lb", "m"), self.full, strict=True))
        return np.array([full[n] for n in names])


def _threshold(fit: SigmoidFit, level: float) -> tuple[float, bool]:
    from scipy.stats import chi2
    from scipy.stats import t as student_t

    known_sigma = fit.sigma is not None and fit.absolute_sigma
    if known_sigma:
        return float(chi2.ppf(level, 1)), True
    if fit.dof <= 0:
        raise RLCurvesError("no degrees of freedom left (as many points as parameters)")
    return float(student_t.ppf((1 + level) / 2, fit.dof) ** 2), False


def _scan(problem, target, estimate, step, bound, direction, thr, stat_of, at_x):
    """Find where the profile statistic crosses ``thr`` between the estimate and ``bound``.

    The signed root of the statistic is close to linear in the parameter (exactly so for a linear
    model), so a safeguarded secant on it, started at the Wald end point, lands in a few profile
    evaluations; while no evaluation has crossed, the step grows until one does or the bound is
    reached (an open side). The end point is found to a thousandth of the threshold's root.
    """
    root_thr = math.sqrt(thr)
    z_near = problem.start(target)
    inside_v, inside_r = estimate, 0.0  # furthest point known to be inside the interval
    outside_v, outside_r = None, None  # nearest point known to be outside
    trace = []
    v = estimate + direction * root_thr * step
    for _ in range(60):
        hit_bound = (v - bound) * direction >= 0
        if hit_bound:
            v = bound
        rss, z = problem.profile_point(target, v, z_near, at_x)
        stat = stat_of(rss)
        trace.append((v, rss, stat))
        r = math.sqrt(max(stat, 0.0))
        if abs(r - root_thr) <= 1e-3 * root_thr:
            return v, False, trace
        if r < root_thr:
            if hit_bound:
                return bound, True, trace
            inside_v, inside_r, z_near = v, r, z
        else:
            outside_v, outside_r = v, r
        if outside_v is None:
            # secant from the last two inside points, at least 1.5x further (never stalls)
            slope = (r - 0.0) / abs(v - estimate) if v != estimate else 0.0
            reach = (root_thr / slope) if slope > 0 else 2.0 * abs(v - estimate)
            v = estimate + direction * max(reach, 1.5 * abs(v - estimate))
        else:
            # regula falsi between the bracket's ends, kept strictly inside the bracket
            frac = (root_thr - inside_r) / (outside_r - inside_r)
            frac = min(max(frac, 0.05), 0.95)
            v = inside_v + frac * (outside_v - inside_v)
    end = inside_v if outside_v is None else 0.5 * (inside_v + outside_v)
    return end, outside_v is None, trace


def _beyond(problem, target, est, end, step, bound, direction, thr, stat_of, at_x, trace):
    """Look past the first crossing for a later one: a profile with two dips falls below the
    threshold again further out, and the interval then reaches the outermost crossing.

    Probes 40 geometrically spaced points out to the bound; where one is inside again, the
    outer end is bisected between it and the next probe outside (or the bound: an open side).
    """
    z0 = problem.start(target)
    dist = max(abs(end - est), math.sqrt(thr) * step)
    room = abs(bound - end)
    probes = [end + direction * d for d in np.geomspace(0.25 * dist, max(room, 0.5 * dist), 40)]
    probes = [v for v in probes if (v - bound) * direction < 0] + [bound]
    inside_at = None
    for i, v in enumerate(probes):
        rss, _ = problem.profile_point(target, v, z0, at_x)
        stat = stat_of(rss)
        trace.append((v, rss, stat))
        if stat < thr:
            inside_at = i
    if inside_at is None:
        return end, False
    lo_v = probes[inside_at]
    if inside_at == len(probes) - 1:
        return lo_v, bool(lo_v == bound)
    hi_v = probes[inside_at + 1]
    for _ in range(30):
        mid = 0.5 * (lo_v + hi_v)
        rss, _ = problem.profile_point(target, mid, z0, at_x)
        stat = stat_of(rss)
        trace.append((mid, rss, stat))
        if stat < thr:
            lo_v = mid
        else:
            hi_v = mid
        if abs(hi_v - lo_v) <= 1e-4 * (abs(step) + 1e-12):
            break
    return 0.5 * (lo_v + hi_v), False


def _one(problem, fit, target, level, thr, known, at_x=None, estimate=None, scale=None):
    rss_min = problem.rss_min
    if known:

        def stat_of(rss):
            return rss - rss_min
    else:
        s2 = rss_min / fit.dof

        def stat_of(rss):
            return (rss - rss_min) / s2

    if target == "A":
        est, lo_b, hi_b = fit.A, *fit.bounds.A
        step = fit.stderr["A"]
    elif target == "B":
        est, (lo_b, hi_b) = math.log(fit.B), (problem.theta_lo[0], problem.theta_hi[0])
        step = fit.stderr["B"] / fit.B
    elif target == "C_mid":
        est, (lo_b, hi_b) = math.log(fit.C_mid), (problem.theta_lo[1], problem.theta_hi[1])
        step = fit.stderr["C_mid"] / fit.C_mid
    else:
        est, step = estimate, scale
        lo_b = min(fit.bounds.A[0], fit.bounds.R0[0])
        hi_b = max(fit.bounds.A[1], fit.bounds.R0[1])
    lo_b = max(lo_b, -1e6) if math.isinf(lo_b) else lo_b
    hi_b = min(hi_b, 1e6) if math.isinf(hi_b) else hi_b
    if not (math.isfinite(step) and step > 0):
        step = 0.05 * (1 + abs(est))
    step = max(step, 1e-9 * (1 + abs(est)))
    ends, opens, traces = [], [], []
    for direction, bound in ((-1, lo_b), (+1, hi_b)):
        if (est - bound) * -direction <= 0:  # estimate already on this bound
            ends.append(bound)
            opens.append(True)
            continue
        end, is_open, trace = _scan(
            problem, target, est, step, bound, direction, thr, stat_of, at_x
        )
        if not is_open:
            end, is_open = _beyond(
                problem, target, est, end, step, bound, direction, thr, stat_of, at_x, trace
            )
        ends.append(end)
        opens.append(is_open)
        traces.extend(trace)
    trace = pd.DataFrame(traces, columns=["value", "rss", "statistic"]).sort_values("value")
    return ends, opens, trace.reset_index(drop=True)


def profile(
    fit: SigmoidFit, parameters: Sequence[str] = PROFILED, *, level: float = 0.9
) -> ProfileResult:
    """Profile-likelihood intervals for the fit's A, B and C_mid.

    Parameters
    ----------
    fit : SigmoidFit
    parameters : sequence of str
        Any of "A", "B", "C_mid".
    level : float
        Coverage, in (0, 1).

    Returns
    -------
    ProfileResult
        ``intervals`` (and ``ci()``) with open-ended sides flagged; ``traces`` for plotting.
    """
    from .bootstrap import _tails

    _tails(level)
    bad = [p for p in parameters if p not in PROFILED]
    if bad:
        raise RLCurvesError(f"can profile only {list(PROFILED)}, got {bad}")
    thr, known = _threshold(fit, level)
    problem = _Problem(fit)
    rows, traces, notes = [], {}, []
    for name in parameters:
        (lo, hi), (lo_open, hi_open), trace = _one(problem, fit, name, level, thr, known)
        if name == "A":
            trace_values = trace["value"]
        else:
            lo, hi = math.exp(lo), math.exp(hi)
            if lo_open:
                lo = 0.0
            if hi_open:
                hi = math.inf
            trace_values = np.exp(trace["value"])
        traces[name] = trace.assign(value=trace_values)
        for side, is_open in (("lower", lo_open), ("upper", hi_open)):
            if is_open:
                notes.append(f"the data do not bound {name}'s {side} side at {level:.0%}")
        rows.append(
            {
                "parameter": name,
                "estimate": fit.params[name],
                "lower": lo,
                "upper": hi,
                "lower_open": lo_open,
                "upper_open": hi_open,
            }
        )
    return ProfileResult(pd.DataFrame(rows), traces, level, thr, notes)


class ProfileBand(tuple):
    """``(lower, upper)`` of :func:`profile_prediction`, which unpacks as a pair, and carries
    ``lower_open``/``upper_open``: per point, the data do not bound that side (the end is the
    metric's bound)."""

    lower_open: np.ndarray
    upper_open: np.ndarray

    def __new__(cls, lower, upper, lower_open, upper_open):
        band = super().__new__(cls, (lower, upper))
        band.lower_open, band.upper_open = lower_open, upper_open
        return band


def profile_prediction(fit: SigmoidFit, compute: ArrayLike, *, level: float = 0.9) -> ProfileBand:
    """Profile-likelihood interval for the expected curve value at each ``compute``.

    The curve value ``v`` at ``C`` replaces A as a parameter (``A = R0 + (v - R0) / s(C)``), so
    its profile is the same constrained least squares as for a parameter; A's bounds are kept.
    An open side is reported as the metric's bound (e.g. 1 for a pass rate) and flagged in the
    result's ``lower_open``/``upper_open``.
    """
    thr, known = _threshold(fit, level)
    problem = _Problem(fit)
    c = np.atleast_1d(np.asarray(compute, dtype=float))
    lower, upper = np.empty(c.size), np.empty(c.size)
    lower_open, upper_open = np.zeros(c.size, dtype=bool), np.zeros(c.size, dtype=bool)
    cov = fit.cov.to_numpy()
    for i, ci in enumerate(c):
        est = float(fit.predict(ci))
        scale = _value_stderr(fit, ci, cov)
        at_x = float(log_compute(ci)) if ci > 0 else -math.inf
        (lo, hi), (lo_open, hi_open), _ = _one(
            problem, fit, "value", level, thr, known, at_x, est, scale
        )
        lower[i], upper[i] = lo, hi
        lower_open[i], upper_open[i] = lo_open, hi_open
    return ProfileBand(lower, upper, lower_open, upper_open)


def _value_stderr(fit: SigmoidFit, compute: float, cov: np.ndarray) -> float:
    """Delta-method standard error of the curve at ``compute`` (a step size for the search)."""
    h = 1e-6
    grads = []
    for name in fit.free_params:
        p = dict(fit.params)
        dp = h * max(abs(p[name]), 1e-8)
        p[name] += dp
        from .model import sigmoid

        grads.append((sigmoid(compute, **p) - fit.predict(compute)) / dp)
    g = np.array(grads, dtype=float)
    var = float(g @ cov @ g) if np.all(np.isfinite(cov)) else math.nan
    return math.sqrt(var) if var > 0 else math.nan
