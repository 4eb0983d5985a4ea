"""Forecast a fitted curve at larger compute, with an interval for the expected value and one for a
new evaluation.

``forecast(fit, at, method=...)`` turns any of the three uncertainty engines into one
:class:`Forecast`: ``"bootstrap"`` (resampled refits; the default, an AR(1) bootstrap whose
interval is scaled by conformal scores on finished real runs, see :mod:`rlcurves.calibrate`),
``"profile"`` (profile likelihood of the curve value) and ``"mcmc"`` (emcee posterior).
A fit with fewer than :data:`MIN_DOF` residual degrees of freedom gets an unbounded interval
(the metric's whole range) that says so, never a confident one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .errors import RLCurvesError
from .predictive import Predictive

if TYPE_CHECKING:
    from .calibrate import Calibration
    from .result import SigmoidFit

ForecastMethod = Literal["bootstrap", "profile", "mcmc"]
METHODS = ("bootstrap", "profile", "mcmc")
# Residual degrees of freedom below which no interval is given: the noise cannot be estimated
# from fewer (with 0 every resample reproduces the data exactly, an interval of width 0).
MIN_DOF = 3


@dataclass(eq=False)
class Forecast:
    """A forecast of the fitted curve at ``at`` with its uncertainty.

    Attributes
    ----------
    at : numpy.ndarray or float
        Compute values forecast (a float when a scalar was given; so are the fields below).
    mean : numpy.ndarray or float
        The fitted curve at ``at`` (the point forecast).
    lower, upper : numpy.ndarray or float
        Interval for the expected curve value at ``at``, at ``level``.
    prediction_lower, prediction_upper : numpy.ndarray or float
        Interval for one new evaluation at ``at`` (adds the evaluation noise).
    level : float
        Nominal coverage of both intervals.
    method : str
        "bootstrap", "profile" or "mcmc".
    samples : numpy.ndarray or None
        Curve values of every bootstrap resample or posterior draw, shape ``(n_samples, n_at)``
        (``n_at = 1`` for a scalar ``at``); None for the profile method.
    info : dict
        Method details (bootstrap kind, conformal multiplier, diagnostics).
    calibration : str
        What calibrated the interval: the runs' name and count (the shipped real-run corpus by
        default), or "uncalibrated" (a raw bootstrap kind, profile or mcmc).
    calibration_n : int
        Number of calibration scores (0 when uncalibrated).
    unbounded : bool
        True when the data cannot bound the interval (too few degrees of freedom): the intervals
        are then the metric's whole range.
    note : str
        Warnings in words (unbounded interval, ceiling on its bound, a run that peaked).
    predictive : Predictive or None
        The predictive distribution the interval ``[lower, upper]`` comes from: every probability
        a decision uses (:mod:`rlcurves.decide`) is computed from its draws. None when the
        interval is unbounded.
    """

    at: np.ndarray | float
    mean: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float
    prediction_lower: np.ndarray | float
    prediction_upper: np.ndarray | float
    level: float
    method: str
    samples: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)
    calibration: str = "uncalibrated"
    calibration_n: int = 0
    unbounded: bool = False
    note: str = ""
    predictive: Predictive | None = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per forecast point: at, mean, lower, upper, prediction_lower/upper."""
        cols = ("at", "mean", "lower", "upper", "prediction_lower", "prediction_upper")
        return pd.DataFrame({c: np.atleast_1d(getattr(self, c)) for c in cols})

    def _repr_html_(self) -> str:
        from ._html import forecast_html

        return forecast_html(self)

    def __repr__(self) -> str:
        at, mean = np.atleast_1d(self.at), np.atleast_1d(self.mean)
        lo, hi = np.atleast_1d(self.lower), np.atleast_1d(self.upper)
        parts = [
            f"{a:g}: {m:.4g} [{lo_:.4g}, {hi_:.4g}]"
            for a, m, lo_, hi_ in zip(at[:3], mean[:3], lo[:3], hi[:3], strict=False)
        ]
        more = ", ..." if at.size > 3 else ""
        note = f"; {self.note}" if self.note else ""
        return f"Forecast({self.method}, {self.level:.0%}: {'; '.join(parts)}{more}{note})"


