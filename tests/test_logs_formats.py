"""Every format's fixture reads into the same canonical curve as tests/data/logs/reference.csv.

The fixtures (written by tests/data/logs/make_fixtures.py) encode one made-up run: 200 steps,
0.2 GPU-hours per step (90 s x 8 GPUs), a validation reward every 10 steps. Each format carries
its tool's quirks (sparse evaluation, resumed runs, a restarted clock, NaNs) placed so that the
cleaning must recover the reference exactly; the counts asserted below follow from how
make_fixtures.py built each file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlcurves.logs import read_log, read_logs

DATA = Path(__file__).parent / "data" / "logs"
REFERENCE = pd.read_csv(DATA / "reference.csv")


def cleaning(df: pd.DataFrame) -> dict[str, int]:
    return {entry["step"]: entry["rows"] for entry in df.attrs["cleaning"]}


# (path, read_log arguments, format detected, reward column, cleaning counts, reward tolerance)
CASES = [
    ("reference.csv", {}, "csv", "val_reward", {"drop_missing_reward": 0}, 0.0),
    # 200 train rows, 20 of them with val_reward.
    ("csv/run_a.csv", {}, "csv", "val_reward", {"drop_missing_reward": 180}, 0.0),
    # as CSV, plus "nan" at step 5 and "inf" at step 15 (non-eval steps) written in val_reward.
    (
        "tsv/run_a.tsv",
        {},
        "tsv",
        "val_reward",
        {"drop_missing_reward": 178, "drop_nonfinite_reward": 2},
        0.0,
    ),
    # nulls where not evaluated, one written NaN at step 25.
    (
        "parquet/run_a.parquet",
        {},
        "parquet",
        "val_reward",
        {"drop_missing_reward": 179, "drop_nonfinite_reward": 1},
        0.0,
    ),
    # 200 train records + 20 eval records at the same steps.
    ("jsonl/run_a.jsonl", {}, "jsonl", "val_reward", {"drop_missing_reward": 200}, 0.0),
    # 212 records: steps 101-112 written twice (resumed run); step 110 is an eval step.
    (
        "verl/gsm8k_grpo.jsonl",
        {"gpus": 8},
        "verl",
        "val-core/math/reward/mean@1",
        {"drop_missing_reward": 191, "dedupe_steps": 1},
        0.0,
    ),
    ("wandb/history.json", {"gpus": 8}, "wandb", "eval/reward", {"drop_missing_reward": 180}, 0.0),
    (
        "wandb/history_export.csv",
        {"gpus": 8},
        "wandb",
        "eval/reward",
        {"drop_missing_reward": 180},
        0.0,
    ),
    # 2 event files: steps 1-120 and 101-200, so eval steps 110 and 120 are written twice;
    # eval/reward is stored as float32, hence the tolerance.
    (
        "tensorboard/grpo_run",
        {"gpu_hours_per_step": 0.2},
        "tensorboard",
        "eval/reward",
        {"drop_missing_reward": 200 + 20 - 20 - 2, "dedupe_steps": 2},
        1e-7,
    ),
    (
        "trl/qwen-grpo",
        {"gpu_hours_per_step": 0.2},
        "trl",
        "eval_reward",
        {"drop_summary_record": 1, "drop_missing_reward": 20},
        0.0,
    ),
    # 200 train stats + 20 test stats; the clock restarted after version 150 (50 rows shifted);
    # the 20 test records take time_since_start from the train record of their version.
    (
        "pipelinerl/exp_math",
        {"gpus": 8},
        "pipelinerl",
        "test_success_mean",
        {"drop_missing_reward": 200, "repair_compute_restart": 50, "join_compute_same_step": 20},
        0.0,
    ),
    ("recipe/cispo_small", {}, "recipe", "val_pass_rate", {"drop_missing_reward": 200}, 0.0),
    (
        "recipe/cispo_small/log.jsonl",
        {},
        "recipe",
        "val_pass_rate",
        {"drop_missing_reward": 200},
        0.0,
    ),
]


@pytest.mark.parametrize(
    ("path", "kwargs", "fmt", "reward", "counts", "tol"), CASES, ids=[c[0] for c in CASES]
)
def test_every_format_reads_the_reference_curve(path, kwargs, fmt, reward, counts, tol):
    df = read_log(DATA / path, **kwargs)
    assert list(df.columns[:2]) == ["compute", "reward"]
    assert "run" not in df.columns
    np.testing.assert_allclose(df["compute"], REFERENCE["gpu_hours"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(df["reward"], REFERENCE["val_reward"], rtol=0, atol=tol)
    assert df.attrs["format"] == fmt
    assert df.attrs["reward"]["column"] == reward
    assert df.attrs["compute_unit"] == "GPU-hours"
    found = cleaning(df)
    for step, rows in counts.items():
        assert found[step] == rows, (step, found)
    # every main check is reported, even when it dropped nothing
    for step in ("drop_missing_reward", "dedupe_steps", "drop_nonfinite_reward"):
        assert step in found
    assert df.attrs["rows_kept"] == len(REFERENCE)


def test_original_columns_are_kept_next_to_the_canonical_ones():
    df = read_log(DATA / "csv" / "run_a.csv")
    for name in ("step", "gpu_hours", "wall_seconds", "train_reward", "loss", "val_reward"):
        assert name in df.columns
    np.testing.assert_array_equal(df["step"], REFERENCE["step"])


def test_trl_keeps_its_own_reward_column_under_another_name():
    df = read_log(DATA / "trl" / "qwen-grpo", gpu_hours_per_step=0.2)
    # TRL's "reward" is the training reward; the canonical reward is eval_reward.
    assert "reward_original" in df.columns
    assert df.attrs["renamed"] == {"reward": "reward_original"}
    assert not np.allclose(df["reward_original"], df["reward"])


def test_trl_reads_the_latest_checkpoint_and_keeps_the_summary():
    df = read_log(DATA / "trl" / "qwen-grpo", gpu_hours_per_step=0.2)
    assert df.attrs["source"].endswith("checkpoint-200/trainer_state.json")
    assert df.attrs["run"] == "qwen-grpo"
    assert df.attrs["meta"]["trl_summary"]["train_runtime"] == 200 * 90.0
    partial = read_log(
        DATA / "trl" / "qwen-grpo" / "checkpoint-100" / "trainer_state.json", gpu_hours_per_step=0.2
    )
    assert len(partial) == 10
    assert partial.attrs["run"] == "qwen-grpo"


def test_verl_keeps_the_later_write_of_a_resumed_step():
    df = read_log(DATA / "verl" / "gsm8k_grpo.jsonl", gpus=8)
    # the first write of step 110 was 0.3 lower; the later write is the reference value
    at_110 = df.loc[df["step"] == 110, "reward"].item()
    expected = REFERENCE.loc[REFERENCE["step"] == 110, "val_reward"].item()
    assert at_110 == expected
    dedupe = next(e for e in df.attrs["cleaning"] if e["step"] == "dedupe_steps")
    assert "110" in dedupe["detail"]


def test_verl_summed_durations_use_each_step_once():
    # 12 steps were written twice; summing every record's timing_s/step would add 12 x 90 s.
    df = read_log(DATA / "verl" / "gsm8k_grpo.jsonl", gpus=8)
    assert df["compute"].iloc[-1] == pytest.approx(200 * 90 * 8 / 3600)
    assert "timing_s/step" in df.attrs["compute"]["how"]


def test_tensorboard_reads_both_scalar_encodings_and_keeps_the_later_write():
    df = read_log(DATA / "tensorboard" / "grpo_run", gpu_hours_per_step=0.2)
    assert {"eval/reward", "train/reward"} <= set(df.columns)  # tensor and simple_value tags
    expected = REFERENCE.set_index("step")["val_reward"]
    for step in (110, 120):  # written 0.2 lower in the first file
        assert df.loc[df["step"] == step, "reward"].item() == pytest.approx(
            expected[step], abs=1e-7
        )
    assert len(df.attrs["meta"]["event_files"]) == 2


def test_tensorboard_restarted_clock_counts_neither_downtime_nor_lost_work():
    df = read_log(DATA / "tensorboard" / "grpo_run", gpus=8)
    # file 2 (opened 1000 s after file 1 stopped at step 120) resumes at step 101: its clock
    # starts again, and is offset by the time at step 100 of file 1, so the axis is the clean
    # run's 90 s x 8 GPUs per step.
    np.testing.assert_allclose(df["compute"], REFERENCE["gpu_hours"], rtol=1e-12)
    assert df.attrs["compute"]["columns"] == ["elapsed_seconds"]
    restart = next(e for e in df.attrs["cleaning"] if e["step"] == "repair_compute_restart")
    assert restart["restarts"] == [{"where": "step 101", "before": 20.0, "after": 0.2}]


def test_tensorboard_concurrent_writers_share_one_clock(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    def write(name, tag, steps):
        with (tmp_path / name).open("wb") as handle:
            writer = RecordWriter(handle)
            writer.write(
                event_pb2.Event(wall_time=1000.0, file_version="brain.Event:2").SerializeToString()
            )
            for step in steps:
                value = summary_pb2.Summary.Value(tag=tag, simple_value=step / 100)
                event = event_pb2.Event(
                    wall_time=1000.0 + 36 * step,
                    step=step,
                    summary=summary_pb2.Summary(value=[value]),
                )
                writer.write(event.SerializeToString())
            writer.flush()

    write("events.out.tfevents.1000.host.train", "train/reward", range(1, 21))
    write("events.out.tfevents.1001.host.eval", "eval/reward", range(5, 21, 5))
    df = read_log(tmp_path, gpus=100)  # 36 s x 100 GPUs = 1 GPU-hour per step
    np.testing.assert_allclose(df["compute"], [5, 10, 15, 20])
    assert "concurrent writers" in " ".join(df.attrs["notes"])


def test_wandb_panel_export_with_two_runs_gives_a_run_column():
    df = read_log(DATA / "wandb" / "panel_eval_reward.csv", gpu_hours_per_step=0.2)
    assert df.attrs["format"] == "wandb-csv"
    assert list(df.columns[:3]) == ["compute", "reward", "run"]
    assert sorted(df["run"].unique()) == ["run-a", "run-b"]
    run_a = df[df["run"] == "run-a"]
    np.testing.assert_allclose(run_a["compute"], REFERENCE["gpu_hours"], rtol=1e-12)
    np.testing.assert_allclose(run_a["reward"], REFERENCE["val_reward"], rtol=0, atol=0)
    assert len(df[df["run"] == "run-b"]) == 10
    assert set(df.attrs["runs"]) == {"run-a", "run-b"}


def test_pipelinerl_restart_repair_gives_the_continuous_clock():
    df = read_log(DATA / "pipelinerl" / "exp_math", gpus=8)
    restart = next(e for e in df.attrs["cleaning"] if e["step"] == "repair_compute_restart")
    assert len(restart["restarts"]) == 1
    assert restart["restarts"][0]["where"] == "step 151"
    assert restart["restarts"][0]["before"] == pytest.approx(150 * 90 * 8 / 3600)
    assert np.all(np.diff(df["compute"]) > 0)


def test_recipe_folder_gives_run_name_and_config():
    df = read_log(DATA / "recipe" / "cispo_small")
    assert df.attrs["run"] == "cispo_small"
    assert df.attrs["meta"]["config"]["loss"] == "cispo"
    assert df.attrs["compute"]["columns"] == ["gpu_hours"]
    assert set(df["kind"]) == {"eval"}
    assert read_log(DATA / "recipe" / "cispo_small" / "log.jsonl").attrs["run"] == "cispo_small"


def test_several_paths_give_one_frame_with_runs():
    df = read_logs([DATA / "recipe" / "cispo_small", DATA / "csv" / "run_a.csv"])
    assert list(df.columns[:3]) == ["compute", "reward", "run"]
    assert sorted(df["run"].unique()) == ["cispo_small", "run_a"]
    assert len(df) == 2 * len(REFERENCE)
    assert isinstance(df.attrs["source"], list) and len(df.attrs["source"]) == 2
    assert {e["run"] for e in df.attrs["cleaning"]} == {"cispo_small", "run_a"}


def test_a_folder_of_runs_reads_one_run_per_entry(tmp_path):
    for name, shift in (("alpha", 0.0), ("beta", 0.1)):
        ref = REFERENCE.copy()
        ref["val_reward"] += shift
        ref.to_csv(tmp_path / f"{name}.csv", index=False)
    (tmp_path / "notes.md").write_text("not a log")
    (tmp_path / "config.json").write_text('{"lr": 1e-6}')  # a side file, not a run
    nested = tmp_path / "more" / "gamma"
    nested.mkdir(parents=True)
    (nested / "log.jsonl").write_text(
        (DATA / "recipe" / "cispo_small" / "log.jsonl").read_text(), encoding="utf-8"
    )
    df = read_log(tmp_path)
    assert sorted(df["run"].unique()) == ["alpha", "beta", "gamma"]
    beta = df[df["run"] == "beta"]
    np.testing.assert_allclose(beta["reward"], REFERENCE["val_reward"] + 0.1)


def test_run_argument_names_the_run_or_splits_by_a_column(tmp_path):
    named = read_log(DATA / "reference.csv", run="baseline")
    assert named.attrs["run"] == "baseline"
    assert set(named["run"]) == {"baseline"}
    long = pd.concat([REFERENCE.assign(variant="a"), REFERENCE.assign(variant="b")])
    long.to_csv(tmp_path / "long.csv", index=False)
    split = read_log(tmp_path / "long.csv", run="variant")
    assert sorted(split["run"].unique()) == ["a", "b"]
    assert len(split) == 2 * len(REFERENCE)


def test_wandb_history_saved_as_parquet_and_pandas_json_layouts(tmp_path):
    history = pd.read_json(DATA / "wandb" / "history.json")
    history.to_parquet(tmp_path / "history.parquet")
    history.to_json(tmp_path / "columns.json")  # pandas' default: {column: {row: value}}
    history.to_json(tmp_path / "split.json", orient="split")
    for name in ("history.parquet", "columns.json", "split.json"):
        df = read_log(tmp_path / name, gpus=8)
        assert df.attrs["format"] == "wandb", name
        np.testing.assert_allclose(df["compute"], REFERENCE["gpu_hours"], rtol=1e-12)
        # pandas' to_json writes 10 significant digits
        np.testing.assert_allclose(df["reward"], REFERENCE["val_reward"], rtol=0, atol=1e-12)


def test_verl_metric_names_are_recognized_outside_its_file_logger(tmp_path):
    # verl writes the same keys to W&B and TensorBoard: a flat table with them is detected too
    rows = read_log(DATA / "verl" / "gsm8k_grpo.jsonl", gpus=8)
    flat = rows[["step", "timing_s/step", "critic/score/mean", "val-core/math/reward/mean@1"]]
    flat.to_csv(tmp_path / "export.csv", index=False)
    df = read_log(tmp_path / "export.csv", gpus=8)
    assert df.attrs["reward"]["column"] == "val-core/math/reward/mean@1"
    assert "timing_s/step" in df.attrs["compute"]["how"]


def test_a_run_column_splits_a_long_table_by_itself(tmp_path):
    long = pd.concat([REFERENCE.assign(run="seed0"), REFERENCE.assign(run="seed1")])
    long.to_csv(tmp_path / "seeds.csv", index=False)
    df = read_log(tmp_path / "seeds.csv")
    assert sorted(df["run"].unique()) == ["seed0", "seed1"]
    assert "run_original" not in df.columns
    one = read_log(DATA / "reference.csv")
    assert "run" not in one.columns and one.attrs["run"] == "reference"


def test_a_compute_column_changed_by_cleaning_is_kept_as_original(tmp_path):
    rows = pd.DataFrame(
        {"step": [1, 2, 3, 4], "compute": [1.0, 2.0, 0.5, 1.5], "reward": [0.1] * 4}
    )
    rows.to_csv(tmp_path / "run.csv", index=False)
    df = read_log(tmp_path / "run.csv")
    np.testing.assert_array_equal(df["compute"], [1.0, 2.0, 2.5, 3.5])  # restart repaired
    np.testing.assert_array_equal(df["compute_original"], [1.0, 2.0, 0.5, 1.5])
    assert "reward_original" not in df.columns  # same values as the canonical reward


def test_wandb_panel_bucket_means_are_flagged(tmp_path):
    text = "Step,r - eval/reward,r - eval/reward__MIN,r - eval/reward__MAX\n"
    text += "10,0.5,0.5,0.5\n20,0.6,0.55,0.65\n"
    (tmp_path / "panel.csv").write_text(text)
    df = read_log(tmp_path / "panel.csv", gpu_hours_per_step=1)
    assert df.attrs["run"] == "r"
    assert any("__MIN != __MAX at 1 rows" in note for note in df.attrs["notes"])
    exact = read_log(DATA / "wandb" / "panel_eval_reward.csv", gpu_hours_per_step=0.2)
    assert not any("bucket" in note for note in exact.attrs["runs"]["run-a"]["notes"])


def test_regression_a_spreadsheets_semicolon_csv_and_a_binary_file(tmp_path):
    """A CSV saved by a spreadsheet in a locale whose decimal mark is a comma (``step;reward``,
    ``0,35``) was read as one column named 'step;reward' ("no reward column recognized"); a
    binary file named .csv ended in a bare UnicodeDecodeError. The semicolon table is read,
    its decimal commas as points; the binary file is an RLCurvesError naming format=."""
    from rlcurves import RLCurvesError

    rows = [(10 * i, 0.1 + 0.05 * i) for i in range(1, 9)]
    semi = tmp_path / "export.csv"
    semi.write_text(
        "step;val_reward;note\n"
        + "".join(f"{s};{r:.2f};run a\n".replace(".", ",") for s, r in rows)
    )
    df = read_log(semi, gpu_hours_per_step=0.5)
    np.testing.assert_allclose(df["reward"], [round(r, 2) for _, r in rows])
    np.testing.assert_allclose(df["compute"], [0.5 * s for s, _ in rows])
    assert "semicolon-separated" in df.attrs["format_how"]
    dotted = tmp_path / "dotted.csv"
    dotted.write_text("step;val_reward\n" + "".join(f"{s};{r}\n" for s, r in rows))
    np.testing.assert_allclose(
        read_log(dotted, gpu_hours_per_step=0.5)["reward"], [r for _, r in rows]
    )
    binary = tmp_path / "events.csv"
    binary.write_bytes(b"\xf5" + np.random.default_rng(0).bytes(2000))
    with pytest.raises(RLCurvesError, match=r"is not a text table .* format="):
        read_log(binary)


def test_regression_read_log_path_not_a_path_and_read_logs_of_one_path():
    # read_log(None) was list(None)'s TypeError, read_logs([None]) Path(None)'s; read_logs of
    # one path iterated its characters ("l: no such file or folder")
    from rlcurves import RLCurvesError

    for bad in (None, 3):
        with pytest.raises(RLCurvesError, match="path must be a log file or folder"):
            read_log(bad)
    with pytest.raises(RLCurvesError, match="a log path must be a file or folder name"):
        read_logs([None])
    one = str(DATA / "csv" / "run_a.csv")
    pd.testing.assert_frame_equal(read_logs(one), read_logs([one]))


def test_regression_describe_log_of_a_path_and_read_log_with_a_number_for_a_column():
    # describe_log("runs/x") was an AttributeError ('str' object has no attribute 'attrs');
    # read_log(path, reward=3) a TypeError ('int' object is not iterable)
    from rlcurves import RLCurvesError, describe_log

    with pytest.raises(RLCurvesError, match=r"describe_log takes the frame rlcurves.read_log"):
        describe_log("runs/my_run")
    for kws, word in (({"reward": 3}, "reward="), ({"compute": ["gpu_hours"]}, "compute="),
                      ({"run": 1}, "run=")):  # fmt: skip
        with pytest.raises(RLCurvesError, match=f"{word} takes a column name"):
            read_log("example:simulated_scalerl_8b", **kws)


def test_regression_run_naming_no_column_near_a_seed_column_says_the_seeds_are_merged(tmp_path):
    # --run sed (for the column 'seed') read the file as one run named 'sed', its seeds merged
    # into one curve (half the points dropped as repeated steps), without a word
    table = "step,gpu_hours,seed,val_pass_rate\n1,1,0,0.1\n2,2,0,0.2\n1,1,1,0.15\n2,2,1,0.25\n"
    (tmp_path / "seeds.csv").write_text(table)
    with pytest.warns(UserWarning, match=r"run='sed' names no column.*pass run='seed'"):
        read_log(tmp_path / "seeds.csv", run="sed")
    assert read_log(tmp_path / "seeds.csv", run="seed")["run"].nunique() == 2
    (tmp_path / "one.csv").write_text("step,gpu_hours,val_pass_rate\n1,1,0.1\n2,2,0.2\n")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a name for a file of one run: no warning
        assert read_log(tmp_path / "one.csv", run="stepper")["run"].iloc[0] == "stepper"
