"""The library in the loop of a running job: refit as evaluations arrive, advise in words.

:class:`Monitor` holds a run's points as they arrive (``update(compute, reward)`` or
``update_from(path)``), refits after every new evaluation and returns a :class:`MonitorReport`:
the forecast at the budget with its interval, the compute to reach a target, whether the run has
peaked and, given a baseline, the probability of ending above it at the budget, with one advice
line. It is a consumer of the library's data path (:func:`rlcurves.read_log`,
:func:`rlcurves.fit_sigmoid`, :func:`rlcurves.forecast`, ``SigmoidFit.compute_to_reach``), not a
second implementation of it: a refit is the exact start-free solver plus a bootstrap forecast,
measured at 0.1-0.6 s per evaluation on the bundled 25-evaluation runs (500 resamples, 2 shared
CPU cores; most of it the bootstrap of a not yet identified fit), so no warm start is needed for
evaluations minutes apart. ``n_samples`` trades that time against the forecast's resolution.

The advice is one of :data:`ADVICE`. It never says stop (``unlikely ...`` or ``peaked``) before
the fit is identified (:func:`identified`): until then it is ``"too early to tell"``.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._format import format_compute
from .errors import RLCurvesError

if TYPE_CHECKING:
    from .forecast import Forecast
    from .result import SigmoidFit
    from .target import ComputeTarget

TOO_EARLY = "too early to tell"
CONTINUE = "continue"
ON_TRACK = "on track"
UNLIKELY_BASELINE = "unlikely to beat the baseline"
UNLIKELY_TARGET = "unlikely to reach the target"
PEAKED = "peaked"
#: Every advice a :class:`MonitorReport` can give; the last three advise stopping.
ADVICE = (TOO_EARLY, CONTINUE, ON_TRACK, UNLIKELY_BASELINE, UNLIKELY_TARGET, PEAKED)
STOP_ADVICE = (UNLIKELY_BASELINE, UNLIKELY_TARGET, PEAKED)

# Words of fit_sigmoid's notes (the text of its IdentifiabilityWarning) that mean the data do not
# determine the curve. Two notes are tolerated: a poorly identified B alone (a sharp rise the run
# has already passed, whose plateau is measured) and R0 on its bound (a start at 0 or 1).
_BLOCKING_WORDS = ("NOT CONVERGED", "not determined", "poorly identified", "bound", "edge",
                   "degrees of freedom")  # fmt: skip
_TOLERATED_NOTES = ("B is poorly identified", "R0 sits on its bound")


def identified(fit: SigmoidFit) -> tuple[bool, str]:
    """Whether the fit determines the curve well enough to advise on, and why not.

    Identified: the fit converged, every free parameter has a finite standard error, and its
    message (the text of its :class:`~rlcurves.IdentifiabilityWarning`) flags nothing but a
    poorly identified B (a sharp rise already behind the run) or R0 on its bound. A poorly
    identified A or C_mid (a run before its midpoint, where the two trade off), a parameter on its
    bound or a search at its edge all block the advice.

    Returns
    -------
    (bool, str)
        The verdict and, when False, the fit's notes that block it.
    """
    if not fit.converged:
        return False, fit.message
    notes = [
        n
        for n in fit.message.split("; ")
        if any(w in n for w in _BLOCKING_WORDS) and not n.startswith(_TOLERATED_NOTES)
    ]
    if not notes and not all(
        math.isfinite(v) for k, v in fit.stderr.items() if k in fit.free_params
    ):
        notes = ["a parameter has an infinite standard error"]
    return (not notes), "; ".join(notes)


@dataclass(eq=False, repr=False)
class MonitorReport:
    """Where a running job stands: forecast at the budget, target, baseline, advice.

    Attributes
    ----------
    advice : str
        One of :data:`ADVICE`: ``"too early to tell"``, ``"continue"``, ``"on track"``,
        ``"unlikely to beat the baseline"``, ``"unlikely to reach the target"``, ``"peaked"``.
    stop : bool
        The advice is to stop the run (one of :data:`STOP_ADVICE`); never before the fit is
        identified.
    reason : str
        The advice in a sentence, with the numbers behind it.
    n_points : int
        Evaluations seen.
    compute, budget : float
        Compute of the latest evaluation and the planned budget; ``fraction`` = their ratio.
    fit : SigmoidFit or None
        The latest fit (None while there are too few points to fit).
    is_identified : bool
        See :func:`identified`.
    forecast : Forecast or None
        The forecast of the curve at the budget (None before the first fit).
    target, target_compute : float or None, ComputeTarget or None
        The target reward and the compute to reach it with its interval.
    p_target : float or None
        Probability that the curve is at or past the target at the budget.
    baseline, baseline_mean, baseline_lower, baseline_upper : str, float
        The baseline's name and its curve at the budget with its interval.
    p_beat : float or None
        Probability that this run's curve ends above the baseline's at the budget (independent
        draws of both forecasts; about the expected curves, not one noisy evaluation).
    gain : float or None
        The most the rest of the budget plausibly adds: the forecast's interval end at the
        budget minus the fitted value now (in the direction of improvement).
    peak_compute : float or None
        Compute of the best (smoothed) evaluation so far.
    evals_since_peak : int
        Evaluations since then.
    notes : list of str
        What the reader cleaned, a half-written last line waited for, and similar.
    """

    advice: str
    reason: str
    n_points: int
    compute: float
    budget: float
    fit: SigmoidFit | None = None
    is_identified: bool = False
    forecast: Forecast | None = None
    level: float = 0.9
    target: float | None = None
    target_compute: ComputeTarget | None = None
    p_target: float | None = None
    baseline: str | None = None
    baseline_mean: float | None = None
    baseline_lower: float | None = None
    baseline_upper: float | None = None
    p_beat: float | None = None
    gain: float | None = None
    peak_compute: float | None = None
    evals_since_peak: int = 0
    label: str | None = None
    notes: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    @property
    def stop(self) -> bool:
        return self.advice in STOP_ADVICE

    @property
    def fraction(self) -> float:
        return self.compute / self.budget if self.budget > 0 else math.nan

    @property
    def mean(self) -> float | None:
        """The point forecast at the budget (None before the first fit)."""
        return None if self.forecast is None else float(self.forecast.mean)

    @property
    def lower(self) -> float | None:
        return None if self.forecast is None else float(self.forecast.lower)

    @property
    def upper(self) -> float | None:
        return None if self.forecast is None else float(self.forecast.upper)

    def key(self) -> tuple:
        """What a person would call "the report changed": advice and rounded numbers."""

        def r(v):
            return None if v is None else round(float(v), 3)

        return (self.advice, self.n_points, r(self.mean), r(self.lower), r(self.upper),
                r(self.p_beat), r(self.p_target))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python record (JSON-serializable; infinities as strings): one line of the
        JSON-lines report that ``rlcurves watch`` keeps."""
        out: dict[str, Any] = {
            "time": self.created,
            "label": self.label,
            "advice": self.advice,
            "stop": self.stop,
            "reason": self.reason,
            "n_points": self.n_points,
            "compute": self.compute,
            "budget": self.budget,
            "fraction": self.fraction,
            "identified": self.is_identified,
            "level": self.level,
            "forecast": None
            if self.forecast is None
            else {"mean": self.mean, "lower": self.lower, "upper": self.upper},
            "target": self.target,
            "target_compute": None
            if self.target_compute is None
            else {
                "compute": self.target_compute.compute,
                "lower": self.target_compute.lower,
                "upper": self.target_compute.upper,
                "message": self.target_compute.message,
            },
            "p_target": self.p_target,
            "baseline": None
            if self.baseline is None
            else {
                "name": self.baseline,
                "mean": self.baseline_mean,
                "lower": self.baseline_lower,
                "upper": self.baseline_upper,
            },
            "p_beat": self.p_beat,
            "gain": self.gain,
            "peak_compute": self.peak_compute,
            "evals_since_peak": self.evals_since_peak,
            "fit": None if self.fit is None else self.fit.to_dict(),
            "notes": list(self.notes),
        }
        return _json_safe(out)

    def metrics(self, prefix: str = "forecast/") -> dict[str, float]:
        """Numeric values for a tracker (W&B, TensorBoard): ``forecast/mean`` and so on.

        Only numbers that exist are included; ``identified`` and ``stop`` are 0/1.
        """
        values = {
            "mean": self.mean,
            "lower": self.lower,
            "upper": self.upper,
            "budget": self.budget,
            "fraction": self.fraction,
            "p_beat": self.p_beat,
            "p_target": self.p_target,
            "gain": self.gain,
            "compute_to_target": None
            if self.target_compute is None
            else self.target_compute.compute,
            "A": None if self.fit is None else self.fit.A,
            "identified": float(self.is_identified),
            "stop": float(self.stop),
            "advice_code": float(ADVICE.index(self.advice)),
        }
        return {
            prefix + k: float(v) for k, v in values.items() if v is not None and math.isfinite(v)
        }

    def summary(self) -> str:
        """The report in a few lines (what ``rlcurves watch`` prints)."""
        name = f": {self.label}" if self.label else ""
        lines = [
            f"[[Monitor{name}]] {self.n_points} evaluations, C = {format_compute(self.compute)} "
            f"of budget {format_compute(self.budget)} ({self.fraction:.0%})",
            f"    advice: {self.advice.upper()}: {self.reason}",
        ]
        if self.forecast is not None:
            lines.append(
                f"    at the budget: {self.mean:.3f} [{self.lower:.3f}, {self.upper:.3f}] "
                f"({self.level:.0%}, curve)"
            )
        if self.baseline is not None and self.baseline_mean is not None:
            p = "" if self.p_beat is None else f"; p(above) = {self.p_beat:.2f}"
            lines.append(
                f"    baseline {self.baseline}: {self.baseline_mean:.3f} "
                f"[{self.baseline_lower:.3f}, {self.baseline_upper:.3f}]{p}"
            )
        if self.target_compute is not None:
            p = "" if self.p_target is None else f" (p(reached by the budget) {self.p_target:.2f})"
            lines.append(f"    target: {self.target_compute.message}{p}")
        if self.fit is not None:
            f = self.fit
            lines.append(
                f"    fit: A {f.A:.3f}, B {f.B:.3g}, C_mid {format_compute(f.C_mid)}, "
                f"R0 {f.R0:.3f}; {f.message}"
            )
        lines.extend(f"    note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        m = "" if self.mean is None else f", at budget {self.mean:.3f}"
        return f"MonitorReport({self.advice!r}, n={self.n_points}{m})"

    def plot(self, ax=None, **kwargs: Any):
        """The run so far with its forecast to the budget (see :func:`plot_monitor`)."""
        return plot_monitor(self, ax=ax, **kwargs)

    def _repr_html_(self) -> str:
        from ._html import monitor_report_html

        return monitor_report_html(self)


class Monitor:
    """A run's evaluations as they arrive, refitted and forecast at the budget after each one.

    Parameters
    ----------
    budget : float
        The planned compute of the run, in the units of the compute values passed.
    baseline : SigmoidFit, DataFrame, path, float or None
        What to beat at the budget: a fitted curve, a finished run (a frame with ``compute`` and
        ``reward``, e.g. from :func:`rlcurves.read_log`), a log path (read with ``read_log`` and
        ``read_log_kws``), or a plain number (a reward level known exactly). Same compute axis.
    target : float, optional
        A reward to reach: the report gives the compute to reach it and the probability that the
        curve is there at the budget.
    level : float
        Interval level of the forecast and of the compute to target.
    min_points : int
        Evaluations needed before any advice other than "too early to tell".
    min_fraction : float
        Fraction of the budget that must be spent before advising (a forecast from a tenth of the
        budget extrapolates far).
    p_unlikely : float
        Advise "unlikely to beat the baseline" (or "... to reach the target") when the
        probability of ending above it is at most this.
    p_on_track : float
        Say "on track" when that probability is at least this.
    min_gain : float
        "peaked" when the rest of the budget plausibly adds less than this (the interval's end
        at the budget minus the fitted value now), or when the smoothed reward has fallen more
        than this below its best over ``peak_patience`` evaluations.
    peak_patience : int
        Evaluations since the best smoothed reward before a fall counts as a peak.
    smooth : int
        Evaluations in the rolling mean used to find the peak.
    higher_is_better : bool
        False for a loss: "beat", "reach" and "gain" then mean lower values.
    n_samples : int
        Bootstrap resamples of each forecast.
    seed : int, optional
        Seed of the bootstrap (the same seed every refit, so reports differ only by the data).
    fit_kws : dict, optional
        Passed to :func:`rlcurves.fit_sigmoid` (``r0``, ``min_compute``, ``max_compute``...).
    read_log_kws : dict, optional
        Passed to :func:`rlcurves.read_log` by :meth:`update_from` and for a baseline path.
    label : str, optional
        Name of the run in reports.

    Examples
    --------
    >>> mon = Monitor(budget=1.3e6, baseline=baseline_fit)                       # doctest: +SKIP
    >>> report = mon.update(step * tokens_per_step, eval_reward)                 # doctest: +SKIP
    >>> if report.stop: ...                                                      # doctest: +SKIP
    """

    def __init__(
        self,
        budget: float,
        *,
        baseline: Any = None,
        target: float | None = None,
        level: float = 0.9,
        min_points: int = 8,
        min_fraction: float = 0.2,
        p_unlikely: float = 0.05,
        p_on_track: float = 0.8,
        min_gain: float = 0.01,
        peak_patience: int = 4,
        smooth: int = 3,
        higher_is_better: bool = True,
        n_samples: int = 500,
        seed: int | None = 0,
        fit_kws: dict[str, Any] | None = None,
        read_log_kws: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> None:
        budget = float(budget)
        if not (math.isfinite(budget) and budget > 0):
            raise RLCurvesError(f"budget must be a positive compute value, got {budget}")
        if not 0 <= p_unlikely < p_on_track <= 1:
            raise RLCurvesError(
                f"need 0 <= p_unlikely < p_on_track <= 1, got p_unlikely={p_unlikely}, "
                f"p_on_track={p_on_track}"
            )
        if not 0 < level < 1:
            raise RLCurvesError(f"level must be in (0, 1), e.g. 0.9; got {level}")
        if target is not None and not math.isfinite(float(target)):
            raise RLCurvesError(f"target must be a finite reward or None, got {target}")
        for name, value in (("min_points", min_points), ("peak_patience", peak_patience),
                            ("smooth", smooth), ("n_samples", n_samples)):  # fmt: skip
            if int(value) < 1:
                raise RLCurvesError(f"{name} must be a positive integer, got {value}")
        self.budget = budget
        self.target = None if target is None else float(target)
        self.level = float(level)
        self.min_points = int(min_points)
        self.min_fraction = float(min_fraction)
        self.p_unlikely = float(p_unlikely)
        self.p_on_track = float(p_on_track)
        self.min_gain = float(min_gain)
        self.peak_patience = int(peak_patience)
        self.smooth = int(smooth)
        self.sign = 1.0 if higher_is_better else -1.0
        self.n_samples = int(n_samples)
        self.seed = seed
        self.fit_kws = dict(fit_kws or {})
        self.read_log_kws = dict(read_log_kws or {})
        self.label = label
        self._compute: list[float] = []
        self._reward: list[float] = []
        self._notes: list[str] = []
        self.log_attrs: dict[str, Any] = {}
        self._report: MonitorReport | None = None
        self._fitted_n = -1
        self.baseline_name, self._baseline = self._resolve_baseline(baseline)

    # ---- data in ----------------------------------------------------------------------------
    @property
    def points(self) -> pd.DataFrame:
        """The evaluations seen so far, columns ``compute`` and ``reward``, in compute order."""
        df = pd.DataFrame({"compute": self._compute, "reward": self._reward}, dtype=float)
        return df.sort_values("compute", kind="stable").reset_index(drop=True)

    def update(self, compute: ArrayLike, reward: ArrayLike) -> MonitorReport:
        """Add one evaluation (or several) and return the refreshed report.

        Parameters
        ----------
        compute, reward : float or array_like
            Compute at the evaluation (same units as ``budget``) and the evaluated reward.
        """
        c = np.atleast_1d(np.asarray(compute, dtype=float))
        r = np.atleast_1d(np.asarray(reward, dtype=float))
        if c.shape != r.shape or c.ndim != 1:
            raise RLCurvesError(
                f"compute and reward must have the same length, got {c.shape} and {r.shape}"
            )
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))) or np.any(c < 0):
            raise RLCurvesError(
                "compute and reward must be finite and compute >= 0; got compute "
                f"{c.tolist()[:5]}, reward {r.tolist()[:5]}"
            )
        self._compute.extend(c.tolist())
        self._reward.extend(r.tolist())
        return self.report()

    def update_from(self, path: str | os.PathLike, **read_log_kws: Any) -> MonitorReport:
        """Re-read a log (anything :func:`rlcurves.read_log` reads) and return the report.

        The log replaces the points held: it is the record of the whole run, so a resumed run
        (compute restarting, steps written twice) is repaired as ``read_log`` repairs it. A
        half-written last line of a JSON-lines log is left out until it is complete.
        """
        from .logs import read_log

        kws = {**self.read_log_kws, **read_log_kws}
        df = read_log(path, **kws)
        self._compute = df["compute"].astype(float).tolist()
        self._reward = df["reward"].astype(float).tolist()
        self.log_attrs = dict(df.attrs)
        self._notes = _log_notes(df.attrs)
        if self.label is None:
            self.label = str(df.attrs.get("run") or Path(str(path)).name)
        return self.report()

    # ---- the report ---------------------------------------------------------------------------
    def report(self) -> MonitorReport:
        """The report for the points held (cached until new points arrive)."""
        n = len(self._compute)
        if self._report is not None and n == self._fitted_n:
            return self._report
        self._report = self._make_report()
        self._fitted_n = n
        return self._report

    def _make_report(self) -> MonitorReport:
        from .fit import fit_sigmoid
        from .forecast import forecast

        pts = self.points
        n = len(pts)
        now = float(pts["compute"].max()) if n else 0.0
        base = dict(
            n_points=n,
            compute=now,
            budget=self.budget,
            level=self.level,
            target=self.target,
            baseline=self.baseline_name,
            label=self.label,
            notes=list(self._notes),
        )
        if self._baseline is not None:
            base.update(
                baseline_mean=self._baseline["mean"],
                baseline_lower=self._baseline["lower"],
                baseline_upper=self._baseline["upper"],
            )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the report carries fit.message
                fit = fit_sigmoid(
                    pts["compute"].to_numpy(), pts["reward"].to_numpy(), label=self.label,
                    **self.fit_kws,
                )  # fmt: skip
        except RLCurvesError as exc:
            return MonitorReport(advice=TOO_EARLY, reason=f"no fit yet: {exc}", **base)
        ok, why = identified(fit)
        fc = forecast(
            fit, self.budget, level=self.level, n=self.n_samples, seed=self.seed, progress=False
        )
        draws = _draws_at_budget(fc, self.level)
        s = self.sign
        fitted_now = float(fit.predict(now))
        end = float(fc.upper) if s > 0 else float(fc.lower)
        gain = s * (end - fitted_now) if now < self.budget else 0.0
        peak_c, since, fall = self._peak(pts)
        out = MonitorReport(
            advice=TOO_EARLY,
            reason="",
            fit=fit,
            is_identified=ok,
            forecast=fc,
            gain=gain,
            peak_compute=peak_c,
            evals_since_peak=since,
            **base,
        )
        if self._baseline is not None:
            out.p_beat = _prob_greater(s * draws, s * self._baseline["draws"])
        if self.target is not None:
            out.p_target = float(np.mean(s * draws >= s * self.target))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.target_compute = fit.compute_to_reach(
                    self.target, level=self.level, n_samples=self.n_samples, seed=self.seed
                )
        out.advice, out.reason = self._advise(out, ok, why, fall)
        return out

    def _peak(self, pts: pd.DataFrame) -> tuple[float | None, int, float]:
        """Best smoothed evaluation: its compute, evaluations since, and the fall from it."""
        if len(pts) < self.smooth:
            return None, 0, 0.0
        smoothed = self.sign * pts["reward"].rolling(self.smooth).mean().to_numpy()
        i = int(np.nanargmax(smoothed))
        fall = float(smoothed[i] - smoothed[-1])
        return float(pts["compute"].iloc[i]), len(pts) - 1 - i, fall

    def _advise(self, r: MonitorReport, ok: bool, why: str, fall: float) -> tuple[str, str]:
        pct = f"{self.level:.0%}"
        if r.n_points < self.min_points:
            return TOO_EARLY, (
                f"{r.n_points} of the {self.min_points} evaluations needed (min_points)"
            )
        if r.fraction < self.min_fraction:
            return TOO_EARLY, (
                f"{r.fraction:.0%} of the budget spent, advice from {self.min_fraction:.0%} on "
                "(min_fraction)"
            )
        if not ok:
            return TOO_EARLY, f"the fit does not determine the ceiling yet ({why})"
        at = f"{r.mean:.3f} [{r.lower:.3f}, {r.upper:.3f}] ({pct}) at the budget"
        if r.p_beat is not None and r.p_beat <= self.p_unlikely:
            return UNLIKELY_BASELINE, (
                f"forecast {at} vs the baseline's {r.baseline_mean:.3f}: p(above) = "
                f"{r.p_beat:.2f} <= p_unlikely = {self.p_unlikely:g}; stop it and free the "
                "compute"
            )
        if r.baseline is None and r.p_target is not None and r.p_target <= self.p_unlikely:
            return UNLIKELY_TARGET, (
                f"forecast {at} vs the target {self.target:g}: p(reached) = {r.p_target:.2f} "
                f"<= p_unlikely = {self.p_unlikely:g}"
            )
        if r.fraction < 1 and r.gain is not None and r.gain < self.min_gain:
            return PEAKED, (
                f"the rest of the budget adds at most {r.gain:+.3f} ({pct}), less than "
                f"min_gain = {self.min_gain:g}: the run is on its plateau"
            )
        # a fall counts when it exceeds min_gain and the noise of two smoothed means (2 sd)
        noise = 2 * r.fit.noise_sd * math.sqrt(2 / self.smooth) if r.fit.dof > 0 else 0.0
        if r.evals_since_peak >= self.peak_patience and fall > max(self.min_gain, noise):
            return PEAKED, (
                f"the smoothed reward peaked at C = {format_compute(r.peak_compute)}, "
                f"{r.evals_since_peak} evaluations ago, and has fallen {fall:.3f} since "
                f"(more than min_gain = {self.min_gain:g} and twice its noise, {noise:.3f})"
            )
        p = r.p_beat if r.baseline is not None else r.p_target
        what = "the baseline" if r.baseline is not None else f"the target {self.target}"
        if p is not None and p >= self.p_on_track:
            return ON_TRACK, f"forecast {at}: p(beats {what}) = {p:.2f} >= p_on_track"
        if p is not None:
            return CONTINUE, f"forecast {at}: p(beats {what}) = {p:.2f}, not decided yet"
        return CONTINUE, f"forecast {at}; still improving"

    # ---- the baseline ---------------------------------------------------------------------------
    def _resolve_baseline(self, baseline: Any) -> tuple[str | None, dict | None]:
        from .fit import fit_sigmoid
        from .forecast import forecast
        from .result import SigmoidFit

        if baseline is None:
            return None, None
        if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
            v = float(baseline)
            if not math.isfinite(v):
                raise RLCurvesError(f"a numeric baseline must be finite, got {baseline}")
            return f"{v:g}", {"mean": v, "lower": v, "upper": v, "draws": np.array([v])}
        name = None
        if isinstance(baseline, (str, os.PathLike)):
            from .logs import read_log

            name = Path(str(baseline)).name
            baseline = read_log(baseline, **self.read_log_kws)
        if isinstance(baseline, pd.DataFrame):
            missing = {"compute", "reward"} - set(baseline.columns)
            if missing:
                raise RLCurvesError(
                    f"the baseline frame lacks column(s) {sorted(missing)}; pass a frame from "
                    "rlcurves.read_log, a SigmoidFit, a log path or a number"
                )
            attrs = baseline.attrs
            name = name or str(attrs.get("name") or attrs.get("run") or "baseline")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                baseline = fit_sigmoid("compute", "reward", data=baseline, label=name,
                                       **self.fit_kws)  # fmt: skip
        if not isinstance(baseline, SigmoidFit):
            raise RLCurvesError(
                "baseline must be a SigmoidFit, a DataFrame with compute and reward, a log path "
                f"or a number, got {type(baseline).__name__}"
            )
        name = name or baseline.label or "baseline"
        # another seed than the run's forecast: the two draws must be independent
        seed = None if self.seed is None else self.seed + 1
        fc = forecast(
            baseline, self.budget, level=self.level, n=self.n_samples, seed=seed, progress=False
        )
        return name, {
            "mean": float(fc.mean),
            "lower": float(fc.lower),
            "upper": float(fc.upper),
            "draws": _draws_at_budget(fc, self.level),
            "fit": baseline,
        }


