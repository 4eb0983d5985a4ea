"""Forecast a fitted curve at larger compute, with an interval for the expected value and one for a
new evaluation.

``forecast(fit, at, method=...)`` turns any of the three uncertainty engines into one
:class:`Forecast`: ``"bootstrap"`` (the default: the sigmoid and the power law combined by their
skill on the run's own past, :mod:`rlcurves.ensemble`, with a predictive distribution calibrated
on finished real runs, :mod:`rlcurves.calibrate`), ``"profile"`` (profile likelihood of the curve
value) and ``"mcmc"`` (emcee posterior).
A fit with fewer than :data:`MIN_DOF` residual degrees of freedom gets an unbounded interval
(the metric's whole range) that says so, never a confident one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from .errors import RLCurvesError
from .predictive import Predictive

if TYPE_CHECKING:
    import pandas as pd

    from .calibrate import Calibration
    from .result import SigmoidFit

ForecastMethod = Literal["bootstrap", "profile", "mcmc"]
METHODS = ("bootstrap", "profile", "mcmc")
# Residual degrees of freedom below which no interval is given: the noise cannot be estimated
# from fewer (with 0 every resample reproduces the data exactly, an interval of width 0).
MIN_DOF = 3


@dataclass(eq=False)
class Forecast:
    """A forecast at ``at`` with its uncertainty.

    What is forecast depends on the path. The default (calibrated bootstrap) forecasts a run's
    **level**: the mean of its evaluations over the last 10% of compute up to each point (``k``
    evaluations, ``info["n_level"]``), which is what "the run ends at ..." means and what the
    calibration on finished runs scores; ``predictive.quantity`` says it in words. The raw
    bootstrap kinds, ``"profile"`` and ``"mcmc"`` forecast the fitted curve (the expected
    reward). ``prediction_lower/upper`` are for one new evaluation.

    Attributes
    ----------
    at : numpy.ndarray or float
        Compute values forecast (a float when a scalar was given; so are the fields below).
    mean : numpy.ndarray or float
        The point forecast: the model-averaged level (default) or the fitted curve.
    lower, upper : numpy.ndarray or float
        Interval at ``level`` for the quantity (``predictive.interval(level)``).
    prediction_lower, prediction_upper : numpy.ndarray or float
        Interval for one new evaluation at ``at`` (calibrated separately on the default path).
    level : float
        Nominal coverage of both intervals.
    method : str
        "bootstrap", "profile" or "mcmc".
    samples : numpy.ndarray or None
        Curve values of every sigmoid bootstrap resample or posterior draw, shape
        ``(n_samples, n_at)`` (``n_at = 1`` for a scalar ``at``); None for the profile method.
        Not the predictive draws: those are ``predictive.draws``.
    info : dict
        Method details. On the default path: ``weights`` (``{"sigmoid": w, "power_law": 1 -
        w}``, from self-backtests; the power law's weight applies beyond the fit window),
        ``driver`` (the family with the larger weight), ``families`` (each family's forecast of
        the level), ``disagreement`` (power law minus sigmoid), ``n_level`` (evaluations in the
        level), ``distance`` (log compute past the window), ``tau`` (the misspecification scale in
        reward units), ``growth`` (``g(d)``: ``V = fit_var + noise_var + tau^2 g(d)``),
        ``scale`` (``sqrt(V)``), ``multipliers`` (the lower and upper conformal multipliers at
        the level used, each tail calibrated on its own), ``multiplier`` (their mean: the
        half-width over ``scale``), ``level_used`` (``level``, or the highest level the
        calibration supports when it supports less: the note says so), ``ensemble`` (the model
        average's setting), ``backtests``.
    calibration : str
        What calibrated the interval: the runs' name and count (the shipped real-run corpus by
        default), or "uncalibrated" (a raw bootstrap kind, profile or mcmc).
    calibration_n : int
        Number of calibration runs (0 when uncalibrated).
    unbounded : bool
        True when no interval can be given: too few degrees of freedom in the fit. The intervals
        are then the metric's whole range and ``note`` says why. (A level above what the
        calibration runs support, ``1 - 2 / (n + 1)``, is not refused: the interval at the
        highest supported level is given, ``info["level_used"]``, and ``note`` says so.)
    note : str
        Warnings in words (unbounded interval, ceiling on its bound, a run that peaked, a run
        unlike the calibration runs, the power law driving the forecast or the two families
        disagreeing by more than half the interval).
    predictive : Predictive or None
        The predictive distribution the interval ``[lower, upper]`` comes from (its
        ``interval(info["level_used"])`` is the printed one; its ``info["min_tail"]`` is the
        smallest one-sided probability the calibration supports): every probability a decision
        uses
        (:mod:`rlcurves.decide`) is computed from its draws. On the default path it is the
        distribution of the run's level, so "ends above a baseline" compares levels. None when
        the interval is unbounded.
    prediction_predictive : Predictive or None
        The same for one new evaluation (``prediction_lower/upper``); None off the default path
        or when unbounded.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> fc = rlcurves.forecast(fit, 16_000, seed=0, progress=False)
    >>> fc.predictive.quantity
    "mean of the 8 evaluations up to each point (the run's level over its last 10% of compute)"
    >>> sorted(fc.info["weights"])
    ['power_law', 'sigmoid']
    >>> bool(fc.lower < fc.mean < fc.upper)
    True
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
    prediction_predictive: Predictive | None = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per forecast point: at, mean, lower, upper, prediction_lower/upper."""
        import pandas as pd

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
    calibration: Calibration | str | None = None,
    band: bool = False,
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
    calibration : Calibration or str, optional
        Scores from :func:`rlcurves.calibrate.calibrate` on your own finished runs, or the name
        of the shipped calibration to use: ``"validation"`` (the default: the bundled real-run
        corpus's validation runs, :func:`default_calibration`) or ``"training reward"`` (its
        runs that log the training reward, whose forecasts are several times wider). With the
        default, a reward column whose name reads as a training reward gets a note saying so
        (:func:`rlcurves.calibrate.looks_like_training_reward`).
    band : bool
        A band to draw over many ``at`` (the calibrated bootstrap), without steps: the level's
        window taken as continuous and the power law phased in over the first level window
        past the fit window (``continuous`` in :func:`rlcurves.ensemble.combine`). It differs
        from the forecast at a point alone by at most half such a step, and only within 1.1x
        of the fit window's end for the phase-in; use the default for numbers you report.
    **kwargs
        Passed to the engine: :func:`rlcurves.bootstrap.bootstrap` (``n``, ``kind``, ``runs``,
        ...), :func:`rlcurves.profile.profile_prediction` or :func:`rlcurves.bayes.posterior`.

    Returns
    -------
    Forecast

    Raises
    ------
    RLCurvesError
        An unknown ``method``, or ``at`` that is not finite compute >= 0; a ``level`` the
        calibration cannot support is not an error: the forecast then gives the interval at the
        highest level it supports and says so.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> fc = rlcurves.forecast(fit, [12_000, 16_000], level=0.9, seed=0, progress=False)
    >>> fc.to_frame()[["at", "mean", "lower", "upper"]].round(2)
            at  mean  lower  upper
    0  12000.0  0.60   0.58   0.63
    1  16000.0  0.61   0.58   0.65
    """
    from .bootstrap import _tails, metric_range

    if method not in METHODS:
        raise RLCurvesError(f"unknown forecast method {method!r}; choose one of {list(METHODS)}")
    if not (hasattr(fit, "predict") and hasattr(fit, "fit_compute")):  # an AttributeError before
        raise RLCurvesError(
            f"fit= must be a fit from rlcurves.fit_sigmoid, got {type(fit).__name__}; fit the "
            "run first: fit = rlcurves.fit_sigmoid('compute', 'reward', data=df)"
        )
    _tails(level)
    if seed is not None and not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise RLCurvesError(f"seed= takes a non-negative integer or None, got {seed!r}", seed=seed)
    scalar = np.ndim(at) == 0
    try:
        c = np.atleast_1d(np.asarray(at, dtype=float))
    except (TypeError, ValueError):
        raise RLCurvesError(f"at=<compute> takes numbers (compute values); got {at!r}") from None
    if c.size == 0:
        raise RLCurvesError("at=<compute> is empty: give the compute value(s) to forecast at")
    if c.ndim != 1 or not np.all(np.isfinite(c)) or np.any(c < 0):
        bad = [float(v) for v in np.ravel(c) if not (np.isfinite(v) and v >= 0)][:5]
        raise RLCurvesError(
            f"at=<compute> takes finite compute values >= 0 (in the fit's compute units); got "
            f"{', '.join(f'{v:g}' for v in bad) or repr(at)}",
            at=bad,
        )
    mean = np.asarray(fit.predict(c), dtype=float)
    rng = metric_range(fit)
    notes = _notes(fit, c)

    def out(a):
        a = np.asarray(a, dtype=float)
        return float(a[0]) if scalar else a

    calibrated = method == "bootstrap" and kwargs.get("kind", "calibrated") == "calibrated"
    if calibrated:
        from .calibrate import (
            looks_like_training_reward,
            resolve_calibration,
            training_reward_note,
        )

        cal = resolve_calibration(calibration)
        column = (getattr(fit, "units", None) or {}).get("reward")
        if calibration is None and looks_like_training_reward(column):
            notes.append(training_reward_note(f"the reward column {column!r}"))
        open_why = _curve_open(fit) if cal.has_prior else None
        if open_why is not None:
            return _prior_forecast(fit, c, level, seed, cal, notes, open_why, out)
    if fit.dof < MIN_DOF:
        need = len(fit.free_params) + MIN_DOF
        notes.insert(
            0,
            f"UNBOUNDED: the fit has {fit.dof} residual degrees of freedom, too few to estimate "
            f"the noise; fit at least {need} points"
            + (" (or fix R0 with r0=)" if fit.r0_fixed is None else "")
            + " for an interval",
        )
        return _unbounded(c, mean, rng, level, method, notes, {"dof": fit.dof}, out)
    cal_name, cal_n = "uncalibrated", 0
    prediction_predictive = None
    if method == "bootstrap":
        from .bootstrap import bootstrap, prediction_band

        kind = kwargs.setdefault("kind", "calibrated")
        boot = bootstrap(fit, seed=seed, progress=progress, **kwargs)
        samples = boot.curves(c)
        info = {"kind": boot.kind, "n": boot.n, **boot.info}
        if kind == "calibrated":
            from .calibrate import N_BOOT, N_DRAWS
            from .ensemble import combine, info_dict

            # the model variance from as many resamples as the calibration's records had
            ens = combine(fit, c, config=cal.config, n_resamples=N_BOOT, seed=seed, continuous=band)
            mean = ens.mean
            cal_name, cal_n = cal.name, cal.n
            notes += cal.notes_for(ens.noise_sd, fit.n)
            info.update(info_dict(ens, scalar), tau=cal.tau)
            quantity = _level_words(ens.k)
            info["quantity"] = quantity
            used = cal.supported_level(level)
            if used < level:
                need = math.ceil(2 / (1 - level) - 1 - 1e-9)
                notes.insert(
                    0,
                    f"a {100 * level:g}% interval needs at least {need} calibration runs "
                    f"(each {100 * (1 - level) / 2:.3g}% tail needs 1 / p - 1 runs behind it); "
                    f"{cal_name} supports up to {cal.max_level:.1%}: the interval shown is the "
                    f"{used:.1%} one (use a lower level, or calibrate on more finished runs)",
                )
            scale = np.sqrt(cal.variance(ens))
            scale_one = np.sqrt(cal.variance(ens, one=True))
            # one stratified draw per row, rows shuffled with the seed; the same row of both
            # distributions shares its quantile, so one evaluation is never less certain than
            # the level (its half-width at least the level's plus the gap of the two centers)
            perm = np.random.default_rng(0 if seed is None else seed).permutation(N_DRAWS)
            z = cal.z_values(N_DRAWS, ens.distance, smooth=band)[perm]
            z_one = cal.z_values(N_DRAWS, ens.distance, one=True, smooth=band)[perm]
            half_one = np.maximum(
                np.abs(z_one) * scale_one, np.abs(z) * scale + np.abs(ens.point - mean)
            )
            source = {
                "draws": "combined forecast + sqrt(V) Z",
                "calibration": cal_name,
                "min_tail": cal.min_tail,
            }
            predictive = Predictive(c, np.clip(mean + scale * z, *rng), quantity, source)
            prediction_predictive = Predictive(
                c, np.clip(ens.point + np.sign(z) * half_one, *rng), "one evaluation", source
            )
            lo, hi = predictive.interval(used)
            plo, phi = prediction_predictive.interval(used)
            m_lo, m_hi = cal.multipliers(used, ens.distance)
            info.update(
                multiplier=out((m_lo + m_hi) / 2),
                multipliers=(out(m_lo), out(m_hi)),
                scale=scale,
                growth=out(cal.growth_at(ens.distance)),
                level_used=used,
            )
            words = ens.summary_line()
            info["model"] = words
            half = float((hi[-1] - lo[-1]) / 2)
            gap = abs(float(np.nan_to_num(ens.disagreement[-1])))
            if ens.w_power_law[-1] > 0.5 or gap > half:
                notes.append(words)
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
        prediction_predictive=prediction_predictive,
    )


