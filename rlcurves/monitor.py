"""The library in the loop of a running job: refit as evaluations arrive, advise in words.

:class:`Monitor` holds a run's points as they arrive (``update(compute, reward)`` or
``update_from(path)``), refits after every new evaluation and returns a :class:`MonitorReport`:
the forecast at the budget with its interval, the compute to reach a target, whether the run has
peaked and, given a baseline, the probability of ending above it at the budget, with one advice
line from :mod:`rlcurves.decide` (one of :data:`ADVICE`). With ``require_identified`` it says
stop only once the fit is identified (:func:`identified`); by default the calibrated forecast
decides from the first fit (a curve the data leave open is forecast from the corpus's shapes).
:func:`live_forecast_record` is the record a trainer of your own merges into its log.
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

from ._data import check_fit_kws, check_numbers, check_seed
from ._format import compute_label, format_compute, units_of
from .decide import (
    ADVICE,
    CONTINUE,
    ON_TRACK,
    PEAKED,
    STOP_ADVICE,
    TOO_EARLY,
    UNLIKELY_BASELINE,
    UNLIKELY_TARGET,
    Decision,
    Hysteresis,
    PeakTest,
    StopRule,
)
from .errors import RLCurvesError

if TYPE_CHECKING:
    from .calibrate import Calibration
    from .forecast import Forecast
    from .predictive import Predictive
    from .result import SigmoidFit
    from .target import ComputeTarget

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


def identification_guard(require_identified: bool | float) -> float:
    """The fraction of the budget before which only an identified fit may advise a stop, from a
    ``require_identified`` keyword (True: 1, all run long; False: 0, never; or a fraction).

    Raises
    ------
    RLCurvesError
        When it is neither a bool nor a fraction in [0, 1].
    """
    if isinstance(require_identified, bool):
        return 1.0 if require_identified else 0.0
    try:
        guard = float(require_identified)
    except (TypeError, ValueError):
        guard = math.nan
    if not 0 <= guard <= 1:
        raise RLCurvesError(
            "require_identified must be a fraction of the budget in [0, 1], before which an "
            "unidentified fit is not stopped (1 or True: always, 0 or False: never); "
            f"got {require_identified!r}"
        )
    return guard


def advises(ok: tuple[bool, str], fraction: float, guard: float) -> tuple[bool, str]:
    """Whether a fit may advise a stop at ``fraction`` of the budget under an identification
    guard that lasts until ``guard`` (:func:`identification_guard`): ``ok`` (the verdict of
    :func:`identified`) before it; from it on, and with no guard, yes."""
    if guard < 1 and fraction >= guard - 1e-12:
        return True, ""
    return ok


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
        The baseline's name and its level at the budget with its interval.
    baseline_ended : float or None
        Where the baseline's evaluations end, when that is short of the budget: its level at
        the budget is then a forecast, extrapolated ``budget / baseline_ended`` times past its
        last evaluation (the summary says so).
    p_beat : float or None
        Probability that this run ends above the baseline at the budget: from the forecast's
        predictive distribution (the draws its printed interval comes from) against the
        baseline's (a finished run's level known to its noise), independent.
    threshold : float or None
        The stop threshold on p_beat (or p_target) at this fraction of the budget (None before
        the "too early" fraction); see :class:`rlcurves.decide.StopRule`.
    pending : str or None
        A stop advice this refit gave that has not yet held on ``hold`` consecutive refits (the
        advice is then "continue").
    gain : float or None
        The most the rest of the budget plausibly adds: the forecast's interval end at the
        budget minus the fitted value now (in the direction of improvement).
    peak : PeakTest or None
        :func:`rlcurves.decide.peak_test` of the run so far.
    peak_compute : float or None
        Compute of the best (smoothed) evaluation so far.
    evals_since_peak : int
        Evaluations since then.
    notes : list of str
        What the reader cleaned, a half-written last line waited for, and similar.
    units : dict
        ``{"compute": unit, "reward": column}`` of the log read (:meth:`Monitor.update_from`),
        for the figure's axes; empty for points passed as numbers.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("recipe_loo_pipeline_rl", compute="tokens_total")
    >>> mon = rlcurves.Monitor(budget=1_325_666, baseline=0.46, n_samples=200)
    >>> report = mon.update(df["compute"], df["reward"])
    >>> report.stop, report.advice
    (True, 'unlikely to beat the baseline')
    >>> sorted(report.metrics())[:3]
    ['forecast/A', 'forecast/advice_code', 'forecast/budget']
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
    baseline_ended: float | None = None
    p_beat: float | None = None
    threshold: float | None = None
    pending: str | None = None
    gain: float | None = None
    peak: PeakTest | None = None
    peak_compute: float | None = None
    evals_since_peak: int = 0
    label: str | None = None
    notes: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    decision: Decision | None = field(default=None, repr=False)
    hold_state: tuple[int, float] = (0, math.nan)
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
                "ended": self.baseline_ended,
            },
            "p_beat": self.p_beat,
            "threshold": self.threshold,
            "pending": self.pending,
            "gain": self.gain,
            "peak_compute": self.peak_compute,
            "evals_since_peak": self.evals_since_peak,
            "peak": None
            if self.peak is None
            else {
                "peaked": self.peak.peaked,
                "drop": self.peak.drop,
                "p_value": self.peak.p_value,
                "window": self.peak.window,
                "decline": self.peak.decline,
                "delta_bic": self.peak.delta_bic,
            },
            "fit": None if self.fit is None else self.fit.to_dict(),
            "notes": list(self.notes),
            "units": dict(self.units),
            "hold_state": {"streak": self.hold_state[0], "since": self.hold_state[1]},
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
            "threshold": self.threshold,
            "gain": self.gain,
            "p_peak": None if self.peak is None else self.peak.p_value,
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
            pred = self.forecast.predictive
            what = "curve" if pred is None else pred.quantity
            lines.append(
                f"    at the budget: {self.mean:.3f} [{self.lower:.3f}, {self.upper:.3f}] "
                f"({self.level:.0%}, {what})"
            )
        if self.baseline is not None and self.baseline_mean is not None:
            p = "" if self.p_beat is None else f"; p(above) = {_p(self.p_beat)}"
            lines.append(f"    baseline {self.baseline}: {self.baseline_words()}{p}")
        if self.target_compute is not None:
            p = "" if self.p_target is None else f" (p(reached by the budget) {_p(self.p_target)})"
            lines.append(f"    target: {self.target_compute.message}{p}")
        if self.fit is not None:
            f = self.fit
            lines.append(
                f"    fit: A {f.A:.3f}, B {f.B:.3g}, C_mid {format_compute(f.C_mid)}, "
                f"R0 {f.R0:.3f}; {f.message}"
            )
        lines.extend(f"    note: {n}" for n in self.notes)
        return "\n".join(lines)

    def baseline_words(self) -> str:
        """The baseline's level at the budget as printed, saying when it is a forecast from a run
        that ended short of the budget."""
        if self.baseline_mean is None:
            return ""
        lo, hi = self.baseline_lower, self.baseline_upper
        if lo == hi == self.baseline_mean:
            return f"{self.baseline_mean:.3f} (a level given)"
        words = f"{self.baseline_mean:.3f} [{lo:.3f}, {hi:.3f}]"
        ended = self.baseline_ended
        if ended is not None and ended < self.budget:
            words += (
                f" (FORECAST: that run ended at C = {format_compute(ended)}, "
                f"{ended / self.budget:.0%} of the budget; extrapolated "
                f"{self.budget / ended:.1f}x past its last evaluation)"
                if ended > 0
                else " (FORECAST: that run has no evaluation past C = 0)"
            )
        return words

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
    baseline : SigmoidFit, DataFrame, path, Predictive, float or None
        What to beat at the budget: a finished run (a frame with ``compute`` and ``reward``, e.g.
        from :func:`rlcurves.read_log`, or a log path read with ``read_log`` and
        ``read_log_kws``), a fitted curve, draws of a level (a
        :class:`~rlcurves.predictive.Predictive`, e.g. :func:`rlcurves.decide.final_level`), or a
        plain number (a level known exactly). Same compute axis. A finished run that reached the
        budget counts at the level it had there, the mean of its evaluations over the last tenth
        of the budget, known only to its noise; one that stopped short, and a fitted curve, at the
        forecast of its curve at the budget.
    target : float, optional
        A reward to reach: the report gives the compute to reach it and the probability that the
        curve is there at the budget.
    level : float
        Interval level of the forecast and of the compute to target.
    rule : StopRule, optional
        The stop rule (thresholds, the "too early" fraction, hysteresis, peak settings); default
        :data:`rlcurves.decide.DEFAULT_RULE`, measured on finished real runs. The keywords below
        override single fields of it.
    min_points : int, optional
        Evaluations needed before any advice other than "too early to tell" (rule: 8).
    min_fraction : float, optional
        Fraction of the budget that must be spent before a stop advice (the rule's measured
        "too early" fraction by default).
    p_unlikely : float, optional
        A constant stop threshold instead of the rule's schedule: advise "unlikely to beat the
        baseline" (or "... to reach the target") when the probability of ending above it is at
        most this.
    p_on_track : float, optional
        Say "on track" when that probability is at least this (rule: 0.8).
    min_gain : float, optional
        "peaked" when the rest of the budget plausibly adds less than this (the interval's end
        at the budget minus the fitted value now; rule: 0.01). The smallest fall that counts as
        a peak is the rule's ``peak_drop`` (0.02).
    peak_patience : int, optional
        Evaluations since the best running median before a fall counts as a peak (rule: 4).
    smooth : int, optional
        Smallest running-median window of the peak test (rule: 5; the window is
        ``max(smooth, n // 10)``).
    hold : int, optional
        Consecutive refits a stop advice must hold before it is given (rule: 2, spanning at
        least ``rule.hold_span`` of the budget).
    require_identified : bool or float
        Before this fraction of the budget, advise a stop only once the fit determines the
        ceiling (:func:`identified`); True: all run long, False (default): never, the
        calibrated forecast at the budget decides from the first fit. Issue 43: in the replay of
        the real runs (``python -m benchmarks.monitor_replay``, forecasts calibrated without the
        run's family) the guard all run long stopped 62 of 123 clear losers at a median 70% of
        the budget (with the stop schedule then shipped), none 74 at 40%, and neither told a
        clear winner to stop; on simulated runs whose midpoints lie up to half the budget in,
        the code before (the guard, the former schedule) told 0 of 95 clear winners to stop,
        the defaults 3 of 96 (what the rule's 0.05 threshold allows).
    higher_is_better : bool
        False for a loss: "beat", "reach" and "gain" then mean lower values.
    n_samples : int
        Bootstrap resamples of each forecast.
    seed : int, optional
        Seed of the bootstrap (the same seed every refit, so reports differ only by the data).
    calibration : Calibration or str, optional
        What calibrates the forecast's interval (:func:`rlcurves.calibrate.calibrate` on your own
        finished runs), or the shipped one of a kind of metric: ``"validation"`` (the default) or
        ``"training reward"`` (see :func:`rlcurves.forecast`).
    fit_kws : dict, optional
        Passed to :func:`rlcurves.fit_sigmoid` (``r0``, ``min_compute``, ``max_compute``...).
    read_log_kws : dict, optional
        Passed to :func:`rlcurves.read_log` by :meth:`update_from` and for a baseline path.
    label : str, optional
        Name of the run in reports.

    Raises
    ------
    RLCurvesError
        A non-positive ``budget``, ``level`` outside (0, 1), a rule or threshold out of range
        or not a number, a ``seed`` that is not a non-negative integer or None, ``fit_kws`` that
        ``fit_sigmoid`` does not take, or a ``baseline`` it cannot read (a path, a number, draws
        or a forecast); ``update`` raises on compute and reward of different lengths or
        non-numeric values.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("recipe_loo_pipeline_rl", compute="tokens_total")
    >>> mon = rlcurves.Monitor(budget=1_325_666, baseline=0.46, n_samples=200)
    >>> report = mon.update(df["compute"][:10], df["reward"][:10])  # the first ten evaluations
    >>> report.advice
    'continue'
    >>> report = mon.update(df["compute"][10:], df["reward"][10:])  # the rest, as they arrive
    >>> report.advice in rlcurves.monitor.ADVICE
    True
    """

    def __init__(
        self,
        budget: float,
        *,
        baseline: Any = None,
        target: float | None = None,
        level: float = 0.9,
        rule: StopRule | None = None,
        min_points: int | None = None,
        min_fraction: float | None = None,
        p_unlikely: float | None = None,
        p_on_track: float | None = None,
        min_gain: float | None = None,
        peak_patience: int | None = None,
        smooth: int | None = None,
        hold: int | None = None,
        require_identified: bool | float = False,
        higher_is_better: bool = True,
        n_samples: int = 500,
        seed: int | None = 0,
        calibration: Calibration | str | None = None,
        fit_kws: dict[str, Any] | None = None,
        read_log_kws: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> None:
        from .decide import DEFAULT_RULE

        budget = _number("budget", budget)
        check_numbers(level=level, target=target, min_points=min_points,
                      min_fraction=min_fraction, p_unlikely=p_unlikely, p_on_track=p_on_track,
                      min_gain=min_gain, peak_patience=peak_patience, smooth=smooth, hold=hold,
                      n_samples=n_samples)  # fmt: skip
        check_seed(seed)  # now: a bad seed would make every refit "no fit yet"
        fit_kws = check_fit_kws(fit_kws)
        if not (math.isfinite(budget) and budget > 0):
            raise RLCurvesError(f"budget must be a positive compute value, got {budget}")
        if not 0 < level < 1:
            raise RLCurvesError(f"level= must be in (0, 1), e.g. 0.9 for 90%; got {level}")
        if target is not None and not math.isfinite(_number("target", target)):
            raise RLCurvesError(f"target= must be a finite reward (a number), got {target}")
        if min_fraction is not None and not 0 <= min_fraction <= 1:
            raise RLCurvesError(f"min_fraction must be in [0, 1], got {min_fraction}")
        if int(n_samples) < 1:
            raise RLCurvesError(f"n_samples must be a positive integer, got {n_samples}")
        rule = DEFAULT_RULE if rule is None else rule
        if not isinstance(rule, StopRule):
            raise RLCurvesError(f"rule must be a rlcurves.decide.StopRule, got {rule!r}")
        given = dict(min_points=min_points, p_on_track=p_on_track, min_gain=min_gain,
                     peak_patience=peak_patience, smooth=smooth, hold=hold,
                     min_fraction=min_fraction, p_unlikely=p_unlikely)  # fmt: skip
        given = {k: v for k, v in given.items() if v is not None}
        if p_unlikely is not None and not (0 <= p_unlikely < (p_on_track or rule.p_on_track)):
            raise RLCurvesError(
                f"need 0 <= p_unlikely < p_on_track <= 1, got p_unlikely={p_unlikely}, "
                f"p_on_track={p_on_track or rule.p_on_track}"
            )
        self.rule = rule.replace(**given) if given else rule
        self.require_identified = require_identified
        self._guard_until = identification_guard(require_identified)
        self.budget = budget
        self.target = None if target is None else float(target)
        self.level = float(level)
        self.sign = 1 if higher_is_better else -1
        self.n_samples = int(n_samples)
        self.seed = seed
        if calibration is not None:  # a kind's name, checked now (None: loaded at first use)
            from .calibrate import resolve_calibration

            calibration = resolve_calibration(calibration)
        self.calibration = calibration
        self.fit_kws = fit_kws
        self.read_log_kws = dict(read_log_kws or {})
        self.label = label
        self._compute: list[float] = []
        self._reward: list[float] = []
        self._notes: list[str] = []
        self.log_attrs: dict[str, Any] = {}
        self.units: dict[str, str] = {}  # the compute unit and reward column a log gave
        self._report: MonitorReport | None = None
        self._fitted_n = -1
        self._hysteresis = Hysteresis.for_rule(self.rule)
        self._resumed: tuple[int, int, float] | None = None
        self._fresh = True  # no refit yet: the first may warm the hysteresis up
        self.baseline_name, self._baseline = self._resolve_baseline(baseline)

    # the rule's fields, as attributes (what the keywords set)
    min_points = property(lambda self: self.rule.min_points)
    min_fraction = property(lambda self: self.rule.min_fraction)
    p_on_track = property(lambda self: self.rule.p_on_track)
    min_gain = property(lambda self: self.rule.min_gain)
    peak_patience = property(lambda self: self.rule.peak_patience)
    smooth = property(lambda self: self.rule.smooth)
    hold = property(lambda self: self.rule.hold)

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
        c = _numbers("compute", compute)
        r = _numbers("reward", reward)
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
        self.units = units_of(df, "compute", "reward")
        self._notes = _log_notes(df.attrs)
        from .calibrate import looks_like_training_reward, training_reward_note

        column = self.units.get("reward")
        if self.calibration is None and looks_like_training_reward(column):
            self._notes.append(
                training_reward_note(f"the reward column {column!r}", "the forecast is")
            )
        if self.label is None:
            self.label = str(df.attrs.get("run") or Path(str(path)).name)
        return self.report()

    def resume(self, record: dict[str, Any]) -> None:
        """Carry the stop advice's hysteresis over from a previous report of this run.

        ``record`` is a :meth:`MonitorReport.to_dict` record (the last line of the JSON-lines
        report ``rlcurves watch`` keeps): a process that refits once and exits (``watch --once``
        from a scheduler) then still needs a stop advice to hold on two consecutive refits, and
        a refit of the same evaluations as the record's does not count twice.
        """
        if not isinstance(record, dict):
            raise RLCurvesError(
                "resume needs a record from MonitorReport.to_dict (a dict with n_points and "
                f"hold_state), got {type(record).__name__}"
            )
        state = record.get("hold_state") or {}
        try:
            n = int(record["n_points"])
            streak = int(state.get("streak", 0))
            since = float(state.get("since", math.nan))
        except (AttributeError, KeyError, TypeError, ValueError):
            raise RLCurvesError(
                "resume needs a record from MonitorReport.to_dict (with n_points and hold_state)"
            ) from None
        self._resumed = (n, streak, since)

    # ---- the report ---------------------------------------------------------------------------
    def report(self) -> MonitorReport:
        """The report for the points held (cached until new points arrive).

        Each new report is one refit: its stop advice counts towards the ``hold`` consecutive
        refits a stop must hold on.
        """
        n = len(self._compute)
        if self._report is not None and n == self._fitted_n:
            return self._report
        self._report = self._make_report()
        self._fitted_n = n
        return self._report

    def _make_report(self) -> MonitorReport:
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
            units=dict(self.units),
        )
        if self._baseline is not None:
            base.update(
                baseline_mean=self._baseline["mean"],
                baseline_lower=self._baseline["lower"],
                baseline_upper=self._baseline["upper"],
                baseline_ended=self._baseline.get("ended"),
            )
        h = self._hysteresis
        first, self._fresh = self._fresh, False
        try:
            fit, ok, fc, peak, raw = self._refit(pts)
        except RLCurvesError as exc:
            h.reset()
            return MonitorReport(advice=TOO_EARLY, reason=f"no fit yet: {exc}", **base)
        if self._resumed is not None:  # the state a previous process left (see resume)
            n_then, streak, since = self._resumed
            self._resumed = None
            if n == n_then and raw.stop:  # the same refit again: the state before it
                streak -= 1
            h.streak, h.since = max(streak, 0), since if streak > 0 else math.nan
        elif first and raw.stop:
            # a first look at a run under way: refit it as it stood before, so that a one-shot
            # look (watch --once on a log) advises a stop only if it has held
            self._warm_up(pts, now)
        d = h.update(raw)
        out = MonitorReport(
            advice=d.advice,
            reason=d.reason,
            fit=fit,
            is_identified=ok[0],
            forecast=fc,
            p_beat=d.p_above,
            p_target=d.p_target,
            threshold=None if not math.isfinite(d.threshold) else d.threshold,
            pending=d.pending,
            gain=d.gain,
            peak=peak,
            peak_compute=peak.peak_compute,
            evals_since_peak=peak.evals_since_peak,
            decision=d,
            hold_state=(h.streak, h.since),
            **base,
        )
        if self.target is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.target_compute = fit.compute_to_reach(
                    self.target, level=self.level, n_samples=self.n_samples, seed=self.seed
                )
        return out

    def _refit(self, pts: pd.DataFrame):
        """Fit, forecast at the budget, peak test and the raw decision for ``pts``."""
        from .decide import decide, peak_test
        from .fit import fit_sigmoid
        from .forecast import forecast

        now = float(pts["compute"].max())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report carries fit.message
            fit = fit_sigmoid(pts["compute"].to_numpy(), pts["reward"].to_numpy(),
                              label=self.label, **self.fit_kws)  # fmt: skip
        ok = identified(fit)
        may = advises(ok, now / self.budget, self._guard_until)
        fc = forecast(fit, self.budget, level=self.level, n=self.n_samples, seed=self.seed,
                      progress=False, calibration=self.calibration)  # fmt: skip
        rule = self.rule
        peak = peak_test(fit, sign=self.sign, smooth=rule.smooth, alpha=rule.peak_alpha,
                         min_drop=rule.peak_drop, patience=rule.peak_patience,
                         seed=self.seed)  # fmt: skip
        raw = decide(
            fc,
            fraction=now / self.budget,
            n_points=len(pts),
            identified=may,
            baseline=None if self._baseline is None else self._baseline["draws"],
            baseline_label=None if self._baseline is None else self._baseline["mean"],
            target=self.target,
            fitted_now=float(fit.predict(now)),
            progress=now / fit.C_mid,
            peak=peak,
            sign=self.sign,
            rule=rule,
        )
        return fit, ok, fc, peak, raw

    def _warm_up(self, pts: pd.DataFrame, now: float) -> None:
        """Feed the hysteresis the refits of the run as it stood ``hold_span`` of the budget
        earlier (``hold - 1`` of them, evenly spaced), oldest first."""
        h, rule = self._hysteresis, self.rule
        c = pts["compute"].to_numpy()
        ends = []
        for j in range(rule.hold - 1, 0, -1):
            before = now - rule.hold_span * self.budget * j / (rule.hold - 1)
            upto = int(np.searchsorted(c, before, side="right"))
            if upto > 0 and upto not in ends:
                ends.append(upto)
        for upto in ends:
            try:
                raw = self._refit(pts.iloc[:upto])[-1]
            except RLCurvesError:
                h.reset()
                continue
            h.update(raw)

    # ---- the baseline ---------------------------------------------------------------------------
    def _resolve_baseline(self, baseline: Any) -> tuple[str | None, dict | None]:
        from .decide import final_level
        from .fit import fit_sigmoid
        from .forecast import Forecast, forecast
        from .predictive import Predictive
        from .result import SigmoidFit

        if baseline is None:
            return None, None
        if isinstance(baseline, (int, float, np.integer, np.floating)) and not isinstance(
            baseline, bool
        ):
            v = float(baseline)
            if not math.isfinite(v):
                raise RLCurvesError(
                    f"baseline= must be a finite reward level or a finished run, got {baseline}"
                )
            return f"{v:g}", {"mean": v, "lower": v, "upper": v, "draws": np.array([v])}
        if isinstance(baseline, Forecast):
            if baseline.predictive is None:
                raise RLCurvesError(
                    "the baseline forecast is unbounded (no predictive distribution); pass a "
                    "finished run, a fit or a number"
                )
            baseline = baseline.predictive
        if isinstance(baseline, Predictive):
            return baseline.quantity, self._level_of(baseline)
        name = None
        if isinstance(baseline, (str, os.PathLike)):
            from .logs import read_log

            name = Path(str(baseline)).name
            if isinstance(baseline, str) and baseline.startswith("example:"):
                name = baseline.split(":", 1)[1]
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
            c = baseline["compute"].to_numpy(float)
            r = baseline["reward"].to_numpy(float)
            if c.size and float(np.nanmax(c)) >= self.budget * (1 - 1e-9):
                # a finished run that reached the budget: its level there, known to its noise
                return name, self._level_of(final_level(c, r, at=self.budget))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                baseline = fit_sigmoid("compute", "reward", data=baseline, label=name,
                                       **self.fit_kws)  # fmt: skip
        if not isinstance(baseline, SigmoidFit):
            raise RLCurvesError(
                "baseline must be a finished run (a DataFrame with compute and reward, or a log "
                "path), a SigmoidFit, a Predictive or a number, got "
                f"{type(baseline).__name__}"
            )
        name = name or baseline.label or "baseline"
        # another seed than the run's forecast: the two draws must be independent
        seed = None if self.seed is None else self.seed + 1
        fc = forecast(baseline, self.budget, level=self.level, n=self.n_samples, seed=seed,
                      progress=False, calibration=self.calibration)  # fmt: skip
        if fc.predictive is None:
            raise RLCurvesError(
                f"the baseline {name!r} has too few evaluations for a forecast at the budget "
                f"(its interval is unbounded): {fc.note}"
            )
        ended = float(np.max(baseline.compute)) if np.size(baseline.compute) else 0.0
        level = {**self._level_of(fc.predictive), "fit": baseline}
        if ended < self.budget * (1 - 1e-9):  # its level at the budget is an extrapolation
            level["ended"] = ended
        return name, level

    def _level_of(self, pred: Predictive) -> dict:
        lo, hi = pred.interval(self.level)
        draws = pred.column(0)
        mean = float(pred.info.get("mean", np.mean(draws)))
        return {"mean": mean, "lower": float(lo[0]), "upper": float(hi[0]), "draws": draws}


