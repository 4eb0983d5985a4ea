"""RaceScheduler in a real local Ray Tune run: four toy trials report sigmoid curves with noise
(tests/race_toys.py); the late bloomer must survive and the clear loser must be stopped.

Ray is started small (2 CPUs, no dashboard) once for the module; each trial takes 0.5 CPU so all
four run at once, and sleeps 20 ms a step so the scheduler's decisions land while they run. The
run takes ~20-40 s on two shared cores (most of it Ray's start)."""

from __future__ import annotations

import time

import pytest

ray = pytest.importorskip("ray")
tune = pytest.importorskip("ray.tune")

import race_toys  # noqa: E402
from race_toys import BUDGET, RECIPES, reward  # noqa: E402

from rlcurves.errors import RLCurvesError  # noqa: E402
from rlcurves.integrations.ray_tune import RaceScheduler  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_local():
    import sys

    from ray import cloudpickle

    # the workers cannot import the tests folder: send the trainable and its toys by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(race_toys)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    yield
    ray.shutdown()


def trainable(config):
    ys = reward(config["recipe"], range(1, BUDGET + 1))
    for step, y in enumerate(ys, start=1):
        time.sleep(0.02)
        tune.report({"step": step, "val_acc": float(y)})


def test_race_scheduler_stops_the_loser_and_keeps_the_late_bloomer(ray_local, tmp_path):
    sched = RaceScheduler(BUDGET, time_attr="step", rungs=10)
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.5}),
        param_space={"recipe": tune.grid_search(list(RECIPES))},
        tune_config=tune.TuneConfig(metric="val_acc", mode="max", scheduler=sched),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    results = tuner.fit()
    last = {r.config["recipe"]: r.metrics["step"] for r in results}
    ids = {r.config["recipe"]: r.metrics["trial_id"] for r in results}
    assert last["late"] == BUDGET, sched.report.summary()
    assert last["loser"] < BUDGET, sched.report.summary()
    assert sched.report.leader == ids["late"]
    assert ids["late"] not in sched.report.stop
    # the saving the scheduler reports is the compute the stopped trials did not run
    stopped = [k for k in last if last[k] < BUDGET]
    assert sched.report.compute_saved >= sum(BUDGET - last[k] for k in stopped) - 1e-9


def test_race_scheduler_needs_metric_and_mode():
    sched = RaceScheduler(BUDGET)
    with pytest.raises(RLCurvesError, match="metric= and mode="):
        sched.on_trial_add(None, None)
    with pytest.raises(RLCurvesError, match="mode must be"):
        RaceScheduler(BUDGET, metric="acc", mode="maximize")
    with pytest.raises(RLCurvesError, match="alpha"):
        RaceScheduler(BUDGET, alpha=1.5)


# ---- regressions --------------------------------------------------------------------------------


def checkpointed(config):
    """The toy trainable with a checkpoint per step; ``crash_at`` raises once (no checkpoint to
    resume from yet on that attempt), as a preempted node does."""
    import json
    import os
    import tempfile

    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            start = json.load(f)["step"] + 1
    ys = reward(config["recipe"], range(1, BUDGET + 1))
    for step in range(start, BUDGET + 1):
        time.sleep(0.01)
        if step == config.get("crash_at") and not checkpoint:
            raise RuntimeError("preempted")
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "s.json"), "w") as f:
            json.dump({"step": step}, f)
        tune.report({"step": step, "val_acc": float(ys[step - 1])},
                    checkpoint=tune.Checkpoint.from_directory(d))  # fmt: skip


def test_regression_a_trial_ray_retries_races_again(ray_local, tmp_path):
    """With FailureConfig(max_failures=1) Ray retries an errored trial (on_trial_error, then
    on_trial_add); the race had failed it for good: the late bloomer, back from its checkpoint
    and the best at the budget, was reported 'failed' and another trial the leader."""
    sched = RaceScheduler(BUDGET, time_attr="step", rungs=10)
    space = {"recipe": tune.grid_search(list(RECIPES)), "crash_at": 15}
    tuner = tune.Tuner(
        tune.with_resources(checkpointed, {"cpu": 0.5}),
        param_space=space,
        tune_config=tune.TuneConfig(metric="val_acc", mode="max", scheduler=sched),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=1)),
    )  # fmt: skip
    results = tuner.fit()
    ids = {r.config["recipe"]: r.metrics["trial_id"] for r in results}
    assert all(r.error is None for r in results)
    table = sched.report.table.set_index("run")
    assert table.loc[ids["late"], "advice"] == "finished", sched.report.summary()
    assert sched.report.leader == ids["late"], sched.report.summary()
    points = sched.report.points[ids["late"]]["compute"].tolist()
    assert points == list(range(1, BUDGET + 1))  # what it replayed after its retry fed once


