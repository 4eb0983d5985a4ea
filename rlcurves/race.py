"""Race the runs of a sweep to one budget: stop the losers early, keep the late bloomer.

:class:`Race` holds the evaluations of K runs of one sweep (``update(name, compute, reward)``),
refits each run when it crosses a rung of the budget and forecasts it there
(:func:`rlcurves.forecast`), and :meth:`Race.report` returns a :class:`RaceReport`: who to stop
now, the leader, and per run the forecast at the budget with its interval, the probability of
being the best (:func:`rlcurves.decide.prob_best`) and the advice with its reason.

A run is stopped by its forecast at the budget, not by its current value, and only if two rules
agree: the sweep-level one (:func:`rlcurves.decide.stop_set`: the probability that a run stopped
so far would have ended more than ``tolerance`` above every run kept is spent against ``alpha``,
stop by stop) and the per-run rule of the live monitor (:func:`rlcurves.decide.decide` against
the best of the others, with its guards and its hold). Seeds of one recipe race as one entry
(``group=``); a crashed run leaves the race (:meth:`Race.fail`). Why each rule is what it is, with
the measurements behind it: the design notes (``docs/design/race.md``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._data import check_fit_kws, check_numbers, check_seed
from ._format import format_compute
from .decide import (
    CONTINUE,
    DEFAULT_RULE,
    TOO_EARLY,
    Decision,
    Hysteresis,
    StopRule,
    decide,
    prob_best,
    prob_regret_above,
    stop_set,
    sweep_baselines,
)
from .errors import RLCurvesError
from .monitor import advises, identification_guard
from .predictive import Predictive

if TYPE_CHECKING:
    from .calibrate import Calibration
    from .forecast import Forecast

#: Advice of a run in a :class:`RaceReport` ("too early to tell" and "continue" as in decide).
LEADER = "leader"
STOP = "stop"
FINISHED = "finished"
ENDED = "ended"  # ended by its trainer short of the budget: its value there is a forecast
FAILED = "failed"
SILENT = "silent"
ADVICE = (TOO_EARLY, CONTINUE, LEADER, STOP, FINISHED, ENDED, FAILED, SILENT)


# ---- the race ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Run:
    name: str
    compute: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)
    failed: str | None = None
    ended: bool = False
    stopped_at: float | None = None
    latest: float = 0.0  # the largest compute so far (update keeps it)

    @property
    def now(self) -> float:
        return self.latest


@dataclass(eq=False)
class _Entry:
    """One racer: a run, or the seeds of one recipe (a group).

    Its state in three parts: what the race decided (``stopped``, ``hold``, ``decision``,
    ``reason``); what depends only on its own data, made by a refit and kept until its data cross
    a rung (``key``: ``fit``, ``forecast``, ``extra`` and its permutation ``spread``,
    ``window``, ``identified``, ``why``, ``seed``; ``frame``: its points); and what a report
    derives at the sweep's tau, kept while the tau and the forecast stay (``draws`` of
    ``draws_of``, ``used``, ``interval``, ``used_info``).
    """

    name: str
    runs: dict[str, _Run] = field(default_factory=dict)
    stopped: bool = False
    hold: Hysteresis = field(default_factory=Hysteresis)
    decision: Decision | None = None
    fresh: bool = False
    reason: str = ""
    key: tuple = ()
    fit: Any = None
    forecast: Forecast | None = None
    draws: np.ndarray | None = None
    identified: bool = False
    why: str = ""
    extra: np.ndarray | None = None
    seed: int = 0
    window: pd.DataFrame | None = None
    used_info: dict = field(default_factory=dict)  # the forecast's info the draws replace
    spread: tuple | None = None  # (extra, seed, extra permuted with the seed): a recipe's seeds
    draws_of: tuple | None = None  # (forecast, tau) the draws were made of
    used: Forecast | None = None  # the forecast as the race uses it (Race._used)
    interval: tuple[float, float] | None = None  # the draws' interval at the race's level
    frame: pd.DataFrame | None = None  # points(), while frame_key holds
    frame_key: tuple = ()
    window_columns: tuple | None = None  # (window, its columns as arrays): _columns(entry)
    frozen: np.ndarray | None = None  # a stopped entry's draws as they were when it was stopped

    @property
    def now(self) -> float:
        return max((r.now for r in self.runs.values()), default=0.0)

    @property
    def n_points(self) -> int:
        return sum(len(r.compute) for r in self.runs.values())

    @property
    def failed(self) -> bool:
        return all(r.failed is not None for r in self.runs.values())

    def points(self) -> pd.DataFrame:
        """The entry's evaluations (``compute, reward, run``), rebuilt only when they change."""
        key = tuple((n, len(r.compute), r.failed is None) for n, r in self.runs.items())
        if self.frame is None or key != self.frame_key:
            self.frame, self.frame_key = self._points(), key
        return self.frame

    def _points(self) -> pd.DataFrame:
        frames = [
            pd.DataFrame({"compute": r.compute, "reward": r.reward, "run": r.name})
            for r in self.runs.values()
            if r.failed is None or r.compute
        ]
        df = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame({"compute": [], "reward": [], "run": []})
        )
        return (
            df.astype({"compute": float, "reward": float})
            .sort_values("compute", kind="stable")
            .reset_index(drop=True)
        )


