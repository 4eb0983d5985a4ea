"""RacePruner in real Optuna studies of the toy sweep (tests/race_toys.py): trials one after
another (Optuna's default) and four trials in parallel (ask/tell, reports interleaved)."""

from __future__ import annotations

import pytest

optuna = pytest.importorskip("optuna")

from race_toys import BUDGET, RECIPES, reward  # noqa: E402

from rlcurves.errors import RLCurvesError  # noqa: E402
from rlcurves.integrations.optuna import RacePruner  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def objective(trial):
    recipe = trial.suggest_categorical("recipe", list(RECIPES))
    ys = reward(recipe, range(1, BUDGET + 1))
    for step, y in enumerate(ys, start=1):
        trial.report(float(y), step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return float(ys[-1])


def test_race_pruner_sequential_study_prunes_losers_keeps_late_bloomer():
    pruner = RacePruner(BUDGET, rungs=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    # the first trial runs alone to the end; every later one races against the finished ones
    for recipe in ("mid", "fast", "late", "loser"):
        study.enqueue_trial({"recipe": recipe})
    study.optimize(objective, n_trials=4)
    state = {t.params["recipe"]: t.state for t in study.trials}
    last = {t.params["recipe"]: t.last_step for t in study.trials}
    summary = pruner.report.summary()
    assert state["late"] == optuna.trial.TrialState.COMPLETE, summary
    assert state["loser"] == optuna.trial.TrialState.PRUNED, summary
    assert last["loser"] < BUDGET / 2, summary
    assert state["mid"] == optuna.trial.TrialState.COMPLETE  # nothing to race against: kept
    assert study.best_trial.params["recipe"] == "late"
    assert pruner.report.leader == str(next(t.number for t in study.trials
                                            if t.params["recipe"] == "late"))  # fmt: skip


def test_race_pruner_parallel_trials_interleaved():
    pruner = RacePruner(BUDGET, rungs=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    dist = {"recipe": optuna.distributions.CategoricalDistribution(list(RECIPES))}
    trials = {}
    for name in RECIPES:
        study.enqueue_trial({"recipe": name})
        trials[name] = study.ask(dist)
    ys = {name: reward(name, range(1, BUDGET + 1)) for name in RECIPES}
    live = set(RECIPES)
    for step in range(1, BUDGET + 1):
        for name in list(live):
            trials[name].report(float(ys[name][step - 1]), step)
            if trials[name].should_prune():
                study.tell(trials[name], state=optuna.trial.TrialState.PRUNED)
                live.discard(name)
    for name in live:
        study.tell(trials[name], float(ys[name][-1]))
    assert "late" in live, pruner.report.summary()
    assert "loser" not in live, pruner.report.summary()
    assert pruner.report.leader == str(trials["late"].number)


def test_race_pruner_failed_trial_leaves_the_race():
    pruner = RacePruner(BUDGET, rungs=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)

    def crashing(trial):
        for step in range(1, 15):
            trial.report(0.9, step)
            trial.should_prune()
        raise RuntimeError("diverged")

    study.optimize(crashing, n_trials=1, catch=(RuntimeError,))
    study.enqueue_trial({"recipe": "mid"})
    study.optimize(objective, n_trials=1)
    table = pruner.report.table.set_index("run")
    assert table.loc["0", "advice"] == "failed"
    assert table.loc["1", "status"] == "finished"


def test_race_pruner_settings_are_checked():
    with pytest.raises(RLCurvesError, match="direction comes from the study"):
        RacePruner(BUDGET, higher_is_better=False)
    with pytest.raises(RLCurvesError, match="tolerance"):
        RacePruner(BUDGET, tolerance=-1)