def test_regression_tuner_restore_races_on_the_results_so_far(ray_local, tmp_path, monkeypatch):
    """After an interruption, Tuner.restore brings back the scheduler as it was pickled when the
    Tuner was built: the race had none of the results so far (the resumed trials raced from
    their checkpoints on, the finished ones not at all). It is rebuilt from the trials'
    result.json."""
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "0")  # the experiment state at every step

    class Crash(tune.Callback):
        n = 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            Crash.n += 1
            if Crash.n == 70:
                raise RuntimeError("the driver crashed")

    trainable_ = tune.with_resources(checkpointed, {"cpu": 0.5})
    tuner = tune.Tuner(
        trainable_,
        param_space={"recipe": tune.grid_search(list(RECIPES))},
        tune_config=tune.TuneConfig(metric="val_acc", mode="max",
                                    scheduler=RaceScheduler(BUDGET, time_attr="step", rungs=10)),
        run_config=tune.RunConfig(name="exp", storage_path=str(tmp_path), verbose=0,
                                  callbacks=[Crash()]),
    )  # fmt: skip
    with pytest.raises(Exception, match="the driver crashed"):
        tuner.fit()
    restored = tune.Tuner.restore(str(tmp_path / "exp"), trainable_, resume_unfinished=True)
    results = restored.fit()
    last = {r.metrics["trial_id"]: r.metrics["step"] for r in results}
    ids = {r.config["recipe"]: r.metrics["trial_id"] for r in results}
    sched = restored._local_tuner._tune_config.scheduler  # the unpickled one (private)
    report = sched.race.report()
    assert set(report.points) == set(last), report.summary()  # the finished ones too
    for tid, n in last.items():  # every result of every trial, each once
        assert report.points[tid]["compute"].tolist() == list(range(1, n + 1)), tid
    assert report.leader == ids["late"], report.summary()


class FakeTrial:
    """What RaceScheduler reads of a Ray Tune trial."""

    def __init__(self, trial_id: str):
        self.trial_id = trial_id
        self.config: dict = {}
        self.has_reported_at_least_once = False

    def __str__(self):
        return self.trial_id


def fed(sched, trial_id):
    return sched.race.report().points[trial_id]["compute"].tolist()


def test_regression_a_result_without_time_attr_says_so():
    """A result with the metric but not time_attr (a typo: time_attr='steps') was skipped
    silently: the sweep ran without the race ever seeing a point."""
    sched = RaceScheduler(BUDGET, time_attr="steps", metric="val_acc", mode="max")
    trial = FakeTrial("t0")
    sched.on_trial_add(None, trial)
    with pytest.raises(RLCurvesError, match=r"time_attr 'steps'.*\['step'"):
        sched.on_trial_result(None, trial, {"step": 1, "val_acc": 0.2})
    with pytest.raises(RLCurvesError, match="must be numbers"):
        sched.on_trial_result(None, trial, {"steps": 1, "val_acc": "0.2x"})
    # a result without the metric (a training log between evaluations) is no evaluation
    assert sched.on_trial_result(None, trial, {"steps": 1, "loss": 3.0}) == "CONTINUE"


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_regression_an_infinite_metric_stops_the_trial_and_fails_it(bad):
    """An infinite metric (a diverged run) was skipped: the trial ran on, its forecast from
    before the divergence still racing (and setting the bar for the others)."""
    sched = RaceScheduler(BUDGET, time_attr="step", metric="val_acc", mode="max", rungs=None)
    trial = FakeTrial("t0")
    sched.on_trial_add(None, trial)
    ys = reward("fast", range(1, 11))
    for step, y in enumerate(ys, start=1):
        assert sched.on_trial_result(None, trial, {"step": step, "val_acc": float(y)}) == "CONTINUE"
    assert sched.on_trial_result(None, trial, {"step": 11, "val_acc": bad}) == "STOP"
    assert sched.report.advice("t0") == "failed"
    assert "diverged" in sched.report.table.set_index("run").loc["t0", "reason"]
    # NaN stays a missing evaluation (Ray's strict metric checking wants the metric in every
    # result; a trainable between evaluations reports NaN)
    other = FakeTrial("t1")
    sched.on_trial_add(None, other)
    assert sched.on_trial_result(None, other, {"step": 1, "val_acc": float("nan")}) == "CONTINUE"


def test_regression_time_attr_going_back_is_not_fed_twice():
    """A time_attr that goes back (a result replayed, time_attr not monotonic) was appended as
    a new point: the same compute twice, the curve folded on itself. It is left out, with a
    warning."""
    sched = RaceScheduler(BUDGET, time_attr="step", metric="val_acc", mode="max", rungs=None)
    trial = FakeTrial("t0")
    sched.on_trial_add(None, trial)
    ys = reward("mid", range(1, 11))
    for step, y in enumerate(ys, start=1):
        sched.on_trial_result(None, trial, {"step": step, "val_acc": float(y)})
    with pytest.warns(UserWarning, match="time_attr must grow"):
        sched.on_trial_result(None, trial, {"step": 3, "val_acc": 0.9})
    sched.on_trial_result(None, trial, {"step": 10, "val_acc": 0.9})  # a repeat: no warning
    assert fed(sched, "t0") == list(range(1, 11))


def test_regression_the_result_a_stopper_ends_a_trial_on_is_fed():
    """RunConfig(stop=...) ends a trial on a result Ray gives only to on_trial_complete; the
    race lost it (a trial stopped at the budget kept its forecast from the step before)."""
    sched = RaceScheduler(BUDGET, time_attr="step", metric="val_acc", mode="max", rungs=None)
    trial = FakeTrial("t0")
    sched.on_trial_add(None, trial)
    ys = reward("mid", range(1, 11))
    for step, y in enumerate(ys[:-1], start=1):
        sched.on_trial_result(None, trial, {"step": step, "val_acc": float(y)})
    sched.on_trial_complete(None, trial, {"step": 10, "val_acc": float(ys[-1])})
    assert fed(sched, "t0") == list(range(1, 11))
    assert sched.race.report().advice("t0") in ("ended", "finished")
