"""A training reward gets the training-reward calibration when asked (``calibration="training
reward"``, ``--metric-kind training-reward``), and a note when its column reads as one but the
default (validation) calibration is used: the default's forecasts are several times narrower."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rlcurves
from rlcurves.calibrate import default_calibration, looks_like_training_reward, resolve_calibration
from rlcurves.cli import main


def _frame(column: str, a: float = 0.7, c_mid: float = 20.0, seed: int = 0) -> pd.DataFrame:
    c = np.arange(1.0, 61.0)
    y = 0.1 + (a - 0.1) / (1 + (c_mid / c) ** 2)
    y = y + np.random.default_rng(seed).normal(0, 0.02, c.size)
    return pd.DataFrame({"step": c, column: y})


@pytest.mark.parametrize(
    ("name", "training"),
    [
        ("train/reward", True),
        ("train/reward_mean", True),
        ("rewards/correctness_reward_func_qa/mean", True),  # TRL's per-function reward
        ("critic/score/mean", True),  # verl's training score
        ("reward", True),
        ("val-core/GSM8K/reward/mean@1", False),  # verl's validation metric
        ("eval_reward", False),
        ("val/acc", False),
        ("test_reward_mean", False),
        ("answer_accuracy", False),
        ("metric", False),
        (None, False),
    ],
)
def test_metric_names_that_read_as_a_training_reward(name, training):
    assert looks_like_training_reward(name) is training


def test_resolve_calibration_by_kind_name_and_its_errors():
    assert resolve_calibration(None) is default_calibration()
    assert resolve_calibration("training reward") is default_calibration("training reward")
    cal = default_calibration("validation")
    assert resolve_calibration(cal) is cal
    with pytest.raises(rlcurves.RLCurvesError, match=r"calibration='train'.*training reward"):
        resolve_calibration("train")
    with pytest.raises(rlcurves.RLCurvesError, match="got int"):
        resolve_calibration(3)


def test_forecast_of_a_training_reward_column_notes_the_validation_default():
    """The default calibration on a column that reads as a training reward: a note naming the
    keyword; with calibration="training reward" no such note, that calibration used (the same
    forecast as passing its Calibration) and a wider interval; a validation column: no note."""
    df = _frame("train/reward")
    fit = rlcurves.fit_sigmoid("step", "train/reward", data=df, max_compute=30)
    plain = rlcurves.forecast(fit, 60, seed=0, progress=False)
    assert "reads as a training reward" in plain.note
    assert "calibration='training reward'" in plain.note
    named = rlcurves.forecast(fit, 60, seed=0, progress=False, calibration="training reward")
    assert "reads as a training reward" not in named.note
    assert "training reward runs" in named.calibration
    again = rlcurves.forecast(
        fit, 60, seed=0, progress=False, calibration=default_calibration("training reward")
    )
    assert (named.lower, named.upper) == (again.lower, again.upper)
    assert named.upper - named.lower > 2 * (plain.upper - plain.lower)
    val = rlcurves.fit_sigmoid("step", "val/acc", data=_frame("val/acc"), max_compute=30)
    assert "training reward" not in rlcurves.forecast(val, 60, seed=0, progress=False).note


def test_race_and_monitor_take_a_kind_of_metric_by_name():
    race = rlcurves.Race(60, calibration="training reward")
    assert race.calibration is default_calibration("training reward")
    monitor = rlcurves.Monitor(60, baseline=0.5, calibration="training reward")
    assert monitor.calibration is default_calibration("training reward")
    assert rlcurves.Race(60).calibration is None  # the default, loaded at first use
    with pytest.raises(rlcurves.RLCurvesError, match="calibration='validation set'"):
        rlcurves.Race(60, calibration="validation set")


def test_cli_metric_kind_flag_and_the_note_in_flag_words(tmp_path, capsys):
    """forecast: without --metric-kind the note names the flag (not the keyword); with it the
    training-reward calibration is used. race: the note on stderr, none with the flag."""
    paths = []
    for i, (a, c_mid) in enumerate(((0.7, 20.0), (0.6, 25.0))):
        path = tmp_path / f"run{i}.csv"
        _frame("train/reward", a, c_mid, seed=i).to_csv(path, index=False)
        paths.append(str(path))
    args = ["forecast", paths[0], "--compute", "step", "--max-compute", "30", "--at", "60"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "for a training reward pass --metric-kind training-reward" in out
    assert "calibration='training reward'" not in out
    assert main([*args, "--metric-kind", "training-reward"]) == 0
    out = capsys.readouterr().out
    assert "calibration: the bundled corpus's training reward runs" in out
    assert "reads as a training reward" not in out
    race = ["race", *paths, "--compute", "step", "--budget", "60", "--at", "0.5", "--no-plot"]
    assert main(race) == 0
    assert "--metric-kind training-reward" in capsys.readouterr().err
    assert main([*race, "--metric-kind", "training-reward"]) == 0
    captured = capsys.readouterr()
    assert "reads as a training reward" not in captured.err
    tau = default_calibration("training reward").tau  # the race's prior is that calibration's
    assert f"calibration's {tau:.3g})" in captured.out


def test_watch_notes_a_training_reward_in_flag_words_and_the_flag_changes_the_advice(
    tmp_path, capsys
):
    """watch --once on half of a training-reward run against a baseline of 0.8: with the default
    calibration the note (in flag words) and a stop (the validation calibration's narrow
    interval excludes 0.8); with --metric-kind training-reward no note and no stop yet (its
    interval reaches past 0.8). In Python the Monitor's report carries the keyword's note."""
    path = tmp_path / "half.csv"
    _frame("train/reward").iloc[:30].to_csv(path, index=False)
    args = ["watch", str(path), "--compute", "step", "--budget", "60", "--baseline", "0.8",
            "--once", "--no-plot"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "note: the reward column 'train/reward' reads as a training reward" in out
    assert "pass --metric-kind training-reward" in out and "UNLIKELY TO BEAT" in out
    assert main([*args, "--out", str(tmp_path / "b"), "--metric-kind", "training-reward"]) == 0
    out = capsys.readouterr().out
    assert "reads as a training reward" not in out and "CONTINUE" in out
    report = rlcurves.Monitor(60, baseline=0.8, read_log_kws={"compute": "step"}).update_from(
        str(path)
    )
    assert any("calibration='training reward'" in n for n in report.notes)


def test_ray_tune_scheduler_warns_on_a_training_reward_metric_without_a_calibration():
    """RaceScheduler knows the metric's name: on a training reward with no calibration given,
    a warning naming the keyword when the race is built; none with calibration= or on a
    validation metric."""
    pytest.importorskip("ray.tune")
    import warnings

    from rlcurves.integrations.ray_tune import RaceScheduler

    with pytest.warns(UserWarning, match="calibration='training reward'"):
        RaceScheduler(60, metric="train/reward", mode="max")._the_race()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RaceScheduler(60, metric="train/reward", mode="max",
                      calibration="training reward")._the_race()  # fmt: skip
        RaceScheduler(60, metric="val_acc", mode="max")._the_race()


def test_backtest_and_report_take_the_kind_of_metric(tmp_path, capsys):
    """`rlcurves backtest` and `rlcurves report` take --metric-kind, and build_report passes
    calibration= to its forecasts and backtests: the training-reward report's intervals differ
    from the default's, and a bad name is the calibration's error."""
    from rlcurves.report import build_report

    path = tmp_path / "run.csv"
    _frame("train/reward").to_csv(path, index=False)
    bt = ["backtest", str(path), "--compute", "step", "--n-samples", "100", "--json"]
    assert main(bt) == 0
    plain = capsys.readouterr().out
    assert main([*bt, "--metric-kind", "training-reward"]) == 0
    assert capsys.readouterr().out != plain
    out = tmp_path / "r.html"
    rep = ["report", str(path), "--compute", "step", "-o", str(out), "--n-samples", "100"]
    assert main([*rep, "--metric-kind", "training-reward"]) == 0
    assert "training reward runs" in out.read_text()
    frame = rlcurves.read_log(str(path), compute="step")
    with pytest.raises(rlcurves.RLCurvesError, match="calibration='nope'"):
        build_report({"run": frame}, calibration="nope", n_samples=50)
