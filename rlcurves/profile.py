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
    """

    intervals: pd.DataFrame
    traces: dict[str, pd.DataFrame]
    level: float
    threshold: float
    notes: list[str] = field(default_factory=list)

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

    def value_point(self, value: float, z0: np.ndarray, at_x: float):
        """Least RSS with the curve held at ``value`` at ``x = at_x``, over ``(log B, m)`` only.

        Given ``(log B, m)`` the constraint ``R0 (1 - s_at) + A s_at = value`` leaves the curve
        ``R0 (1 - s / s_at) + value * s / s_at``, linear in R0, so R0 (or nothing, when fixed) is
        solved in closed form within its bounds and those A's bounds imply; an infeasible
        ``(log B, m)`` is pushed back by a penalty.
        """
        from scipy.optimize import least_squares

        a_lo, a_hi = self.bounds.A
        r_lo, r_hi = self.bounds.R0
        scale = math.sqrt(self.rss_min + 1e-300)

        def residual(z):
            s = fraction_of_gain(self.x, math.exp(z[0]), z[1])
            s_at = max(float(fraction_of_gain(at_x, math.exp(z[0]), z[1])), 1e-300)
            u = s / s_at
            if self.r0 is not None:
                R0 = self.r0
                A = R0 + (value - R0) / s_at
                penalty = max(a_lo - A, 0.0) + max(A - a_hi, 0.0)
            else:
                base = self.w * (self.y - value * u)
                d = self.w * (1.0 - u)
                dd = float(np.dot(d, d))
                R0 = float(np.dot(d, base) / dd) if dd > 0 else value
                lo_r, hi_r = r_lo, r_hi
                if s_at < 1.0:  # A's bounds as bounds on R0
                    lo_r = max(lo_r, (value - a_hi * s_at) / (1.0 - s_at))
                    hi_r = min(hi_r, (value - a_lo * s_at) / (1.0 - s_at))
                penalty = max(lo_r - hi_r, 0.0)
                R0 = min(max(R0, lo_r), hi_r) if lo_r <= hi_r else 0.5 * (lo_r + hi_r)
            r = self.w * (self.y - R0 * (1.0 - u) - value * u)
            return np.append(r, 1e4 * penalty * scale)

        lo, hi = self.theta_lo, self.theta_hi
        z0 = np.clip(z0, lo + 1e-9 * (1 + np.abs(lo)), hi - 1e-9 * (1 + np.abs(hi)))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            res = least_squares(
                residual, z0, bounds=(lo, hi), method="trf", ftol=1e-10, xtol=1e-10, max_nfev=200
            )
        r = residual(res.x)
        return float(np.dot(r, r)), res.x

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
        if target == "value":
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
    """Walk from the estimate toward ``bound`` until the statistic crosses ``thr``."""
    from scipy.optimize import brentq

    z_prev = problem.start(target)
    v_prev = estimate
    trace = []
    for _ in range(60):
        v = v_prev + direction * step
        hit_bound = (v - bound) * direction >= 0
        if hit_bound:
            v = bound
        rss, z = problem.profile_point(target, v, z_prev, at_x)
        stat = stat_of(rss)
        trace.append((v, rss, stat))
        if stat >= thr:

            def excess(u, z_start=z_prev):
                return stat_of(problem.profile_point(target, u, z_start, at_x)[0]) - thr

            # the crossing to a thousandth of the last step: far below the interval's own noise
            root = brentq(excess, v_prev, v, xtol=1e-3 * abs(v - v_prev), rtol=1e-10)
            return root, False, trace
        if hit_bound:
            return bound, True, trace
        v_prev, z_prev = v, z
        step *= 1.6
    return v_prev, True, trace


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
    step = max(step * 0.5, 1e-9 * (1 + abs(est)))
    ends, opens, traces = [], [], []
    for direction, bound in ((-1, lo_b), (+1, hi_b)):
        if (est - bound) * -direction <= 0:  # estimate already on this bound
            ends.append(bound)
            opens.append(True)
            continue
        end, is_open, trace = _scan(
            problem, target, est, step, bound, direction, thr, stat_of, at_x
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


def profile_prediction(
    fit: SigmoidFit, compute: ArrayLike, *, level: float = 0.9
) -> tuple[np.ndarray, np.ndarray]:
    """Profile-likelihood interval for the expected curve value at each ``compute``.

    The curve value ``v`` at ``C`` replaces A as a parameter (``A = R0 + (v - R0) / s(C)``), so
    its profile is the same constrained least squares as for a parameter; A's bounds are kept.
    An open side is reported as the metric's bound (e.g. 1 for a pass rate).
    """
    thr, known = _threshold(fit, level)
    problem = _Problem(fit)
    c = np.atleast_1d(np.asarray(compute, dtype=float))
    lower, upper = np.empty(c.size), np.empty(c.size)
    cov = fit.cov.to_numpy()
    for i, ci in enumerate(c):
        est = float(fit.predict(ci))
        scale = _value_stderr(fit, ci, cov)
        at_x = float(log_compute(ci)) if ci > 0 else -math.inf
        (lo, hi), _, _ = _one(problem, fit, "value", level, thr, known, at_x, est, scale)
        lower[i], upper[i] = lo, hi
    return lower, upper


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
