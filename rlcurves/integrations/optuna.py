"""``RacePruner``: an Optuna pruner that races a study's trials with :class:`Race`.

Optuna calls ``prune(study, trial)`` when a trial asks ``trial.should_prune()`` after
``trial.report(value, step)``. This pruner feeds every trial's intermediate values to a
:class:`rlcurves.race.Race` (trial number -> run, step -> compute, value -> reward) and prunes the
trials the race stops: those whose forecast at the budget makes them unlikely to be the best, the
risk of losing the best over the whole study at most ``alpha`` (spent stop by stop). Trials may run
one after another (Optuna's default: a later trial races against the finished ones' curves) or in
parallel. A trial that failed leaves the race; a completed or pruned one stays in it with its
forecast.

Install with ``pip install 'rlcurves[optuna]'``.

Examples
--------
>>> import optuna                                                                # doctest: +SKIP
>>> from rlcurves.integrations.optuna import RacePruner
>>> study = optuna.create_study(direction="maximize", pruner=RacePruner(budget=200))
>>> def objective(trial):                                                        # doctest: +SKIP
...     for step, acc in train(lr=trial.suggest_float("lr", 1e-6, 1e-4, log=True)):
...         trial.report(acc, step)
...         if trial.should_prune():
...             raise optuna.TrialPruned()
...     return acc
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import RLCurvesError
from ..race import Race, RaceReport

try:
    import optuna
    from optuna.pruners import BasePruner
    from optuna.study import StudyDirection
    from optuna.trial import FrozenTrial, TrialState
except ImportError as exc:  # pragma: no cover - exercised only without optuna
    raise ImportError(
        "rlcurves.integrations.optuna needs Optuna: pip install 'rlcurves[optuna]' "
        "(or pip install optuna)"
    ) from exc


class RacePruner(BasePruner):
    """Prune the trials of a study that will not win, by their forecast at the budget.

    Parameters
    ----------
    budget : float
        The step (compute) every trial is planned to reach, in the units of the ``step`` passed
        to ``trial.report``.
    group_by : callable, optional
        ``FrozenTrial -> str`` naming the recipe of a trial (e.g. its params without the seed),
        so that the seeds of one recipe race as one entry. Default: each trial races alone.
    **race_kws
        Passed to :class:`rlcurves.race.Race` (``alpha``, ``tolerance``, ``min_fraction``,
        ``confirm``, ``rungs``, ``calibration``...). The direction comes from the study.

    Attributes
    ----------
    race : Race or None
        Built on the first call.
    report : RaceReport or None
        The latest report.
    """

    def __init__(
        self, budget: float, *, group_by: Callable[[FrozenTrial], str] | None = None,
        **race_kws: Any,
    ) -> None:  # fmt: skip
        if "higher_is_better" in race_kws:
            raise RLCurvesError("the direction comes from the study (create_study(direction=))")
        Race(budget, **race_kws)  # validate the settings now, in their own words
        self.budget = float(budget)
        self._group_by = group_by
        self._race_kws = race_kws
        self.race: Race | None = None
        self.report: RaceReport | None = None
        self._fed: dict[int, int] = {}  # trial number -> intermediate values fed
        self._closed: set[int] = set()

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if len(study.directions) != 1:
            raise RLCurvesError("RacePruner races one objective; the study has several")
        if self.race is None:
            up = study.direction == StudyDirection.MAXIMIZE
            self.race = Race(self.budget, higher_is_better=up, **self._race_kws)
        for t in study.get_trials(deepcopy=False):
            self._sync(t)
        self._sync(trial)
        self.report = self.race.report()
        return str(trial.number) in self.report.stop

    def _sync(self, t: FrozenTrial) -> None:
        """Feed the race what is new about one trial: its new values, and how it ended."""
        race = self.race
        name = str(t.number)
        values = sorted(t.intermediate_values.items())
        done = self._fed.get(t.number, 0)
        new = [(s, v) for s, v in values[done:] if v == v]  # Optuna keeps NaN reports; skip them
        if new:
            group = None if self._group_by is None else str(self._group_by(t))
            race.update(name, [s for s, _ in new], [v for _, v in new], group=group)
        self._fed[t.number] = len(values)
        if t.number in self._closed or name not in race.runs:
            return
        if t.state == TrialState.FAIL:
            race.fail(name, "the trial failed in Optuna")
            self._closed.add(t.number)
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            race.end(name)
            self._closed.add(t.number)


__all__ = ["RacePruner"]
