"""Cleaning, compute-axis choices and error messages of read_log, on small logs built here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlcurves.errors import DataRepairWarning, RLCurvesError
from rlcurves.logs import read_log, read_logs, read_wandb_run

DATA = Path(__file__).parent / "data" / "logs"


def write_jsonl(path: Path, records: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return path


def counts(df: pd.DataFrame) -> dict[str, int]:
    return {e["step"]: e["rows"] for e in df.attrs["cleaning"]}


# --- cleaning ----------------------------------------------------------------------------------


def test_resumed_run_keeps_the_later_write(tmp_path):
    first = [{"step": s, "gpu_hours": s * 1.0, "reward": 0.1 * s} for s in range(1, 11)]
    # resumed from step 5: steps 6-10 written again with different rewards
    second = [{"step": s, "gpu_hours": s * 1.0, "reward": 0.1 * s + 0.05} for s in range(6, 13)]
    df = read_log(write_jsonl(tmp_path / "run.jsonl", first + second))
    assert counts(df)["dedupe_steps"] == 5
    np.testing.assert_array_equal(df["step"], np.arange(1, 13))
    expected = [0.1 * s for s in range(1, 6)] + [0.1 * s + 0.05 for s in range(6, 13)]
    np.testing.assert_allclose(df["reward"], expected)


def test_restarted_clock_is_offset_by_the_value_before_the_drop(tmp_path):
    # elapsed seconds restart from 0 after step 6 (a new process), steps continue
    runtime = [100, 200, 300, 400, 500, 600, 50, 150, 250]
    rows = [{"step": i + 1, "_runtime": t, "eval_reward": 0.1 * i} for i, t in enumerate(runtime)]
    df = read_log(write_jsonl(tmp_path / "run.jsonl", rows), gpus=36)  # 36 GPUs: 1 s = 0.01 h
    expected_seconds = np.array([100, 200, 300, 400, 500, 600, 650, 750, 850])
    np.testing.assert_allclose(df["compute"], expected_seconds * 36 / 3600)
    entry = next(e for e in df.attrs["cleaning"] if e["step"] == "repair_compute_restart")
    assert entry["rows"] == 3
    assert entry["restarts"] == [{"where": "step 7", "before": 6.0, "after": 0.5}]


def test_restart_then_resume_from_checkpoint_repairs_then_dedupes(tmp_path):
    # process 1: steps 1-8 at 10 s each; process 2 resumes from step 5, clock from 0
    first = [{"step": s, "_runtime": 10 * s, "val_reward": s / 10} for s in range(1, 9)]
    second = [
        {"step": s, "_runtime": 10 * (s - 5), "val_reward": s / 10 + 0.01} for s in range(6, 11)
    ]
    df = read_log(write_jsonl(tmp_path / "run.jsonl", first + second), gpus=360)  # 1 s = 0.1 h
    assert counts(df)["dedupe_steps"] == 3
    # in step order the later writes follow step 5 (50 s): 60..100 s is 10..50 s + 50 s
    np.testing.assert_allclose(df["compute"], np.arange(1, 11) * 10 * 0.1)
    np.testing.assert_allclose(df["reward"].iloc[5:], np.arange(6, 11) / 10 + 0.01)


def test_a_column_that_is_not_cumulative_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "step": np.arange(1, 41),
            "gpu_hours": rng.uniform(1, 2, 40),
            "reward": np.linspace(0, 1, 40),
        }
    )
    frame.to_csv(tmp_path / "run.csv", index=False)
    with pytest.raises(RLCurvesError, match="not a cumulative axis") as info:
        read_log(tmp_path / "run.csv")
    assert "gpu_hours_per_step" in str(info.value)
    assert info.value.details["file"].endswith("run.csv")


def test_missing_and_non_finite_rewards_are_counted_apart(tmp_path):
    lines = [
        '{"step": 1, "gpu_hours": 1, "eval_reward": 0.1}',
        '{"step": 2, "gpu_hours": 2}',
        '{"step": 3, "gpu_hours": 3, "eval_reward": null}',
        '{"step": 4, "gpu_hours": 4, "eval_reward": NaN}',
        '{"step": 5, "gpu_hours": 5, "eval_reward": Infinity}',
        '{"step": 6, "gpu_hours": 6, "eval_reward": -Infinity}',
        '{"step": 7, "gpu_hours": 7, "eval_reward": 0.7}',
    ]
    (tmp_path / "run.jsonl").write_text("\n".join(lines) + "\n")
    df = read_log(tmp_path / "run.jsonl")
    assert counts(df)["drop_missing_reward"] == 2
    nonfinite = next(e for e in df.attrs["cleaning"] if e["step"] == "drop_nonfinite_reward")
    assert (nonfinite["rows"], nonfinite["nan"], nonfinite["inf"]) == (3, 1, 2)
    np.testing.assert_array_equal(df["step"], [1, 7])


def test_csv_nan_text_is_a_written_nan_and_empty_is_missing(tmp_path):
    (tmp_path / "run.csv").write_text(
        "step,gpu_hours,val_reward\n1,1,0.1\n2,2,\n3,3,NaN\n4,4,nan\n5,5,-inf\n6,6,0.6\n"
    )
    df = read_log(tmp_path / "run.csv")
    assert counts(df)["drop_missing_reward"] == 1
    assert counts(df)["drop_nonfinite_reward"] == 3
    np.testing.assert_array_equal(df["reward"], [0.1, 0.6])


def test_truncated_last_line_is_skipped_and_reported(tmp_path):
    records = [{"step": s, "gpu_hours": s, "reward": s / 10} for s in range(1, 6)]
    path = write_jsonl(tmp_path / "run.jsonl", records, tail='{"step": 6, "gpu_hou')
    df = read_log(path)
    assert len(df) == 5
    assert counts(df)["skip_truncated_line"] == 1


def test_a_malformed_line_in_the_middle_is_an_error(tmp_path):
    (tmp_path / "run.jsonl").write_text('{"step": 1, "reward": 0.1}\nnot json\n{"step": 2}\n')
    with pytest.raises(RLCurvesError, match="line 2 is not JSON"):
        read_log(tmp_path / "run.jsonl")


def test_records_without_compute_are_dropped_and_counted(tmp_path):
    rows = [
        {"step": 1, "gpu_hours": 1.0, "reward": 0.1},
        {"step": 2, "reward": 0.2},  # no compute, no other record at step 2
        {"step": 3, "gpu_hours": 3.0, "reward": 0.3},
    ]
    df = read_log(write_jsonl(tmp_path / "run.jsonl", rows))
    assert counts(df)["drop_missing_compute"] == 1
    np.testing.assert_array_equal(df["step"], [1, 3])


# --- compute axis ------------------------------------------------------------------------------


def _mixed(tmp_path) -> Path:
    frame = pd.DataFrame(
        {
            "step": [1, 2, 3, 4],
            "gpu_hours": [1.0, 2.0, 3.0, 4.0],
            "_runtime": [3600.0, 7200.0, 10800.0, 14400.0],
            "total_flops": [1e18, 2e18, 3e18, 4e18],
            "val_reward": [0.1, 0.2, 0.3, 0.4],
        }
    )
    frame.to_csv(tmp_path / "run.csv", index=False)
    return tmp_path / "run.csv"


def test_detection_prefers_a_gpu_hours_column(tmp_path):
    df = read_log(_mixed(tmp_path))
    np.testing.assert_array_equal(df["compute"], [1, 2, 3, 4])
    assert df.attrs["compute"]["how"] == "GPU-hours column 'gpu_hours'"


def test_gpus_uses_elapsed_seconds(tmp_path):
    df = read_log(_mixed(tmp_path), gpus=4)
    np.testing.assert_allclose(df["compute"], [4, 8, 12, 16])
    assert df.attrs["compute"]["columns"] == ["_runtime"]
    assert df.attrs["compute"]["gpus"] == 4


def test_gpu_hours_per_step_uses_the_step(tmp_path):
    df = read_log(_mixed(tmp_path), gpu_hours_per_step=0.5)
    np.testing.assert_allclose(df["compute"], [0.5, 1.0, 1.5, 2.0])


def test_explicit_compute_wins_and_flops_stay_flops(tmp_path):
    df = read_log(_mixed(tmp_path), compute="total_flops")
    np.testing.assert_array_equal(df["compute"], [1e18, 2e18, 3e18, 4e18])
    assert df.attrs["compute_unit"] == "FLOPs"
    assert "explicit" in df.attrs["compute"]["how"]


def test_a_flops_column_is_detected_when_nothing_else_is_there(tmp_path):
    pd.DataFrame({"step": [1, 2], "flops": [1e15, 2e15], "reward": [0.1, 0.2]}).to_csv(
        tmp_path / "run.csv", index=False
    )
    df = read_log(tmp_path / "run.csv")
    assert df.attrs["compute_unit"] == "FLOPs"
    np.testing.assert_array_equal(df["compute"], [1e15, 2e15])


def test_explicit_seconds_column_needs_gpus(tmp_path):
    with pytest.raises(RLCurvesError, match="gpus="):
        read_log(_mixed(tmp_path), compute="_runtime")
    df = read_log(_mixed(tmp_path), compute="_runtime", gpus=2)
    np.testing.assert_allclose(df["compute"], [2, 4, 6, 8])


def test_gpus_and_gpu_hours_per_step_together_are_refused(tmp_path):
    with pytest.raises(RLCurvesError, match="not both"):
        read_log(_mixed(tmp_path), gpus=8, gpu_hours_per_step=0.1)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "eight"])
def test_gpus_must_be_a_positive_number(tmp_path, bad):
    with pytest.raises(RLCurvesError, match="gpus"):
        read_log(_mixed(tmp_path), gpus=bad)


def test_no_compute_axis_says_what_to_pass(tmp_path):
    pd.DataFrame({"step": [1, 2], "_runtime": [10, 20], "reward": [0.1, 0.2]}).to_csv(
        tmp_path / "run.csv", index=False
    )
    with pytest.raises(RLCurvesError) as info:
        read_log(tmp_path / "run.csv")
    message = str(info.value)
    assert "run.csv" in message
    assert "gpus=" in message and "'_runtime'" in message
    assert "gpu_hours_per_step=" in message and "'step'" in message
    assert info.value.details["columns"] == ["step", "_runtime", "reward"]


def test_trl_without_compute_suggests_the_per_step_cost_from_its_summary():
    with pytest.raises(RLCurvesError, match=r"train_runtime=18000s over 200 steps: 0\.025 hours"):
        read_log(DATA / "trl" / "qwen-grpo")


def test_verl_without_gpus_points_at_its_step_timings():
    with pytest.raises(
        RLCurvesError, match=r"gpus=<number of GPUs> to use elapsed time 'timing_s/step'"
    ):
        read_log(DATA / "verl" / "gsm8k_grpo.jsonl")


def test_runs_in_different_units_are_refused(tmp_path):
    pd.DataFrame({"step": [1, 2], "flops": [1e15, 2e15], "reward": [0.1, 0.2]}).to_csv(
        tmp_path / "flops.csv", index=False
    )
    with pytest.raises(RLCurvesError, match="different units"):
        read_logs([tmp_path / "flops.csv", DATA / "reference.csv"])


# --- choosing columns ----------------------------------------------------------------------------


def test_explicit_reward_wins_over_detection():
    df = read_log(DATA / "csv" / "run_a.csv", reward="train_reward")
    assert len(df) == 200
    assert df.attrs["reward"] == {"column": "train_reward", "how": "explicit"}


def test_two_equal_reward_candidates_are_not_guessed(tmp_path):
    pd.DataFrame(
        {"step": [1], "gpu_hours": [1.0], "eval_reward": [0.1], "val_reward": [0.2]}
    ).to_csv(tmp_path / "run.csv", index=False)
    with pytest.raises(RLCurvesError, match="several columns could be the reward") as info:
        read_log(tmp_path / "run.csv")
    assert info.value.details["candidates"] == ["eval_reward", "val_reward"]
    df = read_log(tmp_path / "run.csv", reward="val_reward")
    assert df["reward"].item() == 0.2


def test_verl_with_two_validation_sets_asks_which(tmp_path):
    records = [
        {
            "step": 1,
            "data": {
                "timing_s/step": 10,
                "val-core/a/reward/mean@1": 0.1,
                "val-core/b/reward/mean@1": 0.2,
            },
        },
    ]
    path = write_jsonl(tmp_path / "exp.jsonl", records)
    with pytest.raises(RLCurvesError, match="val-core/a/reward/mean@1"):
        read_log(path, gpus=1)
    assert read_log(path, gpus=1, reward="val-core/b/reward/mean@1")["reward"].item() == 0.2


# --- bad input -----------------------------------------------------------------------------------


def test_missing_reward_column_names_file_columns_and_fix():
    with pytest.raises(RLCurvesError) as info:
        read_log(DATA / "reference.csv", reward="pass@1")
    message = str(info.value)
    assert "reference.csv" in message
    assert "['step', 'gpu_hours', 'val_reward']" in message
    assert "reward=" in message
    assert info.value.details["column"] == "pass@1"


def test_missing_compute_column_names_file_and_columns():
    with pytest.raises(RLCurvesError, match=r"no column 'hours'.*compute='<one of these>'"):
        read_log(DATA / "reference.csv", compute="hours")


def test_no_recognizable_reward_asks_for_reward(tmp_path):
    pd.DataFrame({"step": [1], "gpu_hours": [1.0], "score": [0.3]}).to_csv(
        tmp_path / "run.csv", index=False
    )
    with pytest.raises(
        RLCurvesError, match=r"could be the reward: \['score'\]. Pass reward='score'"
    ):
        read_log(tmp_path / "run.csv")


def test_unknown_format():
    with pytest.raises(RLCurvesError, match="unknown format 'excel'"):
        read_log(DATA / "reference.csv", format="excel")


def test_unknown_file_kind(tmp_path):
    (tmp_path / "run.xyz").write_text("step,gpu_hours,reward\n1,1,0.5\n")
    with pytest.raises(RLCurvesError, match="pass format="):
        read_log(tmp_path / "run.xyz")
    df = read_log(tmp_path / "run.xyz", format="csv")
    assert df.attrs["format_how"] == "explicit"
    assert df["reward"].item() == 0.5


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.csv", ""),
        ("run.jsonl", "\n\n"),
        ("run.json", ""),
        ("run.tsv", "step\tgpu_hours\treward\n"),
    ],
)
def test_empty_files_are_errors(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(RLCurvesError, match=name):
        read_log(tmp_path / name)


def test_no_usable_rows(tmp_path):
    (tmp_path / "run.csv").write_text("step,gpu_hours,val_reward\n1,1,nan\n2,2,\n")
    with pytest.raises(RLCurvesError, match="no usable rows") as info:
        read_log(tmp_path / "run.csv")
    assert info.value.details["dropped"] == {"drop_missing_reward": 1, "drop_nonfinite_reward": 1}


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(RLCurvesError, match="no such file"):
        read_log(tmp_path / "nope.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RLCurvesError, match="no logs found"):
        read_log(tmp_path / "empty")


def test_verl_format_on_flat_records_is_an_error(tmp_path):
    path = write_jsonl(tmp_path / "run.jsonl", [{"step": 1, "reward": 0.1}])
    with pytest.raises(RLCurvesError, match="not a verl file-logger record"):
        read_log(path, format="verl")


def test_tensorboard_missing_package_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    with pytest.raises(RLCurvesError, match="pip install tensorboard"):
        read_log(DATA / "tensorboard" / "grpo_run", gpu_hours_per_step=0.2)


# --- live W&B (the wandb package is optional: a stand-in API object) ---------------------------


class _FakeRun:
    def __init__(self):
        self.name = "brisk-pond-7"
        self.config = {"lr": 1e-6}

    def scan_history(self, keys=None):
        for s in range(1, 21):
            row = {"_step": s, "_runtime": 90.0 * s, "train/reward": 0.1}
            if s % 10 == 0:
                row["eval/reward"] = s / 100
            yield row


class _FakeApi:
    def run(self, path):
        assert path == "team/proj/abc123"
        return _FakeRun()


def test_read_wandb_run_through_the_api():
    df = read_wandb_run("team/proj/abc123", api=_FakeApi(), gpus=8)
    np.testing.assert_allclose(df["compute"], [10 * 90 * 8 / 3600, 20 * 90 * 8 / 3600])
    np.testing.assert_allclose(df["reward"], [0.1, 0.2])
    assert df.attrs["run"] == "brisk-pond-7"
    assert df.attrs["format"] == "wandb-api"
    assert df.attrs["meta"]["wandb_config"] == {"lr": 1e-6}


def test_read_wandb_run_without_wandb_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RLCurvesError, match="pip install wandb"):
        read_wandb_run("team/proj/abc123")


# --- odd but real inputs ---------------------------------------------------------------


def test_json_strings_nan_and_infinity_are_written_non_finite_values(tmp_path):
    rows = [
        {"step": 1, "gpu_hours": 1, "reward": 0.1},
        {"step": 2, "gpu_hours": 2, "reward": "NaN"},
        {"step": 3, "gpu_hours": 3, "reward": "Infinity"},
        {"step": 4, "gpu_hours": 4, "reward": 0.4},
    ]
    df = read_log(write_jsonl(tmp_path / "run.jsonl", rows))
    entry = next(e for e in df.attrs["cleaning"] if e["step"] == "drop_nonfinite_reward")
    assert (entry["nan"], entry["inf"]) == (1, 1)
    np.testing.assert_array_equal(df["reward"], [0.1, 0.4])


def test_a_trainer_state_cut_short_is_named_as_such(tmp_path):
    text = (DATA / "trl" / "qwen-grpo" / "checkpoint-200" / "trainer_state.json").read_text()
    (tmp_path / "trainer_state.json").write_text(text[: len(text) // 2])
    with pytest.raises(RLCurvesError, match="not valid JSON"):
        read_log(tmp_path / "trainer_state.json", gpu_hours_per_step=0.2)


def test_explicit_formats_that_do_not_fit_the_file_are_errors():
    with pytest.raises(RLCurvesError, match="W&B panel export"):
        read_log(DATA / "reference.csv", format="wandb-csv")
    with pytest.raises(RLCurvesError, match="log_history"):
        read_log(DATA / "wandb" / "history.json", format="trl")


def test_describe_log_tells_what_was_chosen_and_cleaned():
    from rlcurves.logs import describe_log

    text = describe_log(read_log(DATA / "pipelinerl" / "exp_math", gpus=8))
    assert "reward: 'test_success_mean'" in text
    assert "elapsed seconds 'time_since_start' x gpus=8" in text
    assert "repair_compute_restart: 50 rows" in text and "['step 151']" in text
    assert "kept 20 of 220 records" in text
    with pytest.raises(RLCurvesError, match="no read_log attrs"):
        describe_log(pd.DataFrame({"compute": [1.0], "reward": [0.5]}))


def test_one_run_name_for_a_file_of_several_runs_is_refused():
    with pytest.raises(RLCurvesError, match="holds several"):
        read_log(DATA / "wandb" / "panel_eval_reward.csv", gpu_hours_per_step=0.2, run="mine")


def test_a_reward_column_with_text_names_the_bad_value(tmp_path):
    """A text cell among numbers drops its row, named with its text, with a warning (issue 39);
    a column of text only is no reward, and the error shows its first value."""
    (tmp_path / "run.csv").write_text("step,gpu_hours,val_reward\n1,1,0.1\n2,2,0.2 (best)\n")
    for kws in ({"reward": "val_reward"}, {}):
        with pytest.warns(DataRepairWarning, match=r"step 2 \('0\.2 \(best\)'\)"):
            df = read_log(tmp_path / "run.csv", **kws)
        assert df["reward"].tolist() == [0.1]
        (entry,) = [e for e in df.attrs["cleaning"] if e["step"] == "drop_text_reward"]
        assert entry["rows"] == 1 and "'val_reward' holds text" in entry["detail"]
    (tmp_path / "text.csv").write_text("step,gpu_hours,val_reward\n1,1,low\n2,2,high\n")
    with pytest.raises(RLCurvesError, match=r"holds no numbers \(first value: 'low'\)"):
        read_log(tmp_path / "text.csv", reward="val_reward")
    with pytest.raises(RLCurvesError, match=r"'val_reward' would be the reward but holds text"):
        read_log(tmp_path / "text.csv")


def test_read_log_takes_a_wandb_run_path(monkeypatch):
    import types

    fake = types.ModuleType("wandb")
    fake.Api = _FakeApi
    monkeypatch.setitem(sys.modules, "wandb", fake)
    df = read_logs(["wandb:team/proj/abc123", DATA / "recipe" / "cispo_small"], gpus=8)
    assert sorted(df["run"].unique()) == ["brisk-pond-7", "cispo_small"]
    assert df.attrs["runs"]["brisk-pond-7"]["source"] == "wandb:team/proj/abc123"


def test_an_explicit_column_of_another_unit_keeps_its_own_unit(tmp_path):
    rows = pd.DataFrame(
        {"step": [1, 2], "tokens": [1e6, 2e6], "compute": [0.5, 1.0], "reward": [0.1, 0.2]}
    )
    rows.to_csv(tmp_path / "run.csv", index=False)
    df = read_log(tmp_path / "run.csv", compute="tokens")
    assert df.attrs["compute_unit"] == "tokens (as logged)"
    np.testing.assert_array_equal(df["compute"], [1e6, 2e6])
    assert read_log(tmp_path / "run.csv", compute="compute").attrs["compute_unit"] == "GPU-hours"


def test_regression_a_reward_column_of_nulls_is_called_missing_not_text(tmp_path):
    # JSON lines whose reward is always null said the column "holds text (None)"
    lines = "".join(f'{{"step": {i}, "gpu_hours": {i}, "val_reward": null}}\n' for i in (1, 2))
    (tmp_path / "run.jsonl").write_text(lines)
    with pytest.raises(RLCurvesError, match=r"'val_reward' would be the reward but every value is"):
        read_log(tmp_path / "run.jsonl")
    with pytest.raises(RLCurvesError, match=r"holds no numbers \(every value is missing\)"):
        read_log(tmp_path / "run.jsonl", reward="val_reward")
