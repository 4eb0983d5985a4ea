"""Forecast a fitted curve at larger compute, with an interval for the expected value and one for a
new evaluation.

``forecast(fit, at, method=...)`` turns any of the three uncertainty engines into one
:class:`Forecast`: ``"bootstrap"`` (resampled refits; the default, with the calibrated AR(1) noise
model, see ``benchmarks/calibration.py``), ``"profile"`` (profile likelihood of the curve value)
and ``"mcmc"`` (emcee posterior).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .errors import RLCurvesError

if TYPE_CHECKING:
    from .result import SigmoidFit

ForecastMethod = Literal["bootstrap", "profile", "mcmc"]
METHODS = ("bootstrap", "profile", "mcmc")


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
        Method details (bootstrap kind, inflation factor, diagnostics).
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

    def to_frame(self) -> pd.DataFrame:
        """One row per forecast point: at, mean, lower, upper, prediction_lower/upper."""
        cols = ("at", "mean", "lower", "upper", "prediction_lower", "prediction_upper")
        return pd.DataFrame({c: np.atleast_1d(getattr(self, c)) for c in cols})

    def __repr__(self) -> str:
        at, mean = np.atleast_1d(self.at), np.atleast_1d(self.mean)
        lo, hi = np.atleast_1d(self.lower), np.atleast_1d(self.upper)
        parts = [
            f"{a:g}: {m:.4g} [{lo_:.4g}, {hi_:.4g}]"
            for a, m, lo_, hi_ in zip(at[:3], mean[:3], lo[:3], hi[:3], strict=False)
        ]
        more = ", ..." if at.size > 3 else ""
        return f"Forecast({self.method}, {self.level:.0%}: {'; '.join(parts)}{more})"


def forecast(
    fit: SigmoidFit,
    at: ArrayLike,
    *,
    level: float = 0.9,
    method: ForecastMethod = "bootstrap",
    seed: int | None = None,
    progress: bool = True,
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
        "bootstrap" (default): refits on resamples. Its default noise model, ``kind="calibrated"``,
        is an AR(1) parametric bootstrap whose spread is inflated by a factor calibrated on
        simulated runs (see :data:`rlcurves.bootstrap.CALIBRATED_INFLATION`): plain residual and
        block bootstraps under-cover for slow run-level drift. Other kinds: ``kind="residual"``,
        ``"block"``, ``"ar1"``, ``"wild"``, ``"pairs"``, ``"run"`` (with ``runs=``).
        "profile": profile-likelihood interval of the curve value at each point (no samples).
        "mcmc": posterior draws from :func:`rlcurves.bayes.posterior`.
    seed : int, optional
        Random seed (bootstrap and mcmc).
    progress : bool
        Show progress bars.
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
    if method == "bootstrap":
        from .bootstrap import bootstrap, prediction_band

        kwargs.setdefault("kind", "calibrated")
        boot = bootstrap(fit, seed=seed, progress=progress, **kwargs)
        samples = boot.curves(c)
        lo, hi = boot.curve_band(samples, level)
        plo, phi = prediction_band(samples, boot, level, seed)
        info = {"kind": boot.kind, "n": boot.n, **boot.info}
    elif method == "mcmc":
        from .bayes import posterior

        post = posterior(fit, seed=seed, progress=progress, **kwargs)
        samples = post.curves(c)
        lo, hi = post.predict_interval(c, level)
        plo, phi = post.predict_interval(c, level, prediction=True, seed=seed)
        info = {"diagnostics": post.diagnostics()}
    else:
        from .profile import profile_prediction

        band = profile_prediction(fit, c, level=level, **kwargs)
        lo, hi = band
        samples = None
        plo, phi = _widen_for_noise(fit, mean, lo, hi, level, rng)
        info = {"lower_open": band.lower_open, "upper_open": band.upper_open}

    def out(a):
        a = np.asarray(a, dtype=float)
        return float(a[0]) if scalar else a

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
    )


def _widen_for_noise(fit, mean, lo, hi, level, rng):
    """Prediction interval from a curve interval: add a t-quantile of the noise in quadrature."""
    from scipy.stats import t as student_t

    sd = float(np.sqrt(np.mean(fit.residuals**2) * fit.n / max(fit.dof, 1)))
    q = student_t.ppf((1 + level) / 2, max(fit.dof, 1)) * sd
    with np.errstate(invalid="ignore"):
        plo = mean - np.sqrt((mean - lo) ** 2 + q * q)
        phi = mean + np.sqrt((hi - mean) ** 2 + q * q)
    return np.clip(plo, *rng), np.clip(phi, *rng)
