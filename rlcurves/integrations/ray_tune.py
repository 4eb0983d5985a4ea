"""``RaceScheduler``: a Ray Tune trial scheduler that races a sweep's trials with :class:`Race`.

Ray Tune's schedulers decide per result (``on_trial_result`` returns CONTINUE, PAUSE or STOP): this
one feeds every result to a :class:`rlcurves.race.Race` (trial id -> run, ``time_attr`` -> compute,
``metric`` -> reward), refits a trial when it crosses a rung of the budget, and stops the trials
the race stops: the ones whose forecast at the budget makes them unlikely to be the winner, with
the risk of losing it over the whole sweep at most ``alpha`` (spent stop by stop). A trial that
looks fast early but saturates low is stopped; a late bloomer is kept. A trial that errors leaves
the race, and comes back to it when Ray retries it (``tune.FailureConfig(max_failures=)``); one
that completes stays in it with its forecast. Trials that reach the budget are stopped (the budget
is the trials' planned length, as ASHA's ``max_t``). A trial that reports an infinite metric (a
diverged run) is stopped and leaves the race; a NaN is a missing evaluation, skipped (with
``stale_after=``, a trial that reports only NaN for that long counts as silent). A result whose
``time_attr`` is not past the trial's largest so far (a trial resumed from a checkpoint reports
some steps again) is left out. After ``tune.Tuner.restore`` the race is rebuilt from every trial's
``result.json`` (the trials it stopped before count as ended there).

Install with ``pip install 'rlcurves[ray]'`` (Ray Tune: about 40 s and 250 MB on top of the
library, measured on the project's CPU machines).

Examples
--------
>>> from ray import tune                                                         # doctest: +SKIP
>>> from rlcurves.integrations.ray_tune import RaceScheduler
>>> sched = RaceScheduler(budget=200, time_attr="step")                          # doctest: +SKIP
>>> tuner = tune.Tuner(train, param_space={"lr": tune.grid_search([1e-5, 3e-5, 1e-4])},
...                    tune_config=tune.TuneConfig(metric="val_acc", mode="max",
...                                                scheduler=sched))            # doctest: +SKIP
>>> tuner.fit(); print(sched.report)                                              # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import RLCurvesError
from ..race import Race, RaceReport

try:
    from ray.tune.result import DEFAULT_METRIC
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler
except ImportError as exc:  # pragma: no cover - exercised only without ray
    raise ImportError(
        "rlcurves.integrations.ray_tune needs Ray Tune: pip install 'rlcurves[ray]' "
        "(or pip install 'ray[tune]')"
    ) from exc

logger = logging.getLogger(__name__)


class RaceScheduler(FIFOScheduler):
    """Stop the trials of a sweep that will not win, by their forecast at the budget.

    Parameters
    ----------
    budget : float
        The compute every trial is planned to reach, in units of ``time_attr``.
    time_attr : str
        The result key that measures compute (monotonic): ``"training_iteration"`` (default),
        a step, samples or GPU-hours you report.
    metric, mode : str, optional
        The reward and ``"max"`` or ``"min"``; default: those of ``tune.TuneConfig``.
    group_by : callable, optional
        ``config -> str`` naming the recipe of a trial (e.g. the config without its seed), so
        that the seeds of one recipe race as one entry (stopped together). Default: each trial
        races alone.
    stop_at_budget : bool
        Stop a trial once ``time_attr`` reaches ``budget``.
    **race_kws
        Passed to :class:`rlcurves.race.Race` (``alpha``, ``tolerance``, ``min_fraction``,
        ``confirm``, ``rungs``, ``calibration``...).

    Attributes
    ----------
    race : Race or None
        Built when the metric and mode are known.
    report : RaceReport or None
        The latest report.

    Raises
    ------
    RLCurvesError
        Settings :class:`~rlcurves.race.Race` refuses, a ``mode`` other than "max" or "min",
        ``higher_is_better=``; when trials are added without a metric and mode; a result that
        holds the metric but not ``time_attr``, or either as something other than a number; a
        ``group_by`` that returns None.
    """

    def __init__(
        self,
        budget: float,
        *,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        group_by: Callable[[dict], str] | None = None,
        stop_at_budget: bool = True,
        **race_kws: Any,
    ) -> None:
        super().__init__()
        if mode is not None and mode not in ("max", "min"):
            raise RLCurvesError(f"mode must be 'max' or 'min', got {mode!r}")
        if "higher_is_better" in race_kws:
            raise RLCurvesError("pass mode='max' or mode='min', not higher_is_better")
        Race(budget, **race_kws)  # validate the settings now, in their own words
        self.budget = float(budget)
        self._time_attr = time_attr
        self._metric = metric
        self._mode = mode
        self._group_by = group_by
        self._stop_at_budget = stop_at_budget
        self._race_kws = race_kws
        self.race: Race | None = None
        self.report: RaceReport | None = None
        self._last: dict[str, float] = {}  # trial id -> its largest time_attr in the race
        self._errored: set[str] = set()  # trials the race failed on on_trial_error
        self._replaying: set[str] = set()  # restored or retried trials, until they pass _last
        self._warned: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if (self._metric and metric) or (self._mode and mode):
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        return True

    def _the_race(self) -> Race:
        if self.race is None:
            if self._metric is None or self._mode not in ("max", "min"):
                raise RLCurvesError(
                    f"RaceScheduler needs metric= and mode='max' or 'min' (here or in "
                    f"tune.TuneConfig); got metric={self._metric!r}, mode={self._mode!r}"
                )
            _note_training_reward(self._metric, self._race_kws, "RaceScheduler")
            self.race = Race(self.budget, higher_is_better=self._mode == "max", **self._race_kws)
        return self.race

    def on_trial_add(self, tune_controller, trial) -> None:
        race = self._the_race()
        tid = trial.trial_id
        if tid in self._errored:  # Ray retries it (FailureConfig(max_failures=)): back in the race
            self._errored.discard(tid)
            race.revive(tid)
            self._replaying.add(tid)
        elif tid not in race.runs and trial.has_reported_at_least_once:
            self._restore_trial(trial)  # Tuner.restore: its results so far, from its folder

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        race = self._the_race()
        tid = trial.trial_id
        point = self._point(trial, result)
        if point is None:
            return TrialScheduler.CONTINUE
        compute, reward = point
        if math.isinf(reward):  # a diverged run: it leaves the race, and stops
            why = f"diverged: reported {self._metric}={reward} at {self._time_attr}={compute:g}"
            if tid in race.runs:
                race.fail(tid, why)
            self.report = race.report()
            logger.warning("RaceScheduler: stopping %s: %s", trial, why)
            return TrialScheduler.STOP
        if math.isnan(reward):
            return TrialScheduler.CONTINUE  # a missing evaluation: skip it
        self._feed(trial, compute, reward)
        self.report = race.report()
        if tid in self.report.stop:
            logger.info("RaceScheduler: stopping %s: %s", trial, self.report.advice(tid))
            return TrialScheduler.STOP
        if self._stop_at_budget and compute >= self.budget:
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def on_trial_error(self, tune_controller, trial) -> None:
        if self.race is not None and trial.trial_id in self.race.runs:
            self.race.fail(trial.trial_id, "the trial errored in Ray Tune")
            self._errored.add(trial.trial_id)

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        if self.race is not None:
            # a result a stopper ended the trial on (RunConfig(stop=...)) reached no on_trial_result
            point = self._point(trial, result or {})
            if point is not None and math.isfinite(point[1]):
                self._feed(trial, *point)
            if trial.trial_id in self.race.runs:
                self.race.end(trial.trial_id)

    def on_trial_remove(self, tune_controller, trial) -> None:
        if self.race is not None and trial.trial_id in self.race.runs:
            self.race.end(trial.trial_id)

    # ---- helpers ----------------------------------------------------------------------------
    def _point(self, trial, result: dict) -> tuple[float, float] | None:
        """``(compute, reward)`` of a result, None if it holds no evaluation (no metric, or a
        None or NaN compute); an RLCurvesError if it holds the metric but no usable compute."""
        if self._metric not in result or result[self._metric] is None:
            return None
        if self._time_attr not in result:
            keys = sorted(k for k in result if k != self._metric)
            raise RLCurvesError(
                f"RaceScheduler: trial {trial.trial_id} reported {self._metric!r} without "
                f"time_attr {self._time_attr!r} (the compute); the result holds {keys}: pass "
                "time_attr= the one that counts its compute, or report it"
            )
        compute, reward = result[self._time_attr], result[self._metric]
        try:
            compute, reward = float(compute), float(reward)
        except (TypeError, ValueError):
            raise RLCurvesError(
                f"RaceScheduler: trial {trial.trial_id} reported {self._metric}={reward!r} at "
                f"{self._time_attr}={compute!r}: both must be numbers"
            ) from None
        if math.isnan(compute):
            return None
        return compute, reward

    def _feed(self, trial, compute: float, reward: float) -> None:
        """Add one evaluation to the race, unless it replays one the race holds (a trial
        restored from a checkpoint, or restarted, reports again what it reported before)."""
        tid = trial.trial_id
        last = self._last.get(tid)
        if last is not None and compute <= last:
            if compute < last and tid not in self._replaying and tid not in self._warned:
                self._warned.add(tid)
                warnings.warn(
                    f"RaceScheduler: trial {tid} reported {self._time_attr}={compute:g} after "
                    f"{last:g}; time_attr must grow within a trial (it is the compute): the "
                    "results that do not pass its largest so far are left out of the race",
                    UserWarning,
                    stacklevel=3,
                )
            return
        self._replaying.discard(tid)
        self._the_race().update(tid, compute, reward, group=self._group(trial))
        self._last[tid] = compute

    def _group(self, trial) -> str | None:
        if self._group_by is None:
            return None
        group = self._group_by(trial.config)
        if group is None:
            raise RLCurvesError(
                f"group_by returned None for trial {trial.trial_id} (config {trial.config}); "
                "it must name the trial's recipe (a str), e.g. its config without the seed"
            )
        return str(group)

    def _restore_trial(self, trial) -> None:
        """A trial of a restored experiment (Tuner.restore): feed the race its results so far,
        read from its ``result.json``, and how it stood."""
        from ray.air.constants import EXPR_RESULT_FILE
        from ray.tune.experiment import Trial

        tid = trial.trial_id
        try:
            fs = trial.storage.storage_filesystem
            with fs.open_input_stream(f"{trial.path}/{EXPR_RESULT_FILE}") as f:
                lines = f.read().decode().splitlines()
            results = [json.loads(line) for line in lines if line.strip()]
        except Exception as exc:  # any failure to read it: say so, and race on
            warnings.warn(
                f"RaceScheduler: trial {tid} of the restored experiment has reported before, but "
                f"its results could not be read ({EXPR_RESULT_FILE} in {trial.path}: {exc}); "
                "it races on its results from now on",
                UserWarning,
                stacklevel=3,
            )
            results = []
        diverged = None
        for result in results:
            try:
                point = self._point(trial, result)
            except RLCurvesError:
                continue
            if point is None or math.isnan(point[1]):
                continue
            if math.isinf(point[1]):
                diverged = f"diverged: reported {self._metric}={point[1]} at {point[0]:g}"
                break
            self._feed(trial, *point)
        race = self._the_race()
        if tid not in race.runs:
            return
        if diverged is not None:
            race.fail(tid, diverged)
        elif trial.status == Trial.ERROR:
            race.fail(tid, "the trial errored in Ray Tune")
            self._errored.add(tid)
        elif trial.status == Trial.TERMINATED:
            race.end(tid)
        else:
            self._replaying.add(tid)  # resumed from its checkpoint: it reports some steps again

    def debug_string(self) -> str:
        if self.report is None:
            return "Using RaceScheduler (rlcurves): no report yet."
        r = self.report
        return (
            f"Using RaceScheduler (rlcurves): leader {r.leader}, stopped {len(r.stop)} trial(s), "
            f"{r.fraction_saved:.0%} of the compute saved."
        )


def _note_training_reward(metric: str, race_kws: dict, who: str) -> None:
    """A warning when the metric's name reads as a training reward and no calibration was
    given (the race's forecasts would be calibrated on validation pass rates)."""
    import warnings

    from ..calibrate import looks_like_training_reward, training_reward_note

    if race_kws.get("calibration") is None and looks_like_training_reward(metric):
        note = training_reward_note(f"metric={metric!r}", "the race's forecasts are")
        warnings.warn(f"{who}: {note}", UserWarning, stacklevel=3)


__all__ = ["RaceScheduler"]