def _curve_open(fit: SigmoidFit) -> str | None:
    """Why the run's own data leave its curve open (None: they do not): too few evaluations to
    estimate the noise, or a rising run that has not taken off (its level within noise of where
    it started, :func:`rlcurves.shapes.took_off`). Only for a metric in [0, 1] (the corpus's
    runs are pass rates): another metric keeps the fit's forecast (or none)."""
    from .bootstrap import metric_range
    from .shapes import took_off

    if metric_range(fit) != (0.0, 1.0):  # the corpus's runs are pass rates, rising
        return None
    if fit.dof < MIN_DOF:
        return f"{fit.n} evaluations leave {fit.dof} residual degrees of freedom"
    r = fit.fit_reward[np.argsort(fit.fit_compute, kind="stable")]
    # a run that fell from where it started is not waiting to take off (the fit's A < R0 was
    # the test: a flat run's fit falls half the time, and 22 of 40 flat runs got their own fit)
    if took_off(-r):
        return None
    if not took_off(r):
        return "the run has not taken off (its level is within noise of where it started)"
    return None


def _prior_forecast(fit, c, level, seed, cal, notes, why, out) -> Forecast:
    """The forecast of a run whose own data leave its curve open: the corpus's prior predictive
    of the gain still to come from the level it has reached (:meth:`rlcurves.calibrate.
    Calibration.prior_predictive`), one predictive distribution like every other forecast."""
    from .bootstrap import metric_range
    from .calibrate import N_DRAWS

    rng = metric_range(fit)
    order = np.argsort(fit.compute, kind="stable")
    seen = fit.compute[order] <= float(np.max(fit.fit_compute))
    cc, rr = fit.compute[order][seen], fit.reward[order][seen]
    draws, pinfo = cal.prior_predictive(cc, rr, c, top=rng[1], n=N_DRAWS)
    perm = np.random.default_rng(0 if seed is None else seed).permutation(N_DRAWS)
    draws = np.clip(draws[perm], *rng)
    sd = float(np.std(np.diff(rr), ddof=1) / math.sqrt(2)) if rr.size >= 3 else 0.0
    noise = np.random.default_rng(1 if seed is None else seed + 1).normal(0, sd, draws.shape)
    quantity = "the run's level over its last 10% of compute (from the corpus's gains)"
    source = {"draws": "level reached + headroom x the corpus's gain still to come",
              "calibration": cal.name, "min_tail": pinfo["min_tail"]}  # fmt: skip
    predictive = Predictive(c, draws, quantity, source)
    prediction_predictive = Predictive(c, np.clip(draws + noise, *rng), "one evaluation", source)
    used = min(level, 1.0 - 2.0 * pinfo["min_tail"])
    lo, hi = predictive.interval(used)
    plo, phi = prediction_predictive.interval(used)
    notes.insert(
        0,
        f"{why}: the fit cannot say where the curve goes; the forecast is the corpus's prior "
        f"predictive (the run's level now, {pinfo['reached']:.3f}, plus the share of the "
        f"headroom the corpus's {pinfo['shape_runs']} runs gained from the same fraction of "
        "their budget on)",
    )
    if used < level:
        notes.insert(1, f"the interval shown is the {used:.1%} one (the prior's runs support "
                     "no more)")  # fmt: skip
    beyond = _beyond_the_prior(pinfo)
    if beyond:
        notes.insert(1, beyond)
    info = {"prior": True, "why": why, "reached": pinfo["reached"],
            "fraction": out(pinfo["fraction"]), "n_eval": pinfo["n_eval"], "level_used": used,
            "shape_reach": pinfo["shape_reach"], "capped": bool(np.any(pinfo["capped"])),
            "quantity": quantity}  # fmt: skip
    return Forecast(
        at=out(c),
        mean=out(np.median(draws, axis=0)),
        lower=out(lo),
        upper=out(hi),
        prediction_lower=out(plo),
        prediction_upper=out(phi),
        level=level,
        method="bootstrap",
        samples=None,
        info=info,
        calibration=cal.name,
        calibration_n=cal.n,
        note="; ".join(notes),
        predictive=predictive,
        prediction_predictive=prediction_predictive,
    )