def _number(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RLCurvesError(f"{name} must be a number, got {value!r}") from None


def _numbers(name: str, value: Any) -> np.ndarray:
    try:
        return np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise RLCurvesError(
            f"{name} must be numbers (a float or a list of floats), got {value!r}"
        ) from None


def _p(p: float) -> str:
    """A probability as printed: three decimals, or "< 0.001"."""
    return "< 0.001" if p < 0.0005 else f"{p:.3f}"


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
        ax.set_xlabel(compute_label(report.units.get("compute")))
        return fig
    fit = report.fit
    start = float(fit.fit_compute[fit.fit_compute > 0].min()) if np.any(fit.fit_compute > 0) else 0
    end = max(report.budget, float(fit.compute.max()))
    grid = np.geomspace(max(start, end * 1e-4), end, 120) if logx else np.linspace(start, end, 120)
    band = forecast(fit, grid, level=report.level, n=200, seed=0, progress=False, band=True)
    kwargs.setdefault("compute_label", compute_label(report.units.get("compute")))
    kwargs.setdefault("reward_label", report.units.get("reward") or "reward")
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
        ended = report.baseline_ended
        how = (
            f" (forecast from {ended / report.budget:.0%} of it)"
            if ended is not None and 0 < ended < report.budget
            else ""
        )
        ax.axhline(report.baseline_mean, color=PALETTE[1], lw=1.2,
                   label=f"baseline {report.baseline} at the budget{how}")  # fmt: skip
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


__all__ = [
    "ADVICE",
    "CONTINUE",
    "ON_TRACK",
    "PEAKED",
    "STOP_ADVICE",
    "TOO_EARLY",
    "UNLIKELY_BASELINE",
    "UNLIKELY_TARGET",
    "Monitor",
    "MonitorReport",
    "identified",
    "live_forecast_record",
    "plot_monitor",
]