def _draws_at_budget(fc: Forecast, level: float) -> np.ndarray:
    """Draws of the curve at the budget: the forecast's samples, or (a method without samples)
    a normal matched to its interval."""
    if fc.samples is not None:
        return np.asarray(fc.samples, dtype=float)[:, 0]
    from scipy.stats import norm

    z = norm.ppf((1 + level) / 2)
    sd = max((float(fc.upper) - float(fc.lower)) / (2 * z), 1e-12)
    return float(fc.mean) + sd * norm.ppf((np.arange(1000) + 0.5) / 1000)


def _prob_greater(x: np.ndarray, y: np.ndarray) -> float:
    from .compare import prob_greater

    return prob_greater(x, y)


_ROUTINE_CLEANING = ("drop_missing_reward", "join_compute_same_step")


def _log_notes(attrs: dict) -> list[str]:
    notes = []
    for entry in attrs.get("cleaning", []):
        # routine for logs that interleave train and eval records: not worth a note
        if not entry.get("rows") or entry.get("step") in _ROUTINE_CLEANING:
            continue
        if entry.get("step") == "skip_truncated_line":
            notes.append("the log's last line is half-written: waiting for it (left out)")
        else:
            notes.append(f"{entry['step']}: {entry['rows']} rows ({entry['detail']})")
    return notes


