"""``RaceScheduler``: a Ray Tune trial scheduler that races a sweep's trials with :class:`Race`.

Ray Tune's schedulers decide per result (``on_trial_result`` returns CONTINUE, PAUSE or STOP): this
one feeds every result to a :class:`rlcurves.race.Race` (trial id -> run, ``time_attr`` -> compute,
``metric`` -> reward), refits a trial when it crosses a rung of the budget, and stops the trials
the race stops: the ones whose forecast at the budget makes them unlikely to be the winner, with
the risk of losing it over the whole sweep at most ``alpha`` (spent stop by stop). A trial that
looks fast early but saturates low is stopped; a late bloomer is kept. A trial that errors leaves
the race; one that completes stays in it with its forecast. Trials that reach the budget are
stopped (the budget is the trials' planned length, as ASHA's ``max_t``).

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

import logging
import math
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
        self._the_race()

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if self._time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        compute, reward = result[self._time_attr], result[self._metric]
        try:
            compute, reward = float(compute), float(reward)
        except (TypeError, ValueError):
            return TrialScheduler.CONTINUE
        if not (math.isfinite(compute) and math.isfinite(reward)):
            return TrialScheduler.CONTINUE  # a NaN evaluation: skip it, as Ray's own rules do
        race = self._the_race()
        group = None if self._group_by is None else str(self._group_by(trial.config))
        race.update(trial.trial_id, compute, reward, group=group)
        self.report = race.report()
        if trial.trial_id in self.report.stop:
            logger.info("RaceScheduler: stopping %s: %s", trial, self.report.advice(trial.trial_id))
            return TrialScheduler.STOP
        if self._stop_at_budget and compute >= self.budget:
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def on_trial_error(self, tune_controller, trial) -> None:
        if self.race is not None and trial.trial_id in self.race.runs:
            self.race.fail(trial.trial_id, "the trial errored in Ray Tune")

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        if self.race is not None and trial.trial_id in self.race.runs:
            self.race.end(trial.trial_id)

    def on_trial_remove(self, tune_controller, trial) -> None:
        if self.race is not None and trial.trial_id in self.race.runs:
            self.race.end(trial.trial_id)

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
