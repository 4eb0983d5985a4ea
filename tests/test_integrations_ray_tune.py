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
