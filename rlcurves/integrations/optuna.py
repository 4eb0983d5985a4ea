"""``RacePruner``: an Optuna pruner that races a study's trials with :class:`Race`.

Optuna calls ``prune(study, trial)`` when a trial asks ``trial.should_prune()`` after
``trial.report(value, step)``. This pruner feeds every trial's intermediate values to a
:class:`rlcurves.race.Race` (trial number -> run, step -> compute, value -> reward) and prunes the
trials the race stops: those whose forecast at the budget makes them unlikely to be the best, the
risk of losing the best over the whole study at most ``alpha`` (spent stop by stop). Trials may run
one after another (Optuna's default: a later trial races against the finished ones' curves) or in
parallel (also with ``study.optimize(n_jobs=...)``: the pruner is thread-safe). A trial that failed
leaves the race; a completed or pruned one stays in it with its forecast. A trial whose latest
intermediate value is NaN or infinite (a diverged run) is pruned at once, as Optuna's own pruners
prune a NaN, and leaves the race as failed (its finite values are kept). Steps may come in any
order. The race is rebuilt from the study's intermediate values, so a study resumed from its
storage (``optuna.load_study(..., pruner=RacePruner(...))``) races its earlier trials too, and
one pruner used for several studies races each on its own.

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

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
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
        The race of the study pruned last (one per study, built at its first call).
    report : RaceReport or None
        The latest report.

    Raises
    ------
    RLCurvesError
        Settings :class:`~rlcurves.race.Race` refuses, ``higher_is_better=`` (the direction
        comes from the study), a multi-objective study, a ``group_by`` that returns None.
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
        self._studies: dict[tuple, _StudyRace] = {}  # one race per study
        self._lock = threading.Lock()  # study.optimize(n_jobs=...) prunes from several threads

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if len(study.directions) != 1:
            raise RLCurvesError(
                "RacePruner races one objective; the study has "
                f"{len(study.directions)} (Optuna prunes single-objective studies only)"
            )
        with self._lock:
            key = (study.study_name, study._study_id)
            state = self._studies.get(key)
            if state is None:
                up = study.direction == StudyDirection.MAXIMIZE
                race = Race(self.budget, higher_is_better=up, **self._race_kws)
                state = self._studies[key] = _StudyRace(race)
            self.race = state.race
            for t in study.get_trials(deepcopy=False):
                self._sync(state, t)
            self._sync(state, trial)
            self.report = state.race.report()
            return _diverged(trial) is not None or str(trial.number) in self.report.stop

    def _sync(self, state: _StudyRace, t: FrozenTrial) -> None:
        """Feed the race what is new about one trial: its new values, and how it ended."""
        race = state.race
        name = str(t.number)
        fed = state.fed.setdefault(t.number, set())
        new = sorted((s, v) for s, v in t.intermediate_values.items() if s not in fed)
        fed.update(s for s, _ in new)
        new = [(s, v) for s, v in new if math.isfinite(v)]  # NaN, inf: see _diverged
        if new:
            group = None if self._group_by is None else self._group(t)
            race.update(name, [s for s, _ in new], [v for _, v in new], group=group)
        if t.number in state.closed or name not in race.runs:
            return
        diverged = _diverged(t)
        if t.state == TrialState.FAIL:
            race.fail(name, "the trial failed in Optuna")
            state.closed.add(t.number)
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED) and diverged is not None:
            race.fail(name, diverged)
            state.closed.add(t.number)
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            race.end(name)
            state.closed.add(t.number)

    def _group(self, t: FrozenTrial) -> str:
        group = self._group_by(t)
        if group is None:
            raise RLCurvesError(
                f"group_by returned None for trial {t.number} (params {t.params}); it must name "
                "the trial's recipe (a str), e.g. its params without the seed"
            )
        return str(group)


@dataclass
class _StudyRace:
    """The race of one study, and what of its trials it has seen."""

    race: Race
    fed: dict[int, set[int]] = field(default_factory=dict)  # trial number -> steps fed
    closed: set[int] = field(default_factory=set)  # trials whose end the race knows


def _diverged(t: FrozenTrial) -> str | None:
    """Why a trial counts as diverged (its latest intermediate value NaN or infinite), or None."""
    if not t.intermediate_values:
        return None
    step = max(t.intermediate_values)
    value = t.intermediate_values[step]
    if math.isfinite(value):
        return None
    return f"diverged: reported {value} at step {step}"


__all__ = ["RacePruner"]