def _json_safe(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else str(float(v))
    return v


def plot_monitor(report: MonitorReport, ax=None, *, logx: bool = False, **kwargs: Any):
    """The run so far with its forecast band to the budget, the baseline and the advice.

    Parameters
    ----------
    report : MonitorReport
        A report with a fit (a report before the first fit draws the points only).
    ax : matplotlib Axes, optional
    logx : bool
        Log-scale compute axis.
    **kwargs
        Passed to :func:`rlcurves.plot.plot_forecast`.
    """
    import matplotlib.pyplot as plt

    from .forecast import forecast
    from .plot import PALETTE, plot_forecast

    if report.fit is None:
        fig, ax = (plt.subplots(figsize=(6.4, 4.2), layout="constrained") if ax is None
                   else (ax.figure, ax))  # fmt: skip
        ax.set_title(f"{report.label or 'run'}: {report.advice}", fontsize=10)
        ax.set_xlabel("compute")
        return fig
    fit = report.fit
    start = float(fit.fit_compute[fit.fit_compute > 0].min()) if np.any(fit.fit_compute > 0) else 0
    end = max(report.budget, float(fit.compute.max()))
    grid = np.geomspace(max(start, end * 1e-4), end, 120) if logx else np.linspace(start, end, 120)
    band = forecast(fit, grid, level=report.level, n=200, seed=0, progress=False)
    kwargs.setdefault("compute_label", "compute")
    kwargs.setdefault("reward_label", "reward")
    fig = plot_forecast(fit, band, ax, logx=logx, **kwargs)
    ax = fig.axes[0] if ax is None else ax
    ax.axvline(report.budget, color="0.2", lw=1.0, ls="--")
    ax.errorbar(
        [report.budget], [report.mean],
        yerr=[[report.mean - report.lower], [report.upper - report.mean]],
        fmt="o", color=PALETTE[0], capsize=4, zorder=5, label="forecast at the budget",
    )  # fmt: skip
    if report.baseline_mean is not None:
        ax.axhspan(report.baseline_lower, report.baseline_upper, color=PALETTE[1], alpha=0.15)
        ax.axhline(report.baseline_mean, color=PALETTE[1], lw=1.2,
                   label=f"baseline {report.baseline} at the budget")  # fmt: skip
    if report.target is not None:
        ax.axhline(report.target, color=PALETTE[2], lw=1.0, ls="-.", label="target")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"{report.label or 'run'}: {report.advice}", fontsize=10)
    return fig


def live_forecast_record(
    monitor: Monitor, compute: float, reward: float, *, prefix: str = "forecast/"
) -> dict[str, Any]:
    """One evaluation in, a flat record of ``forecast/*`` values out, for a trainer's log.

    The hook for a training loop that writes its own log (the reference trainer's
    ``log.jsonl``): build one :class:`Monitor` before the loop, call this after each evaluation
    and merge the result into the evaluation's record. Numbers as in
    :meth:`MonitorReport.metrics`, plus ``forecast/advice`` (the words) and ``forecast/reason``.

    Examples
    --------
    >>> mon = Monitor(budget=cfg.steps * tokens_per_step)                       # doctest: +SKIP
    >>> record.update(live_forecast_record(mon, tokens_total, val_pass_rate))   # doctest: +SKIP
    """
    report = monitor.update(compute, reward)
    record: dict[str, Any] = dict(report.metrics(prefix))
    record[prefix + "advice"] = report.advice
    record[prefix + "reason"] = report.reason
    return record