def _beyond_the_prior(pinfo: dict) -> str | None:
    """The note for a run further into its budget than any record of the prior's runs: a flat
    run's gain is bounded by a sigmoid's from the rise it can have made (e.g. the validation
    corpus has no run still flat at half its budget; :meth:`rlcurves.calibrate.Calibration.
    prior_predictive`); otherwise their gains from earlier in their runs stand in for gains the
    corpus never saw from this far on."""
    from .calibrate import BEYOND_THE_PRIOR

    frac = np.atleast_1d(pinfo["fraction"])
    frac = frac[frac < 1.0]
    reach = pinfo["shape_reach"]
    if not frac.size or not math.isfinite(reach) or frac.max() <= BEYOND_THE_PRIOR * reach:
        return None
    if np.any(pinfo["capped"]):
        return (
            "no run of the calibration's corpus was still flat this far into its budget (the "
            f"run is at {frac.max():.0%} of it, their records reach {reach:.0%}): the gain "
            "still to come is bounded by a sigmoid's, at most the rise the run can have made "
            "by now times (compute / now)^B, B as the corpus's runs' fits (an assumption the "
            "corpus cannot test)"
        )
    state = "taken off" if pinfo["taken_off"] else "flat"
    return (
        f"no run of the calibration's corpus was still {state} this far into its budget (the "
        f"run is at {frac.max():.0%} of it, their records reach {reach:.0%}): the prior carries "
        "their gains from earlier in their runs over, and may be too hopeful"
    )


def _normal_draws(n: int) -> np.ndarray:
    """``n`` stratified standard normal quantiles, ascending."""
    from scipy.stats import norm

    return norm.ppf((np.arange(n) + 0.5) / n)


def _level_words(k: np.ndarray) -> str:
    """The level's quantity in words, with the number of evaluations it averages."""
    k = np.atleast_1d(k)
    n = f"{int(k.min())}" if k.min() == k.max() else f"{int(k.min())}-{int(k.max())}"
    return (
        f"mean of the {n} evaluations up to each point (the run's level over its last 10% of "
        "compute)"
    )


def _unbounded(c, mean, rng, level, method, notes, info, out) -> Forecast:
    """A forecast without an interval: the metric's whole range, flagged, no predictive."""
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
        info=info,
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