def forecast(
    fit: SigmoidFit,
    at: ArrayLike,
    *,
    level: float = 0.9,
    method: ForecastMethod = "bootstrap",
    seed: int | None = None,
    progress: bool = True,
    calibration: Calibration | None = None,
    **kwargs: Any,
) -> Forecast:
    """Forecast ``fit`` at compute ``at`` with calibrated intervals.

    Parameters
    ----------
    fit : SigmoidFit
        A fitted curve (e.g. on half of the planned budget).
    at : float or array_like
        Compute value(s) to forecast.
    level : float
        Nominal coverage of the intervals, in (0, 1).
    method : {"bootstrap", "profile", "mcmc"}
        "bootstrap" (default): refits on resamples. By default (``kind="calibrated"``) an AR(1)
        parametric bootstrap gives the run's own spread, and the interval is ``mean +- q *
        scale`` with ``scale`` growing with the distance past the fit window and ``q`` the
        conformal quantile of forecast errors on finished runs (``calibration``; see
        :mod:`rlcurves.calibrate`): one run's residuals cannot see drift or a sag past its
        window. A raw kind (``"residual"``, ``"block"``, ``"ar1"``, ``"wild"``, ``"pairs"``,
        ``"run"`` with ``runs=``) gives the plain percentile band, marked uncalibrated.
        "profile": profile-likelihood interval of the curve value at each point (no samples).
        "mcmc": posterior draws from :func:`rlcurves.bayes.posterior`.
    seed : int, optional
        Random seed (bootstrap and mcmc).
    progress : bool
        Show progress bars.
    calibration : Calibration, optional
        Scores from :func:`rlcurves.calibrate.calibrate` on your own finished runs; default: the
        shipped calibration on the bundled real-run corpus (:func:`default_calibration`).
    **kwargs
        Passed to the engine: :func:`rlcurves.bootstrap.bootstrap` (``n``, ``kind``, ``runs``,
        ...), :func:`rlcurves.profile.profile_prediction` or :func:`rlcurves.bayes.posterior`.

    Returns
    -------
    Forecast
    """
    from .bootstrap import _tails, metric_range

    if method not in METHODS:
        raise RLCurvesError(f"unknown forecast method {method!r}; choose one of {list(METHODS)}")
    _tails(level)
    scalar = np.ndim(at) == 0
    c = np.atleast_1d(np.asarray(at, dtype=float))
    if c.ndim != 1 or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise RLCurvesError(f"at must be finite compute values >= 0, got {at!r}")
    mean = np.asarray(fit.predict(c), dtype=float)
    rng = metric_range(fit)
    notes = _notes(fit, c)

    def out(a):
        a = np.asarray(a, dtype=float)
        return float(a[0]) if scalar else a

    if fit.dof < MIN_DOF:
        need = len(fit.free_params) + MIN_DOF
        notes.insert(
            0,
            f"UNBOUNDED: the fit has {fit.dof} residual degrees of freedom, too few to estimate "
            f"the noise; fit at least {need} points (or fix R0 with r0=) for an interval",
        )
        lo, hi = np.full(c.shape, rng[0]), np.full(c.shape, rng[1])
        return Forecast(
            at=out(c),
            mean=out(mean),
            lower=out(lo),
            upper=out(hi),
            prediction_lower=out(lo),
            prediction_upper=out(hi),
            level=level,
            method=method,
            unbounded=True,
            note="; ".join(notes),
            info={"dof": fit.dof},
        )
    cal_name, cal_n = "uncalibrated", 0
    if method == "bootstrap":
        from .bootstrap import bootstrap, prediction_band

        kind = kwargs.setdefault("kind", "calibrated")
        boot = bootstrap(fit, seed=seed, progress=progress, **kwargs)
        samples = boot.curves(c)
        info = {"kind": boot.kind, "n": boot.n, **boot.info}
        if kind == "calibrated":
            from scipy.stats import norm

            from .calibrate import default_calibration, forecast_scale, residual_sd

            cal = default_calibration() if calibration is None else calibration
            scale = forecast_scale(fit, c, samples, cal.n_eval)
            q = cal.quantile(level)
            half = q * scale
            lo, hi = np.clip(mean - half, *rng), np.clip(mean + half, *rng)
            z = float(norm.ppf((1 + level) / 2)) * residual_sd(fit)
            phalf = np.sqrt(half**2 + z * z)
            plo, phi = np.clip(mean - phalf, *rng), np.clip(mean + phalf, *rng)
            cal_name, cal_n = cal.name, cal.n
            info.update(multiplier=q, scale=scale)
            predictive = _matched_predictive(c, mean, lo, hi, level, rng, "curve", cal_name)
        else:
            lo, hi = boot.curve_band(samples, level)
            plo, phi = prediction_band(samples, boot, level, seed)
            predictive = Predictive(c, samples, "curve", {"draws": f"{boot.kind} bootstrap"})
    elif method == "mcmc":
        from .bayes import posterior

        post = posterior(fit, seed=seed, progress=progress, **kwargs)
        samples = post.curves(c)
        lo, hi = post.predict_interval(c, level)
        plo, phi = post.predict_interval(c, level, prediction=True, seed=seed)
        info = {"diagnostics": post.diagnostics()}
        predictive = Predictive(c, samples, "curve", {"draws": "posterior"})
    else:
        from .profile import profile_prediction

        band = profile_prediction(fit, c, level=level, **kwargs)
        lo, hi = band
        samples = None
        plo, phi = _widen_for_noise(fit, mean, lo, hi, level, rng)
        info = {"lower_open": band.lower_open, "upper_open": band.upper_open}
        predictive = _matched_predictive(c, mean, lo, hi, level, rng, "curve", "profile")

    return Forecast(
        at=out(c),
        mean=out(mean),
        lower=out(lo),
        upper=out(hi),
        prediction_lower=out(plo),
        prediction_upper=out(phi),
        level=level,
        method=method,
        samples=samples,
        info=info,
        calibration=cal_name,
        calibration_n=cal_n,
        note="; ".join(notes),
        predictive=predictive,
    )