@dataclass(eq=False, repr=False)
class RaceReport:
    """Where a sweep's race stands: who to stop, who leads, each run's forecast at the budget.

    Attributes
    ----------
    stop : list of str
        The runs to stop now: every run of an entry the race has stopped (this report or an
        earlier one) that has not ended or failed; a scheduler stops them on sight.
    stopped_now : list of str
        The entries stopped by this report.
    leader : str or None
        The entry most likely to be the best at the budget (None before any forecast).
    table : pandas.DataFrame
        One row per entry (best forecast first): ``run, status, advice, compute, fraction,
        n_points, mean, lower, upper`` (the forecast at the budget and its interval at
        ``level``), ``p_best`` (probability of being the best at the budget, among the entries
        with a forecast), ``reason``.
    compute_saved : float
        Compute the stops save: for every stopped run, the budget minus its compute when stopped.
    fraction_saved : float
        ``compute_saved`` over the compute of running every run to the budget.
    risk : float
        Probability that the stopped entries include one that would have ended more than
        ``tolerance`` above every entry kept (:func:`prob_regret_above`, computed exactly over
        the draws: the kept entries' current forecasts, a stopped entry's draws as they were
        when it was stopped).
    spent : float
        The part of ``alpha`` the stops so far have spent: the sum of the increases in ``risk``
        each caused when it was made (at most ``alpha``; see the module docstring).
    budget, level, alpha, tolerance : float
        The race's settings.
    points : dict
        Entry -> its evaluations (``compute, reward, run``), for :meth:`plot`.
    fits, forecasts : dict
        Entry -> its latest fit and forecast at the budget (absent before a first fit); the
        forecast as the race used it: its interval (the table's) and its predictive draws carry
        the sweep's ``tau`` and a recipe's seed spread (``info["tau"]``, ``info["scale"]``: the
        ones used).
    stop_compute : dict
        Run -> its compute when its entry was stopped.
    tau, tau_calibration : float or None
        The misspecification scale the forecasts used (reward units), refitted on the sweep's
        own backtests (``misspecification="sweep"``; with ``"run"``, the tau of the runs that
        behave like the sweep), and the calibration's.
    atypical : dict
        With ``misspecification="run"``: entry -> its probability of misbehaving (its window
        backtests missing by more than the sweep's tau allows), its forecast then carrying a
        tau of its own (``forecasts[name].info["tau"]``); empty otherwise.
    tau_backtests : int
        How many window backtests of the sweep's runs ``tau`` was refitted on (0: none yet, a
        run needs 7 evaluations in the first half of its window, so ``tau`` is the
        calibration's).

    Examples
    --------
    >>> import numpy as np
    >>> race = rlcurves.Race(budget=200)
    >>> steps = np.arange(10, 121, 10)
    >>> race.update("a", steps, rlcurves.sigmoid(steps, 0.8, 2.0, 60, 0.1))
    >>> race.update("b", steps, rlcurves.sigmoid(steps, 0.4, 2.0, 60, 0.1))
    >>> report = race.report()
    >>> report.leader
    'a'
    >>> list(report.table.columns[:3])
    ['run', 'runs', 'status']
    """

    stop: list[str]
    stopped_now: list[str]
    leader: str | None
    table: pd.DataFrame
    compute_saved: float
    fraction_saved: float
    risk: float
    budget: float
    level: float
    alpha: float
    tolerance: float
    points: dict[str, pd.DataFrame] = field(default_factory=dict)
    fits: dict[str, Any] = field(default_factory=dict)
    forecasts: dict[str, Forecast] = field(default_factory=dict)
    stop_compute: dict[str, float] = field(default_factory=dict)
    higher_is_better: bool = True
    tau: float | None = None
    tau_calibration: float | None = None
    tau_backtests: int = 0
    spent: float = 0.0
    atypical: dict[str, float] = field(default_factory=dict)

    def advice(self, name: str) -> str:
        """The advice for one entry (or one run of a group)."""
        row = self._row(name)
        return str(row["advice"])

    def _row(self, name: str) -> pd.Series:
        t = self.table.set_index("run")
        if name in t.index:
            return t.loc[name]
        for entry, runs in self.table.set_index("run")["runs"].items():
            if name in runs:
                return t.loc[entry]
        raise RLCurvesError(f"no run {name!r} in the race; runs: {list(t.index)}")

    def summary(self) -> str:
        """The race in a few lines: the table, then who to stop and why."""
        n = len(self.table)
        stopped = int((self.table["status"] == "stopped").sum())
        lead = ""
        if self.leader is not None:
            row = self._row(self.leader)
            if row["fraction"] < 1 - 1e-9:  # its value at the budget is not seen: say so
                ended = ", where it ended" if row["advice"] == ENDED else ""
                lead = (
                    f" (its value at the budget a forecast from {row['fraction']:.0%} of it"
                    f"{ended}: {_times(self.budget, row['compute'])} past its last evaluation)"
                )
        lines = [
            f"[[Race]] {n} runs to the budget {format_compute(self.budget)}: {stopped} stopped, "
            f"{self.fraction_saved:.0%} of the sweep's compute saved; leader: {self.leader}{lead}",
            f"    alpha spent on the stops: {self.spent:.3f} of {self.alpha:g}; risk now that the "
            f"stopped runs include one that ends more than {self.tolerance:g} above all runs "
            f"kept: {self.risk:.3f}",
        ]
        if self.tau is not None and self.tau_backtests:
            lines.append(
                f"    misspecification scale tau {self.tau:.3g} refitted on {self.tau_backtests} "
                f"backtests of the sweep's own runs (calibration's {self.tau_calibration:.3g})"
            )
            odd = {k: p for k, p in self.atypical.items() if p > 0.5}
            if odd:
                taus = {
                    k: float(np.ravel(self.forecasts[k].info["tau"])[0])
                    for k in odd
                    if k in self.forecasts and "tau" in self.forecasts[k].info
                }
                own = ", ".join(f"{k} ({taus[k]:.3g})" if k in taus else k for k in odd)
                lines.append(
                    f"    runs whose backtests miss by more than that tau allows, each with its "
                    f"own: {own}"
                )
        elif self.tau is not None:
            lines.append(
                f"    misspecification scale tau {self.tau:.3g}, the calibration's: no run has "
                "enough evaluations for a backtest within its window yet (7 in its first half)"
            )
        width = max([len("run"), *(len(str(r)) for r in self.table["run"])])
        head = f"forecast at budget [{self.level:.0%}]"
        lines.append(f"    {'run':<{width}}  {'at':>5}  {head:<27}  {'p(best)':>7}  advice")
        for _, r in self.table.iterrows():
            fc = (
                "-"
                if not np.isfinite(r["mean"])
                else f"{r['mean']:.3f} [{r['lower']:.3f}, {r['upper']:.3f}]"
            )
            pb = "-" if not np.isfinite(r["p_best"]) else f"{r['p_best']:.3f}"
            lines.append(
                f"    {r['run']:<{width}}  {r['fraction']:>5.0%}  {fc:<27}  {pb:>7}  {r['advice']}"
            )
        for _, r in self.table.iterrows():
            if r["advice"] not in (LEADER, FINISHED) and not r["reason"].startswith("p(best)"):
                lines.append(f"    {r['run']}: {r['reason']}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"RaceReport({len(self.table)} runs, stop={self.stop}, leader={self.leader!r}, "
            f"saved {self.fraction_saved:.0%})"
        )

    def plot(self, ax=None, **kwargs: Any):
        """Every run with its forecast at the budget, stopped runs marked (:func:`plot_race`)."""
        return plot_race(self, ax=ax, **kwargs)


class Race:
    """K runs of one sweep racing to one budget; stop the ones that will not win.

    Parameters
    ----------
    budget : float
        The compute every run is planned to reach, in the units of the compute values passed
        (each run's own compute: a run that starts late counts from its own start).
    alpha : float
        The largest probability, over the whole sweep, that the stopped runs include one that
        would have ended more than ``tolerance`` above every run kept, spent stop by stop
        (:attr:`RaceReport.spent`; see the module docstring). The risk is computed exactly
        from the forecasts' draws (every combination of one draw per entry, no random
        pairing), a stopped entry's draws frozen when it is stopped. Nominal: it takes the
        forecasts as independent joint predictions, which the calibration does not make them. On
        300 simulated near-tie sweeps the sweep-level rule alone lost the winner in 23 (alpha
        0.05) and 79 (alpha 0.2); with the per-run rule and its hold, as Race decides, in 1 and
        2 (``python -m benchmarks.race_alpha``).
    tolerance : float
        Regret that does not count as losing the winner, in reward units (0.01: one point of
        pass rate).
    level : float
        Level of the printed intervals (the draws behind every probability are the same).
    rule : StopRule, optional
        The per-run stop rule every stop must also pass (:func:`rlcurves.decide.decide` against
        the best of the other runs kept, then :class:`rlcurves.decide.Hysteresis`); default
        :data:`rlcurves.decide.DEFAULT_RULE`, the measured one.
    min_fraction : float, optional
        Fraction of the budget a run must have spent before it may be stopped (default: the
        rule's first fraction; ``rule.replace(min_fraction=...)``).
    min_points : int, optional
        Evaluations a run needs before it may be stopped (default ``rule.min_points``).
    require_identified : bool or float
        A guard for late bloomers: before this fraction of the budget a run is stopped only once
        its fit determines its ceiling (:func:`rlcurves.monitor.identified`), and counts as a
        rival of the others only then; from there on its calibrated forecast at the budget
        decides alone, for it and against it. True: the guard all run long (only identified
        runs are stopped or set the bar); False (default): never, every run's forecast decides
        from its first fit. The default was the guard before 40% of the budget while an
        unidentified fit's forecast was its own fit's: on the MATH runs the final value lay
        above its upper 95% quantile in 5 of 29 forecasts made at 15-35% of the budget. Since
        a curve the data leave open is forecast from the corpus's shapes (issue 42), 0 of 29
        (Wilson 95% upper bound 12%), and the rule that chooses the defaults on 200 sweeps
        drawn from real runs (``python -m benchmarks.race_sweeps``, ``choose()``) picks no
        guard (docs/benchmarks/race.md).
    confirm : int, optional
        Consecutive refits of a run (one per rung) that must advise its stop before it is made
        (1: at once; default ``rule.hold``, spanning at least ``rule.hold_span`` of the budget).
    higher_is_better : bool
        False for a loss.
    n_samples : int
        Bootstrap resamples per forecast.
    seed : int
        Seed of the forecasts and of the resampling of their draws.
    calibration : Calibration or str, optional
        Passed to :func:`rlcurves.forecast`: a :class:`~rlcurves.calibrate.Calibration`, or the
        shipped one of a kind of metric, ``"validation"`` (the default) or ``"training reward"``
        (a sweep that races on its training reward: its forecasts are several times wider).
    fit_kws : dict, optional
        Passed to :func:`rlcurves.fit_sigmoid` (``r0``, ``min_compute``...).
    rungs : int or None
        A run is refit when its compute crosses one of ``rungs`` equal steps of the budget
        (each 5% by default), so that :meth:`report` is cheap to call after every evaluation;
        None refits at every new point.
    stale_after : float, optional
        Seconds without an update after which a running run counts as silent (crashed): it
        leaves the race until it reports again.
    progress : bool
        A progress bar over the refits of one report.
    misspecification : {"sweep", "run", "calibration"}
        The scale ``tau`` of the forecasts' misspecification term (how far a run may wander from
        its fitted curves past its window, :mod:`rlcurves.calibrate`). ``"sweep"``: one tau,
        refitted at every report on backtests of the sweep's own runs within their windows
        (each run fitted on the first 50% and 70% of its compute so far, scored on its level
        now: :func:`rlcurves.calibrate.window_records`), the calibration counting as
        ``tau_prior_runs`` runs among them (and a vague prior that keeps tau off zero,
        :meth:`rlcurves.calibrate.Calibration.tau_with`). The runs of one sweep share a
        task, a model and an evaluation, and tau differs between such families (0.009 on the
        GSM8K runs, 0.025 on the MATH runs): calibrated on the other family, GSM8K forecasts
        were far wider than their errors (no final value above its 90% interval) and the race
        ran its sweeps to 93% of their compute; with the sweep's tau, 64%, every winner kept,
        the intervals about nominal (``python -m benchmarks.race_sweeps``). ``"run"`` (default):
        the same, but any run may misbehave (a collapse, a late take-off: probability
        :data:`rlcurves.calibrate.ATYPICAL_SHARE`) and then has a tau of its own, so one run
        whose backtests miss far widens its own forecast, not the whole sweep's
        (:meth:`rlcurves.calibrate.Calibration.tau_by_run`; ``RaceReport.atypical``): on the
        corpus's sweeps the same winners as with one tau, the other runs' intervals 0.71 to
        1.06 times as wide (narrower where one run misbehaved; a little wider elsewhere, for
        the chance that any run has its own): ``python -m benchmarks.race_run_tau``.
        ``"calibration"``: the calibration's tau, as :func:`rlcurves.forecast` uses it.
    tau_prior_runs : float
        How many of the sweep's runs the calibration weighs as when the sweep's tau is refitted
        (default 1: a sweep of a few runs moves tau most of the way to its own; 0.5 and 2 gave
        the same winners kept and compute within 2 points on the drawn sweeps).
    error_correlation : float
        The correlation ``rho`` of two runs' forecast errors in one sweep (they share a task, a
        model, an evaluation): every comparison between runs (p(best), p(above) against the
        best of the others, the sweep's risk) takes out the part of their errors they share.
        Each run's draws are narrowed about their mean to ``sqrt(s^2 (1 - rho) + (s - s_min)^2
        rho)`` for its spread ``s``, ``s_min`` the narrowest run's: a shift of ``rho`` shared
        by all runs, at the narrowest run's scale, moves no comparison; what is left of the
        shared part is treated as independent (which overstates the differences). 0 (default):
        the runs' errors independent. On the corpus's sweeps the correlation is about 0.4 for
        the training reward and 0.15 for validation pass rates (``python -m benchmarks.
        error_correlation``). Replayed on the corpus's sweeps (``python -m benchmarks.
        race_correlated``): compute 83.3% (rho 0) to 80.7-81.8% (rho 0.2, 0.4, or the other
        families'), far-behind runs stopped by 40% of the budget 18 to 20-23 of 42, one near-tie
        winner lost by 0.014 at 0.2 and at the other families' values, none at 0.4; no winner
        lost on 100 simulated near-ties of independent runs; on 100 sweeps per family drawn
        from the GSM8K and MATH runs every winner kept at 0.2, 98 of 100 MATH ones at 0.4. The
        printed intervals stay each run's own.

    Raises
    ------
    RLCurvesError
        A non-positive ``budget``, ``alpha`` outside [0, 1), a negative ``tolerance``, ``level``
        outside (0, 1) or another setting out of range or not a number, a ``seed`` that is not a
        non-negative integer, ``fit_kws`` that ``fit_sigmoid`` does not take; ``update`` raises
        on compute and reward of different lengths or not numbers (and on ``group=`` with
        ``fit_kws`` beyond ``r0``, ``min_compute``, ``max_compute``), ``fail`` and ``end`` on a
        run the race does not hold.

    Examples
    --------
    >>> import numpy as np
    >>> race = rlcurves.Race(budget=200)
    >>> steps = np.arange(10, 201, 10)
    >>> rng = np.random.default_rng(0)
    >>> for name, ceiling in [("lr1e-5", 0.8), ("lr3e-5", 0.78), ("lr1e-4", 0.4)]:
    ...     noise = rng.normal(0, 0.01, steps.size)
    ...     reward = rlcurves.sigmoid(steps, ceiling, 2.0, 60, 0.1) + noise
    ...     race.update(name, steps[:12], reward[:12])  # 60% of the budget so far
    ...
    >>> report = race.report()  # who to stop now, and why
    >>> report.stop
    []
    >>> for row in report.table.itertuples():
    ...     print(row.run, "|", row.advice)
    ...
    lr1e-5 | leader
    lr3e-5 | continue
    lr1e-4 | continue
    """

    # The sweep-level risk: computed exactly (rlcurves.decide.RISK_METHODS), the stopped entries'
    # draws frozen when they are stopped. The issue-41 rule ("paired", not frozen) is kept for
    # the benchmarks that compare Race with that code (benchmarks/race_reference.py).
    _risk_method: str = "exact"
    _freeze_stopped: bool = True
    # A kept run sets the bar for the others once its forecast may decide for itself (identified,
    # or past the guard). True: only once its fit is identified, the rule before issue 43 (kept
    # for the benchmark that compares Race with that code, benchmarks/race_scale.py).
    _rivals_identified_only: bool = False

    def __init__(
        self,
        budget: float,
        *,
        alpha: float = 0.05,
        tolerance: float = 0.01,
        level: float = 0.9,
        rule: StopRule | None = None,
        min_fraction: float | None = None,
        min_points: int | None = None,
        confirm: int | None = None,
        require_identified: bool | float = False,
        higher_is_better: bool = True,
        n_samples: int = 300,
        seed: int = 0,
        calibration: Calibration | str | None = None,
        fit_kws: dict[str, Any] | None = None,
        rungs: int | None = 20,
        stale_after: float | None = None,
        progress: bool = False,
        misspecification: str = "run",
        tau_prior_runs: float = 1.0,
        error_correlation: float = 0.0,
    ) -> None:
        check_numbers(alpha=alpha, tolerance=tolerance, level=level,
                      min_fraction=min_fraction, min_points=min_points, confirm=confirm,
                      n_samples=n_samples, rungs=rungs, stale_after=stale_after,
                      tau_prior_runs=tau_prior_runs,
                      error_correlation=error_correlation)  # fmt: skip
        check_seed(seed, allow_none=False)  # now, not numpy's error at the first report
        fit_kws = check_fit_kws(fit_kws)
        try:
            budget = float(budget)
        except (TypeError, ValueError):
            msg = f"budget must be a positive compute value, got {budget!r}"
            raise RLCurvesError(msg) from None
        if not (math.isfinite(budget) and budget > 0):
            raise RLCurvesError(f"budget must be a positive compute value, got {budget}")
        if not 0 <= alpha < 1:
            raise RLCurvesError(f"alpha must be in [0, 1), e.g. 0.05; got {alpha}")
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise RLCurvesError(f"tolerance must be a reward difference >= 0, got {tolerance}")
        if not 0 < level < 1:
            raise RLCurvesError(f"level= must be in (0, 1), e.g. 0.9 for 90%; got {level}")
        if min_fraction is not None and not 0 <= min_fraction <= 1:
            raise RLCurvesError(f"min_fraction must be in [0, 1], got {min_fraction}")
        for name, value in (
            ("min_points", min_points),
            ("confirm", confirm),
            ("n_samples", n_samples),
        ):
            if value is not None and int(value) < 1:
                raise RLCurvesError(f"{name} must be a positive integer, got {value}")
        if rule is not None and not isinstance(rule, StopRule):
            raise RLCurvesError(f"rule must be a rlcurves.decide.StopRule, got {rule!r}")
        changes = {
            k: v
            for k, v in (("min_fraction", min_fraction), ("min_points", min_points),
                         ("hold", confirm))
            if v is not None
        }  # fmt: skip
        if confirm is not None and int(confirm) == 1:
            changes["hold_span"] = 0.0  # at once: one refit spans no budget
        self.rule = (DEFAULT_RULE if rule is None else rule).replace(**changes)
        if stale_after is not None and not stale_after > 0:
            raise RLCurvesError(
                f"stale_after must be a positive number of seconds, got {stale_after}"
            )
        self.budget = budget
        self.alpha = float(alpha)
        self.tolerance = float(tolerance)
        self.level = float(level)
        self.require_identified = require_identified
        self._guard_until = identification_guard(require_identified)
        self.sign = 1 if higher_is_better else -1
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        if calibration is not None:  # a kind's name, checked now (None: loaded at first use)
            from .calibrate import resolve_calibration

            calibration = resolve_calibration(calibration)
        self.calibration = calibration
        self.fit_kws = fit_kws
        if rungs is not None and int(rungs) < 1:
            raise RLCurvesError(f"rungs must be a positive integer or None, got {rungs}")
        self.rungs = None if rungs is None else int(rungs)
        self.stale_after = stale_after
        self.progress = progress
        if misspecification not in ("sweep", "run", "calibration"):
            raise RLCurvesError(
                "misspecification must be 'sweep' (tau refitted on the sweep's own backtests), "
                "'run' (the same, each run free to have its own) or 'calibration' (the "
                f"calibration's tau); got {misspecification!r}"
            )
        self.misspecification = misspecification
        if not (math.isfinite(tau_prior_runs) and tau_prior_runs > 0):
            raise RLCurvesError(
                "tau_prior_runs must be a positive number of runs (how much the calibration "
                f"weighs against the sweep's own backtests), got {tau_prior_runs}"
            )
        self.tau_prior_runs = float(tau_prior_runs)
        if not (math.isfinite(error_correlation) and 0 <= error_correlation < 1):
            raise RLCurvesError(
                "error_correlation must be in [0, 1) (the correlation of two runs' forecast "
                f"errors in one sweep, e.g. 0.3), got {error_correlation!r}"
            )
        self.error_correlation = float(error_correlation)
        self._entries: dict[str, _Entry] = {}
        self._spent = 0.0  # alpha spent by the stops so far (the sum of their risk increases)
        self._run_entry: dict[str, str] = {}
        self._report: RaceReport | None = None
        self._state: tuple = ()
        self._tau: tuple[float, int] | None = None  # the sweep's tau, until a window changes
        self._run_tau: dict[str, float] = {}  # misspecification="run": each entry's own tau
        self._atypical: dict[str, float] = {}  # ... and its probability of being atypical
        self._clock = time.monotonic()

    @property
    def min_fraction(self) -> float:
        """Fraction of the budget before which no run is stopped (the rule's first fraction)."""
        return self.rule.min_fraction

    @property
    def min_points(self) -> int:
        """Evaluations a run needs before it may be stopped."""
        return self.rule.min_points

    @property
    def confirm(self) -> int:
        """Consecutive refits a stop must hold on (the rule's ``hold``)."""
        return self.rule.hold

    # ---- data in ----------------------------------------------------------------------------
    @property
    def runs(self) -> list[str]:
        """Every run's name, in order of arrival."""
        return list(self._run_entry)

    def update(
        self, name: str, compute: ArrayLike, reward: ArrayLike, *, group: str | None = None
    ) -> None:
        """Add evaluations of one run.

        Parameters
        ----------
        name : str
            The run (a trial, a seed).
        compute, reward : float or array_like
            Compute at the evaluation(s) (the run's own, same units as ``budget``) and reward.
        group : str, optional
            The recipe this run is a seed of: the seeds of one recipe race as one entry (their
            pooled curve, see :func:`rlcurves.fit_runs`). Default: the run races alone.
        """
        name = str(name)
        try:
            c = np.atleast_1d(np.asarray(compute, dtype=float))
            r = np.atleast_1d(np.asarray(reward, dtype=float))
        except (TypeError, ValueError):
            raise RLCurvesError(
                f"compute and reward of run {name!r} must be numbers (a float or a list of "
                f"floats), got compute {compute!r}, reward {reward!r}"
            ) from None
        if c.shape != r.shape or c.ndim != 1:
            raise RLCurvesError(
                f"compute and reward of run {name!r} must have the same length, got {c.shape} "
                f"and {r.shape}"
            )
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))) or np.any(c < 0):
            raise RLCurvesError(
                f"compute and reward of run {name!r} must be finite and compute >= 0; got "
                f"compute {c.tolist()[:5]}, reward {r.tolist()[:5]}"
            )
        pooled_keys = ("r0", "min_compute", "max_compute")  # what rlcurves.fit_runs takes
        extra = sorted(k for k in self.fit_kws if k not in pooled_keys)
        if group is not None and extra:
            raise RLCurvesError(
                f"fit_kws= holds {extra}, which the pooled fit of a group's seeds "
                f"(rlcurves.fit_runs) does not take: keep fit_kws= to {list(pooled_keys)}, or "
                "race the runs without group=",
                unknown=extra,
            )
        run = self._run(name, group)
        run.compute.extend(c.tolist())
        run.reward.extend(r.tolist())
        if c.size:
            run.latest = max(run.latest, float(c.max()))
        run.last_seen = time.monotonic()

    def _run(self, name: str, group: str | None) -> _Run:
        entry_name = self._run_entry.get(name)
        wanted = name if group is None else str(group)
        if entry_name is not None:
            if group is not None and entry_name != wanted:
                raise RLCurvesError(
                    f"run {name!r} was added to group {entry_name!r}; it cannot move to group "
                    f"{wanted!r}"
                )
            return self._entries[entry_name].runs[name]
        if group is not None and group in self._run_entry and group != name:
            raise RLCurvesError(f"group {group!r} is already the name of a run; name it otherwise")
        if group is None and name in self._entries:
            raise RLCurvesError(f"{name!r} is already the name of a group; name the run otherwise")
        entry = self._entries.setdefault(
            wanted, _Entry(wanted, hold=Hysteresis.for_rule(self.rule))
        )
        entry.runs[name] = _Run(name)
        self._run_entry[name] = wanted
        return entry.runs[name]

    def fail(self, name: str, reason: str = "crashed") -> None:
        """Mark a run as failed (crashed, diverged): it leaves the race, its points are kept."""
        run = self._known(name)
        run.failed = str(reason) or "failed"

    def revive(self, name: str) -> None:
        """Take back :meth:`fail`: a run that reports again (a trial retried from its checkpoint)
        is back in the race with every point it had, as if it had not failed."""
        self._known(name).failed = None

    def end(self, name: str) -> None:
        """Mark a run as ended by its own trainer (it will not report again): it stays in the
        race with its forecast at the budget, and is not to be stopped."""
        self._known(name).ended = True

    def _known(self, name: str) -> _Run:
        entry = self._run_entry.get(str(name))
        if entry is None:
            raise RLCurvesError(f"no run {name!r} in the race; runs: {self.runs}")
        return self._entries[entry].runs[str(name)]

    # ---- the report -------------------------------------------------------------------------
    def report(self) -> RaceReport:
        """Refit the runs with new points and decide (cached until something changes)."""
        from tqdm.auto import tqdm

        self._clock = time.monotonic()  # one instant for the whole report (refits take time)
        state = tuple(
            (n, self._rung(r), r.failed, r.ended, self._is_silent(r))
            for e in self._entries.values()
            for n, r in e.runs.items()
        )
        if self._report is not None and state == self._state:
            return self._report
        live = [e for e in self._entries.values() if not e.failed]
        for e in self._entries.values():
            e.fresh = False
        for i, e in enumerate(tqdm(live, desc="race refits", disable=not self.progress)):
            self._refit(e, i)
        self._report = self._decide()
        self._state = state
        return self._report

    def _rung(self, run: _Run) -> int | float:
        """The refit rung a run is on: a run is refit when it crosses one."""
        if self.rungs is None:
            return len(run.compute)
        return min(math.floor(run.now / self.budget * self.rungs + 1e-9), self.rungs)

    def _is_silent(self, run: _Run) -> bool:
        return (
            self.stale_after is not None
            and run.failed is None
            and not run.ended
            and run.now < self.budget
            and self._clock - run.last_seen > self.stale_after
        )

    def _refit(self, e: _Entry, i: int) -> None:
        from .forecast import forecast
        from .monitor import identified

        key = tuple((n, self._rung(r), r.failed, r.ended) for n, r in e.runs.items())
        if key == e.key:
            return
        e.key = key
        e.fresh = True
        pts = e._points()
        pts = pts[pts["run"].isin([n for n, r in e.runs.items() if r.failed is None])]
        e.fit = e.forecast = e.draws = e.extra = e.window = None
        e.identified, e.why = False, ""
        e.seed = seed = self.seed + 7919 * (i + 1)  # one stream per entry: independent draws
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the table carries the fit's notes
                fit, extra = self._fit(e, pts, seed)
                fc = forecast(
                    fit,
                    self.budget,
                    level=self.level,
                    n=self.n_samples,
                    seed=seed,
                    progress=False,
                    calibration=self.calibration,
                )
        except RLCurvesError as exc:
            e.why = f"no fit yet: {exc}"
            return
        e.fit, e.forecast, e.extra = fit, fc, extra
        e.identified, e.why = identified(fit)
        if self.misspecification != "calibration":
            e.window = self._window(pts, seed)
        if fc.predictive is None:
            e.identified = False
            e.why = e.why or "the forecast interval is unbounded (too few points)"

    def _window(self, pts: pd.DataFrame, seed: int) -> pd.DataFrame | None:
        """Backtests of the entry's runs within their windows now (what tells this sweep's
        misspecification scale, :func:`rlcurves.calibrate.window_records`). Only the latest:
        the backtests of earlier, shorter windows (a run's steep start) overstate how a run
        wanders later (a variant that kept them across refits raced race_sweeps' GSM8K sweeps
        to 73% of their compute instead of 63%, all winners kept either way; measured before
        tau_with had its prior)."""
        from .calibrate import window_records

        frames = [
            window_records(
                g["compute"].to_numpy(float),
                g["reward"].to_numpy(float),
                str(run),
                seed=seed,
                fit_kwargs=self.fit_kws,
            )
            for run, g in pts.groupby("run", sort=True)
            if len(g) >= self.rule.min_points
        ]
        frames = [f for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else None

    def _draws(self, e: _Entry, tau: float | None) -> np.ndarray:
        """The entry's predictive draws at the budget, their misspecification scale ``tau``
        (None: the calibration's, as forecast): ``V = base + tau^2 g(d)`` replaces the forecast's
        variance, the standardized draws kept (a draw clipped at the metric's range stays at
        its clipped value's standardized distance), plus a recipe's seed-to-seed spread."""
        fc = e.forecast
        d = fc.predictive.column(0)
        info = fc.info
        e.used_info = {}
        if tau is not None and "scale" in info and "tau" in info:
            scale = float(np.ravel(info["scale"])[0])
            g = max(float(np.ravel(info.get("growth", info["distance"]))[0]), 0.0)
            base = max(scale**2 - info["tau"] ** 2 * g, 1e-16)
            mean = float(fc.mean)
            used = math.sqrt(base + tau**2 * g)
            d = np.clip(mean + (d - mean) * used / scale, *_range(e.fit))
            e.used_info = {
                "tau": np.full(np.shape(info["tau"]), tau),
                "scale": np.full(np.shape(info["scale"]), used),
            }
        if e.extra is not None:  # seed-to-seed spread of a recipe, on top of the forecast's own
            made = e.spread
            stale = made is None or made[0] is not e.extra
            if stale or (made[1], made[2].size) != (e.seed, d.size):
                rng = np.random.default_rng(e.seed)
                made = e.spread = (e.extra, e.seed, rng.permutation(np.resize(e.extra, d.size)))
            d = np.clip(d + made[2], *_range(e.fit))
        return d

    def _used(self, e: _Entry) -> Forecast:
        """The entry's forecast as the race uses it: its predictive draws and its interval are
        the draws' (the sweep's tau, a recipe's seed spread; the table's interval), not the
        forecast's as made with the calibration's tau; ``info["tau"]`` and ``info["scale"]``
        are the ones used."""
        fc = e.forecast
        if e.draws is None or fc is None or fc.predictive is None:
            return fc
        pred = fc.predictive
        lower, upper = e.interval
        return replace(
            fc,
            lower=np.full(np.shape(fc.lower), lower) if np.ndim(fc.lower) else lower,
            upper=np.full(np.shape(fc.upper), upper) if np.ndim(fc.upper) else upper,
            info={**fc.info, **e.used_info},
            predictive=Predictive(pred.at, e.draws[:, None], pred.quantity, pred.info),
        )

    def _sweep_tau(self) -> tuple[float | None, int]:
        """The misspecification scale of this sweep: tau refitted on the backtests of its runs
        within their windows, the calibration counting as ``tau_prior_runs`` runs (None: the
        calibration's tau, with ``misspecification="calibration"``), and how many backtests
        it was refitted on (none yet: the calibration's tau)."""
        if self.misspecification == "calibration":
            return None, 0
        if self._tau is None or any(e.fresh for e in self._entries.values()):
            windowed = [e for e in self._entries.values() if e.window is not None]
            if self.misspecification == "run":
                records = _concat([
                    {**_columns(e), "entry": np.full(len(e.window), e.name, dtype=object)}
                    for e in windowed
                ])  # fmt: skip
                tau, self._run_tau, self._atypical = self._calibration().tau_by_run(
                    records, prior_runs=self.tau_prior_runs, by="entry"
                )
            else:
                records = _concat([_columns(e) for e in windowed])
                tau = self._calibration().tau_with(records, prior_runs=self.tau_prior_runs)
            self._tau = (tau, 0 if records is None else len(records))
        return self._tau

    def _calibration(self) -> Calibration:
        from .calibrate import resolve_calibration

        return resolve_calibration(self.calibration)

    def _fit(self, e: _Entry, pts: pd.DataFrame, seed: int):
        """The entry's curve: one run's fit, or the pooled fit of its seeds plus their spread."""
        from .fit import fit_sigmoid
        from .model import sigmoid
        from .runs import fit_runs

        counts = pts.groupby("run")["compute"].size()
        seeds = [str(n) for n, k in counts.items() if k >= self.rule.min_points]
        if len(seeds) < 2:
            fit = fit_sigmoid(
                pts["compute"].to_numpy(), pts["reward"].to_numpy(), label=e.name, **self.fit_kws
            )
            return fit, None
        rf = fit_runs(
            pts[pts["run"].isin(seeds)],
            n_boot=self.n_samples,
            seed=seed,
            label=e.name,
            per_run=False,
            **self.fit_kws,
        )
        s = rf.samples
        curves = sigmoid(self.budget, s["A"], s["B"], s["C_mid"], s["R0"])
        curves = np.asarray(curves, dtype=float)
        return rf.pooled, curves - curves.mean()

    def _decide(self) -> RaceReport:
        entries = list(self._entries.values())
        status = {e.name: self._status(e) for e in entries}
        tau, n_backtests = self._sweep_tau()
        for e in entries:  # derived here, at the sweep's tau of this report, for every entry
            if e.forecast is not None and e.forecast.predictive is not None:
                made = e.draws_of
                t = tau if tau is None else self._run_tau.get(e.name, tau)
                if e.draws is None or made is None or made[0] is not e.forecast or made[1] != t:
                    e.draws, e.draws_of = self._draws(e, t), (e.forecast, t)
                    e.interval = _interval(e.draws, self.level)
                    e.used = self._used(e)
            else:
                e.used, e.interval = e.forecast, None
        with_draws = {
            e.name: e.draws
            for e in entries
            if e.draws is not None and status[e.name] not in (FAILED, SILENT)
        }
        # the spread of the narrowest run: the scale of the error the runs share (error_correlation)
        low = (
            min((float(np.std(d)) for d in with_draws.values()), default=0.0)
            if self.error_correlation > 0
            else 0.0
        )
        compared = self._shared_out(with_draws, low)
        p_best = prob_best(compared, sign=self.sign, seed=self.seed) if with_draws else {}
        racing = [k for k in p_best if status[k] != "stopped"] or list(p_best)
        leader = (
            max(racing, key=lambda k: (p_best[k], self.sign * float(np.mean(with_draws[k]))))
            if racing
            else None
        )
        # the rivals a run must beat: the entries kept whose forecast may decide (_trusted: an
        # identified fit, or a run past the guard, whose calibrated forecast then decides alone
        # for it and against it), all of them with the guard off
        stopped = [k for k in with_draws if status[k] == "stopped"]
        kept = {
            k: d
            for k, d in compared.items()
            if status[k] != "stopped" and self._rival(self._entries[k])
        }
        # the per-run rule (decide() against the best of the other runs kept, plus tolerance;
        # an unidentified run may be stopped only past the guard, see _trusted)
        baselines = sweep_baselines(
            kept,
            [
                k
                for k in with_draws
                if status[k] == "running" and k != leader and len(kept) > (k in kept)
            ],
            tolerance=self.tolerance,
            sign=self.sign,
            seed=self.seed,
        )
        raw = {
            e.name: self._advise(e, status[e.name], leader, baselines, compared.get(e.name))
            for e in entries
        }
        advised = [k for k, d in raw.items() if d is not None and d.stop and k in with_draws]
        # who counts in the risk: the stopped entries (their draws when they were stopped: alpha
        # was spent on them then, at that tau), the rivals kept and the runs advised to stop
        counted = self._shared_out(
            {
                k: self._frozen(k, d)
                for k, d in with_draws.items()
                if k in {*stopped, *kept, *advised}
            },
            low,
        )
        candidates = sorted(
            advised, key=lambda k: (p_best.get(k, 0.0), self.sign * float(np.mean(counted[k])))
        )
        # the sweep-level rule: each stop is charged the increase in risk it causes, and the
        # charges stay <= alpha (alpha spending)
        proposal: list[str] = []
        if candidates:
            proposal, _ = stop_set(
                counted,
                candidates,
                alpha=self.alpha,
                tolerance=self.tolerance,
                stopped=stopped,
                sign=self.sign,
                seed=self.seed,
                spent=self._spent,
                method=self._risk_method,
            )
        stopped_now: list[str] = []
        for e in entries:
            d = raw[e.name]
            if d is None or not d.stop or e.name not in proposal:
                e.hold.reset()  # a stop must hold on consecutive refits: this one does not
                if d is not None and d.stop:  # advised alone, refused for the sweep's risk
                    d = replace(d, advice=CONTINUE, reason=self._refused(e, d, p_best))
                e.decision = d
                continue
            if e.fresh:  # hysteresis counts refits: no new fit, no new vote
                e.decision = e.hold.update(d)
            if e.decision is not None and e.decision.stop:
                stopped_now.append(e.name)
        risk = 0.0
        if counted:
            for k in stopped_now:
                e = self._entries[k]
                e.stopped = True
                e.frozen = e.draws
                status[k] = "stopped"
                for r in e.runs.values():
                    r.stopped_at = r.now
            kws = {
                "tolerance": self.tolerance,
                "sign": self.sign,
                "seed": self.seed,
                "method": self._risk_method,
            }
            risk = prob_regret_above(counted, [k for k in counted if status[k] == "stopped"], **kws)
            if stopped_now:  # the charge: the increase over the risk of the runs stopped before
                risk_before = prob_regret_above(counted, stopped, **kws)
                self._spent += max(risk - risk_before, 0.0)
            for k in stopped_now:
                e = self._entries[k]
                e.reason = (
                    f"stopped at {e.now / self.budget:.0%} of the budget: p(best) = "
                    f"{p_best.get(k, 0.0):.3f}; {e.decision.reason}; the stops of this report "
                    f"raise p(a run stopped would end more than {self.tolerance:g} above every "
                    f"run kept) from {risk_before:.3f} to {risk:.3f}: alpha spent "
                    f"{self._spent:.3f} of {self.alpha:g}; the leader {leader}'s "
                    f"forecast {_fc_words(self._entries[leader])}"
                )
        rows = [self._row(e, status[e.name], p_best, leader) for e in entries]
        table = pd.DataFrame(
            rows,
            columns=[
                "run",
                "runs",
                "status",
                "advice",
                "compute",
                "fraction",
                "n_points",
                "mean",
                "lower",
                "upper",
                "p_best",
                "reason",
            ],
        )
        order = np.argsort(
            -self.sign * table["mean"].fillna(-self.sign * np.inf).to_numpy(), kind="stable"
        )
        table = table.iloc[order].reset_index(drop=True)
        stop_runs = [
            n
            for e in entries
            if e.stopped
            for n, r in e.runs.items()
            if r.failed is None and not r.ended and r.now < self.budget
        ]
        stop_compute = {
            n: r.stopped_at
            for e in entries
            if e.stopped
            for n, r in e.runs.items()
            if r.stopped_at is not None
        }
        saved = float(sum(max(self.budget - c, 0.0) for c in stop_compute.values()))
        n_runs = sum(len(e.runs) for e in entries)
        return RaceReport(
            stop=stop_runs,
            stopped_now=stopped_now,
            leader=leader,
            table=table,
            compute_saved=saved,
            fraction_saved=saved / (n_runs * self.budget) if n_runs else 0.0,
            risk=risk,
            budget=self.budget,
            level=self.level,
            alpha=self.alpha,
            tolerance=self.tolerance,
            points={e.name: e.points() for e in entries},
            fits={e.name: e.fit for e in entries if e.fit is not None},
            forecasts={e.name: e.used for e in entries if e.forecast is not None},
            stop_compute=stop_compute,
            higher_is_better=self.sign > 0,
            tau=tau,
            tau_calibration=self._calibration().tau,
            tau_backtests=n_backtests,
            spent=self._spent,
            atypical=dict(self._atypical) if self.misspecification == "run" else {},
        )

    def _shared_out(self, draws: dict[str, np.ndarray], low: float) -> dict[str, np.ndarray]:
        """The draws every comparison between runs reads: with ``error_correlation`` rho, each
        entry's draws narrowed about their mean to ``sqrt(s^2 (1 - rho) + (s - low)^2 rho)``
        (``s`` their sd, ``low`` the narrowest entry's): the error the runs share, at the
        narrowest's scale, moves no comparison (see the class docstring); as they are with
        rho 0."""
        rho = self.error_correlation
        if rho <= 0 or len(draws) < 2:
            return draws
        out = {}
        for k, d in draws.items():
            sd = float(np.std(d))
            if not sd > 0:
                out[k] = d
                continue
            keep = math.sqrt(sd * sd * (1 - rho) + (sd - min(low, sd)) ** 2 * rho) / sd
            center = float(np.mean(d))
            out[k] = center + keep * (d - center)
        return out

    def _frozen(self, name: str, draws: np.ndarray) -> np.ndarray:
        """The draws of entry ``name`` the sweep's risk counts: a stopped entry's as they were
        when it was stopped (alpha was charged for it then; refitting the sweep's tau later does
        not move them), anyone else's as now."""
        e = self._entries[name]
        if self._freeze_stopped and e.stopped and e.frozen is not None:
            return e.frozen
        return draws

    def _status(self, e: _Entry) -> str:
        if e.failed:
            return FAILED
        if e.stopped:
            return "stopped"
        live = [r for r in e.runs.values() if r.failed is None]
        if all(r.ended or r.now >= self.budget for r in live):
            return FINISHED
        if all(self._is_silent(r) or r.ended or r.now >= self.budget for r in live):
            return SILENT
        return "running"

    def _advise(
        self,
        e: _Entry,
        status: str,
        leader: str | None,
        baselines: dict[str, np.ndarray],
        compare: np.ndarray | None = None,
    ) -> Decision | None:
        """The per-run rule's raw advice for a running entry (None: not running, or the leader):
        :func:`rlcurves.decide.decide` on its forecast at the budget against the best of the
        other runs kept plus ``tolerance`` (``baselines``, :func:`rlcurves.decide.
        sweep_baselines`), its guards (evaluations, fraction of the budget, an identified fit)
        and its measured threshold on p(above)."""
        if status != "running" or e.name == leader:
            return None
        live = [r for r in e.runs.values() if r.failed is None and not r.ended]
        n = min(len(r.compute) for r in live)
        fraction = e.now / self.budget
        last = 1 - 1 / (self.rungs or 20)
        if fraction > last + 1e-12:  # a stop this late saves less than one rung's compute
            return Decision(
                CONTINUE,
                f"{fraction:.0%} of the budget spent: a stop now saves less than "
                f"{1 - last:.0%} of it, so the run finishes",
                fraction=fraction,
            )
        if e.forecast is None:  # no fit: decide() has nothing to judge
            return Decision(TOO_EARLY, e.why or "no forecast yet", fraction=fraction)
        baseline = baselines.get(e.name)
        ok = True if self._trusted(e) else (e.identified, e.why)
        fc = e.used
        now = float(e.now)
        d = decide(
            fc,
            fraction=fraction,
            n_points=n,
            identified=ok,
            baseline=baseline,
            baseline_label=None if baseline is None else float(np.mean(baseline)),
            fitted_now=float(e.fit.predict(now)),
            progress=now / float(e.fit.C_mid),
            sign=self.sign,
            rule=self.rule,
            compare=compare,
        )
        if self.error_correlation > 0 and d.p_above is not None:
            d = replace(d, reason=(
                f"{d.reason} (p(beats the baseline) with the error the sweep's runs share taken "
                f"out: error_correlation {self.error_correlation:g})"
            ))  # fmt: skip
        if baseline is None and d.advice != TOO_EARLY:
            return replace(d, advice=CONTINUE, reason="the only run kept: nothing to compare with")
        return d

    def _trusted(self, e: _Entry) -> bool:
        """Whether the entry's forecast may decide (identified fit, or past the guard)."""
        return advises((e.identified, e.why), e.now / self.budget, self._guard_until)[0]

    def _rival(self, e: _Entry) -> bool:
        """Whether a kept entry sets the bar for the others (in their baselines and the risk)."""
        if self._rivals_identified_only:
            return e.identified or self._guard_until == 0
        return self._trusted(e)

    def _refused(self, e: _Entry, d: Decision, p_best: dict) -> str:
        return (
            f"p(best) = {p_best.get(e.name, 0.0):.3f}: '{d.advice}' for the run alone "
            f"({d.reason}), but stopping it would raise the risk of losing the winner by more "
            f"than {self.tolerance:g} by more than the alpha left ({self._spent:.3f} of "
            f"{self.alpha:g} spent)"
        )

    def _row(self, e: _Entry, status: str, p_best: dict, leader: str | None) -> dict:
        fc = e.forecast
        mean = lower = upper = math.nan
        if fc is not None and not fc.unbounded:
            mean, lower, upper = float(fc.mean), float(fc.lower), float(fc.upper)
        if e.draws is not None:  # the sweep's tau, a recipe's seed spread: the draws carry them
            lower, upper = e.interval
        pb = p_best.get(e.name, math.nan)
        if status == FAILED:
            reasons = sorted({r.failed for r in e.runs.values() if r.failed})
            advice, reason = FAILED, f"failed: {'; '.join(reasons)}"
        elif status == SILENT:
            advice, reason = (
                SILENT,
                (
                    f"no report for more than {self.stale_after:g} s "
                    "(stale_after): out of the race until it reports again"
                ),
            )
        elif status == "stopped":
            advice, reason = STOP, e.reason
        elif status == FINISHED and e.now < self.budget * (1 - 1e-9):
            at = f"{e.now / self.budget:.0%} of the budget (C = {format_compute(e.now)})"
            reason = (
                f"ended at {at}: its value at the budget is a forecast, extrapolated "
                f"{_times(self.budget, e.now)} past its last evaluation: "
                f"{_fc_words(e)}"
            )
            advice = ENDED
        elif status == FINISHED:
            advice, reason = FINISHED, f"reached the budget; forecast {_fc_words(e)}"
        elif e.name == leader:
            words = _fc_words(e)
            advice, reason = LEADER, f"most likely the best at the budget: {words}"
        elif e.decision is not None and e.decision.advice == TOO_EARLY:
            advice, reason = TOO_EARLY, e.decision.reason
        elif e.decision is not None:
            # the rule's own words (a stop pending under the hysteresis, or why not yet)
            advice, reason = CONTINUE, f"p(best) = {pb:.3f}; {e.decision.reason}"
        else:
            advice, reason = CONTINUE, f"p(best) = {pb:.3f}"
        return {
            "run": e.name,
            "runs": list(e.runs),
            "status": status,
            "advice": advice,
            "compute": e.now,
            "fraction": e.now / self.budget,
            "n_points": e.n_points,
            "mean": mean,
            "lower": lower,
            "upper": upper,
            "p_best": pb,
            "reason": reason,
        }


def _times(budget: float, now: float) -> str:
    """How far past a run's last evaluation the budget lies, as a factor ("4.9x")."""
    return f"{budget / now:.1f}x" if now > 0 else "from no compute"


def _range(fit) -> tuple[float, float]:
    from .bootstrap import metric_range

    return metric_range(fit)


def _columns(e: _Entry) -> dict[str, np.ndarray]:
    """The entry's window records as arrays, column by column (made once per window)."""
    made = e.window_columns
    if made is None or made[0] is not e.window:
        made = e.window_columns = (e.window, {c: e.window[c].to_numpy() for c in e.window})
    return made[1]


def _concat(frames: list[dict[str, np.ndarray]]) -> pd.DataFrame | None:
    """Records (column -> array) one under the other, as ``pd.concat`` of their frames with
    ``ignore_index=True`` gives them (a thousand in milliseconds); None for none."""
    if not frames:
        return None
    return pd.DataFrame({c: np.concatenate([f[c] for f in frames]) for c in frames[0]})


def _interval(draws: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _fc_words(e: _Entry) -> str:
    fc = e.forecast
    if fc is None or fc.unbounded:
        return "(no forecast)"
    lo, hi = (float(fc.lower), float(fc.upper)) if e.draws is None else e.interval
    return f"{float(fc.mean):.3f} [{lo:.3f}, {hi:.3f}]"


def plot_race(
    report: RaceReport,
    ax=None,
    *,
    n_curve: int = 100,
    compute_label: str = "compute",
    reward_label: str = "reward",
):
    """Every run's evaluations, its fitted curve to the budget and its forecast interval there.

    Stopped runs are drawn faint from the compute where they were stopped, with a cross; the
    leader's forecast is drawn bold.

    Parameters
    ----------
    report : RaceReport
    ax : matplotlib Axes, optional
    n_curve : int
        Points of each fitted curve.
    compute_label, reward_label : str
        Axis labels.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .plot import _axes, style

    fig, ax = _axes(ax, figsize=(7.6, 4.6))
    t = report.table.set_index("run")
    names = list(report.points)
    k = max(len(names), 1)
    for i, name in enumerate(names):
        color, marker = style(i)
        row = t.loc[name]
        pts = report.points[name]
        stopped = row["status"] == "stopped"
        dense = len(pts) > 80 * max(len(row["runs"]), 1)
        label = f"{name}: {row['advice']}"
        if name == report.leader and row["advice"] != LEADER:
            label += " (leader)"
        if stopped:
            at = min(report.stop_compute.get(r, math.inf) for r in row["runs"])
            label = f"{name}: stopped at {at / report.budget:.0%}"
        elif row["advice"] == ENDED:
            label = f"{name}: ended at {row['fraction']:.0%} (forecast to the budget)"
            if name == report.leader:
                label += " (leader)"
        for j, (_, g) in enumerate(pts.groupby("run", sort=False)):
            kw = dict(color=color, alpha=0.45 if stopped else 0.8, label=label if j == 0 else None)
            if dense:
                ax.plot(g["compute"], g["reward"], lw=0.8, **kw)
            else:
                ax.plot(g["compute"], g["reward"], marker=marker, ms=3, lw=0.6, **kw)
        fit = report.fits.get(name)
        if fit is not None:
            c0 = float(pts["compute"].max()) if len(pts) else 0.0
            grid = np.linspace(max(c0, 1e-12), report.budget, n_curve)
            ax.plot(
                grid,
                fit.predict(grid),
                color=color,
                ls="--",
                lw=1.0,
                alpha=0.45 if stopped else 0.9,
            )
        if stopped:
            at = min(report.stop_compute.get(r, math.inf) for r in row["runs"])
            y = float(pts.loc[pts["compute"] <= at, "reward"].iloc[-1]) if len(pts) else math.nan
            ax.plot([at], [y], marker="X", ms=9, color=color, mec="black", zorder=6)
        if np.isfinite(row["mean"]):
            x = report.budget * (1 + 0.012 * (i - (k - 1) / 2) / k * 2)
            ax.errorbar(
                [x],
                [row["mean"]],
                yerr=[[row["mean"] - row["lower"]], [row["upper"] - row["mean"]]],
                fmt="o",
                color=color,
                capsize=3,
                ms=4,
                lw=2.2 if name == report.leader else 1.0,
                alpha=0.45 if stopped else 1.0,
                zorder=5,
            )
    ax.axvline(report.budget, color="0.3", lw=0.8, ls=":")
    ax.set_xlabel(compute_label)
    ax.set_ylabel(reward_label)
    ax.set_title(
        f"Race to {format_compute(report.budget)}: leader {report.leader}; "
        f"{report.fraction_saved:.0%} of the compute saved",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="best")
    return fig


__all__ = ["ADVICE", "ENDED", "Race", "RaceReport", "plot_race"]
