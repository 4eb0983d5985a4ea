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


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_regression_a_diverged_trial_is_pruned_and_the_study_goes_on(bad):
    """A NaN or infinite intermediate value (a diverged run) prunes its trial at once, as
    Optuna's own pruners prune a NaN, and the trial leaves the race as failed. Before, a NaN was
    skipped (the diverged trial ran to the end) and an inf raised in every later trial's
    should_prune (every trial after it failed)."""
    pruner = RacePruner(BUDGET, rungs=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)

    def diverging(trial):
        for step in range(1, BUDGET + 1):
            trial.report(0.3 if step < 6 else bad, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return 0.3

    study.optimize(diverging, n_trials=1)
    study.enqueue_trial({"recipe": "mid"})
    study.optimize(objective, n_trials=1)
    first, second = study.trials
    assert first.state == optuna.trial.TrialState.PRUNED and first.last_step == 6
    assert second.state == optuna.trial.TrialState.COMPLETE
    table = pruner.report.table.set_index("run")
    assert table.loc["0", "advice"] == "failed"
    assert "diverged" in table.loc["0", "reason"]
    assert table.loc["0", "n_points"] == 5  # the finite values are kept


def test_regression_steps_reported_out_of_order_are_each_fed_once():
    """Optuna takes steps in any order; the race got the values after the first sorted ones
    again (steps 2, 2, 4, 4, ...: every odd step lost, every even one twice)."""
    pruner = RacePruner(BUDGET, rungs=None)  # a report at every new point
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    ys = reward("mid", range(1, 11))
    for step in [2, 1, 4, 3, 6, 5, 8, 7, 10, 9]:
        trial.report(float(ys[step - 1]), step)
        trial.should_prune()
    points = pruner.report.points["0"]
    assert points["compute"].tolist() == list(range(1, 11))
    assert points["reward"].tolist() == pytest.approx([float(y) for y in ys])


def test_regression_one_pruner_races_each_study_on_its_own():
    """A pruner reused for a second study kept racing the first: the second study's trial 0
    was appended to the first's (trial numbers restart), in the first study's direction."""
    pruner = RacePruner(BUDGET, rungs=None)
    ys = reward("mid", range(1, 16))
    first = optuna.create_study(direction="maximize", pruner=pruner)
    trial = first.ask()
    for step in range(1, 11):
        trial.report(float(ys[step - 1]), step)
        trial.should_prune()
    first.tell(trial, float(ys[9]))
    second = optuna.create_study(direction="minimize", pruner=pruner)
    trial = second.ask()
    for step in range(1, 16):
        trial.report(-float(ys[step - 1]), step)
        trial.should_prune()
    assert pruner.report.higher_is_better is False
    assert pruner.report.points["0"]["compute"].tolist() == list(range(1, 16))


def test_regression_trials_in_threads_n_jobs():
    """study.optimize(n_jobs=...) prunes from several threads at once; the race's state was
    changed under a report in progress (AttributeError, ValueError: the trials failed)."""
    pruner = RacePruner(BUDGET, rungs=None)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for recipe in RECIPES:
        study.enqueue_trial({"recipe": recipe})
    study.optimize(objective, n_trials=4, n_jobs=4, catch=(Exception,))
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.FAIL not in states, [t.system_attrs for t in study.trials]