# Draws of a distribution matched to an interval: deterministic normal quantiles, so that the
# printed interval and every probability agree exactly at the printed level.
_N_MATCHED = 2000


def _matched_predictive(c, mean, lo, hi, level, rng, quantity, source) -> Predictive:
    """A predictive distribution whose central ``level`` interval is ``[lo, hi]``: a normal on
    each side (split at the mean, so an asymmetric interval stays asymmetric), clipped to the
    metric's range."""
    from scipy.stats import norm

    z = float(norm.ppf((1 + level) / 2))
    u = norm.ppf((np.arange(_N_MATCHED) + 0.5) / _N_MATCHED)[:, None]
    mean = np.asarray(mean, dtype=float)[None, :]
    sd_lo = np.maximum(mean - np.asarray(lo, dtype=float)[None, :], 0.0) / z
    sd_hi = np.maximum(np.asarray(hi, dtype=float)[None, :] - mean, 0.0) / z
    draws = np.where(u < 0, mean + u * sd_lo, mean + u * sd_hi)
    return Predictive(
        c, np.clip(draws, *rng), quantity, {"draws": f"normal matched to the {source} interval"}
    )


def _notes(fit: SigmoidFit, c: np.ndarray) -> list[str]:
    """Warnings about forecasting beyond the data: a ceiling on its bound, a run that peaked."""
    notes = []
    beyond = bool(np.any(c > np.max(fit.fit_compute)))
    lo, hi = fit.bounds.A
    A = fit.params["A"]
    if beyond and any(np.isfinite(b) and abs(A - b) <= 1e-9 * (1 + abs(b)) for b in (lo, hi)):
        notes.append(
            f"the fitted ceiling A = {A:g} sits on its bound: beyond the data the forecast is set "
            "by the bound, not by the data"
        )
    peak = getattr(fit, "peak", None)
    if beyond and peak:
        notes.append(peak)
    return notes


def _widen_for_noise(fit, mean, lo, hi, level, rng):
    """Prediction interval from a curve interval: add a t-quantile of the noise in quadrature."""
    from scipy.stats import t as student_t

    sd = float(np.sqrt(np.mean(fit.residuals**2) * fit.n / max(fit.dof, 1)))
    q = student_t.ppf((1 + level) / 2, max(fit.dof, 1)) * sd
    with np.errstate(invalid="ignore"):
        plo = mean - np.sqrt((mean - lo) ** 2 + q * q)
        phi = mean + np.sqrt((hi - mean) ** 2 + q * q)
    return np.clip(plo, *rng), np.clip(phi, *rng)
