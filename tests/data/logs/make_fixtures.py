"""Write the sample training logs of tests/data/logs/ (python tests/data/logs/make_fixtures.py).

Every fixture encodes one made-up run, the same in every format, so that a fit from each must
match the fit from ``reference.csv``: 200 steps of 90 s on 8 GPUs (0.2 GPU-hours per step), a
validation reward every 10 steps following a ScaleRL sigmoid (A=0.7, B=1.5, C_mid=12 GPU-hours,
R0=0.1) plus seeded noise, and a training reward every step. Each format also carries the
quirks its tool really produces (resumed runs, restarted clocks, sparse evaluation), placed so
that cleaning them recovers the reference exactly. Nothing here is copied from a real run; the
record shapes follow each tool's documented format (see README.md beside this file).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
STEPS = np.arange(1, 201)
EVAL_EVERY = 10
SECONDS_PER_STEP = 90.0
GPUS = 8
GPU_HOURS_PER_STEP = SECONDS_PER_STEP * GPUS / 3600.0  # 0.2
A, B, C_MID, R0 = 0.7, 1.5, 12.0, 0.1
T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC, start of the made-up run


def sigmoid(c: np.ndarray) -> np.ndarray:
    return R0 + (A - R0) / (1.0 + (C_MID / c) ** B)


def curves(seed: int = 20260101, shift: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train rows per step, eval rows every EVAL_EVERY steps) of the made-up run."""
    rng = np.random.default_rng(seed)
    gpu_hours = np.round(STEPS * GPU_HOURS_PER_STEP, 6)
    train = pd.DataFrame(
        {
            "step": STEPS,
            "gpu_hours": gpu_hours,
            "wall_seconds": STEPS * SECONDS_PER_STEP,
            "train_reward": np.round(
                sigmoid(gpu_hours) + shift + rng.normal(0, 0.03, STEPS.size), 6
            ),
            "loss": np.round(0.5 / np.sqrt(STEPS) + rng.normal(0, 0.01, STEPS.size), 6),
        }
    )
    eval_steps = STEPS[STEPS % EVAL_EVERY == 0]
    eval_hours = np.round(eval_steps * GPU_HOURS_PER_STEP, 6)
    evals = pd.DataFrame(
        {
            "step": eval_steps,
            "gpu_hours": eval_hours,
            "wall_seconds": eval_steps * SECONDS_PER_STEP,
            "val_reward": np.round(
                sigmoid(eval_hours) + shift + rng.normal(0, 0.01, eval_steps.size), 6
            ),
        }
    )
    return train, evals


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def reference(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """The equivalent CSV: one row per evaluation, compute in GPU-hours."""
    evals[["step", "gpu_hours", "val_reward"]].to_csv(HERE / "reference.csv", index=False)


def flat_tables(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """CSV / TSV / Parquet / flat JSONL: train and eval rows interleaved, eval sparse."""
    merged = train.merge(evals[["step", "val_reward"]], on="step", how="left")
    merged.to_csv(HERE / "csv" / "run_a.csv", index=False, na_rep="")
    # TSV: as CSV, plus a NaN and an inf validation value that the cleaning must drop.
    tsv = merged.copy()
    tsv["val_reward"] = tsv["val_reward"].astype(object)
    tsv.loc[tsv["step"] == 5, "val_reward"] = "nan"
    tsv.loc[tsv["step"] == 15, "val_reward"] = "inf"
    tsv.to_csv(HERE / "tsv" / "run_a.tsv", index=False, sep="\t", na_rep="")
    # Parquet: nulls where nothing was evaluated, and one written NaN at step 25.
    parquet = merged.copy()
    parquet.loc[parquet["step"] == 25, "val_reward"] = np.nan
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {name: pa.array(parquet[name].to_numpy()) for name in parquet.columns}
    present = merged["val_reward"].notna().to_numpy() | (parquet["step"] == 25).to_numpy()
    columns["val_reward"] = pa.array(
        parquet["val_reward"].to_numpy(), mask=~present, type=pa.float64()
    )
    pq.write_table(pa.table(columns), HERE / "parquet" / "run_a.parquet")
    # Flat JSONL (a hand-rolled logger): eval as its own record at the same step.
    records = []
    for row in train.itertuples(index=False):
        records.append(
            {"step": int(row.step), "gpu_hours": row.gpu_hours, "train_reward": row.train_reward}
        )
        if row.step % EVAL_EVERY == 0:
            value = float(evals.loc[evals["step"] == row.step, "val_reward"].iloc[0])
            records.append({"step": int(row.step), "gpu_hours": row.gpu_hours, "val_reward": value})
    write_jsonl(HERE / "jsonl" / "run_a.jsonl", records)


def verl(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """verl's file logger: {"step": N, "data": {...}} per step; validation under val-core/.

    The run is resumed from the step-100 checkpoint after crashing at step 112: steps 101-112
    are written twice, the first time with wrong values that the later write must replace.
    """
    by_step = evals.set_index("step")["val_reward"]
    records = []

    def record(step: int, bias: float = 0.0) -> dict:
        row = train.iloc[step - 1]
        data = {
            "training/global_step": step,
            "training/epoch": 0,
            "critic/score/mean": float(row.train_reward) + bias,
            "actor/pg_loss": float(row.loss),
            "timing_s/step": SECONDS_PER_STEP,
            "timing_s/gen": SECONDS_PER_STEP * 0.6,
            "perf/total_num_tokens": 65536,
            "perf/time_per_step": SECONDS_PER_STEP,
        }
        if step in by_step.index:
            data["val-core/math/reward/mean@1"] = float(by_step[step]) + bias
        return {"step": step, "data": data}

    records += [record(s) for s in range(1, 101)]
    records += [record(s, bias=-0.3) for s in range(101, 113)]  # lost when the job crashed
    records += [record(s) for s in range(101, 201)]
    write_jsonl(HERE / "verl" / "gsm8k_grpo.jsonl", records)


def wandb_history(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """W&B run.history(): one record per log call with _step, _runtime, _timestamp.

    Saved two ways users save it: a JSON list of records (``to_json(orient='records')``) and
    ``to_csv()`` (which adds the unnamed index column).
    """
    by_step = evals.set_index("step")["val_reward"]
    rows = []
    for row in train.itertuples(index=False):
        record = {
            "_step": int(row.step),
            "_runtime": float(row.wall_seconds),
            "_timestamp": T0 + float(row.wall_seconds),
            "train/reward": float(row.train_reward),
            "train/global_step": int(row.step),
            "eval/reward": float(by_step[row.step]) if row.step in by_step.index else None,
        }
        rows.append(record)
    frame = pd.DataFrame(rows)
    (HERE / "wandb").mkdir(parents=True, exist_ok=True)
    (HERE / "wandb" / "history.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    frame.to_csv(HERE / "wandb" / "history_export.csv")


def wandb_panel(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """A W&B line-plot panel exported to CSV: x axis 'Step', then per run the metric, __MIN, __MAX.

    Two runs: 'run-a' is the reference; 'run-b' ran half as long, 0.05 lower.
    """
    _, evals_b = curves(seed=7, shift=-0.05)
    evals_b = evals_b[evals_b["step"] <= 100]
    steps = sorted(set(evals["step"]) | set(evals_b["step"]))
    path = HERE / "wandb" / "panel_eval_reward.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = ["Step"]
        for run in ("run-a", "run-b"):
            header += [
                f"{run} - eval/reward",
                f"{run} - eval/reward__MIN",
                f"{run} - eval/reward__MAX",
            ]
        writer.writerow(header)
        a = evals.set_index("step")["val_reward"]
        b = evals_b.set_index("step")["val_reward"]
        for step in steps:
            row = [step]
            for series in (a, b):
                value = f"{series[step]:.6f}" if step in series.index else ""
                row += [value, value, value]
            writer.writerow(row)


def tensorboard(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """Two event files of one run: the job died after step 120 and resumed from step 100.

    First file: steps 1-120, where 101-120 are 0.2 too low (work lost in the crash). Second
    file, opened 1000 s after the first stopped: steps 101-200 with the reference values.
    'eval/reward' is written the TF2 way (a rank-0 tensor, the 'scalars' plugin named in its
    first event only), 'train/reward' the PyTorch way (simple_value). Files are framed with
    TensorBoard's own RecordWriter so that the wall times are the made-up ones.
    """
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter
    from tensorboard.util import tensor_util

    folder = HERE / "tensorboard" / "grpo_run"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    by_step = evals.set_index("step")["val_reward"]

    def write_file(start: float, first: int, last: int, lost_from: int, host: str) -> None:
        events = [event_pb2.Event(wall_time=start, file_version="brain.Event:2")]
        for step in range(first, last + 1):
            bias = -0.2 if step >= lost_from else 0.0
            wall = start + (step - first + 1) * SECONDS_PER_STEP
            train_value = float(train.iloc[step - 1].train_reward) + bias
            values = [summary_pb2.Summary.Value(tag="train/reward", simple_value=train_value)]
            if step in by_step.index:
                value = summary_pb2.Summary.Value(
                    tag="eval/reward",
                    tensor=tensor_util.make_tensor_proto(np.float32(by_step[step] + bias)),
                )
                if step == EVAL_EVERY * (first // EVAL_EVERY + 1) or step == EVAL_EVERY:
                    value.metadata.plugin_data.plugin_name = "scalars"
                values.append(value)
            summary = summary_pb2.Summary(value=values)
            events.append(event_pb2.Event(wall_time=wall, step=step, summary=summary))
        path = folder / f"events.out.tfevents.{int(start)}.{host}"
        with path.open("wb") as handle:
            writer = RecordWriter(handle)
            for event in events:
                writer.write(event.SerializeToString())
            writer.flush()

    write_file(T0, 1, 120, lost_from=101, host="node1.1.0")
    write_file(T0 + 120 * SECONDS_PER_STEP + 1000.0, 101, 200, lost_from=10**9, host="node1.2.0")


def trl(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """TRL GRPOTrainer output folder: checkpoint-100/ and checkpoint-200/ trainer_state.json.

    log_history: a training entry every 10 steps (reward, loss, ...), an eval entry every 10
    steps (eval_reward, eval_loss, eval_runtime) and the end-of-training summary.
    """
    folder = HERE / "trl" / "qwen-grpo"
    shutil.rmtree(folder, ignore_errors=True)
    by_step = evals.set_index("step")["val_reward"]

    def history(last: int) -> list[dict]:
        entries = []
        for step in range(10, last + 1, 10):
            row = train.iloc[step - 1]
            entries.append(
                {
                    "clip_ratio": 0.0,
                    "completions/mean_length": 180.5,
                    "epoch": round(step / 200, 4),
                    "grad_norm": 0.31,
                    "kl": 0.002,
                    "learning_rate": 1e-6,
                    "loss": float(row.loss),
                    "num_tokens": 65536.0 * step,
                    "reward": float(row.train_reward),
                    "reward_std": 0.2,
                    "rewards/accuracy_reward/mean": float(row.train_reward),
                    "step": step,
                }
            )
            entries.append(
                {
                    "epoch": round(step / 200, 4),
                    "eval_loss": 0.01,
                    "eval_reward": float(by_step[step]),
                    "eval_runtime": 41.2,
                    "eval_samples_per_second": 12.1,
                    "eval_steps_per_second": 0.8,
                    "step": step,
                }
            )
        return entries

    for last in (100, 200):
        entries = history(last)
        if last == 200:
            entries.append(
                {
                    "epoch": 1.0,
                    "step": 200,
                    "total_flos": 0.0,
                    "train_loss": 0.02,
                    "train_runtime": 200 * SECONDS_PER_STEP,
                    "train_samples_per_second": 5.7,
                    "train_steps_per_second": 0.011,
                }
            )
        state = {
            "best_metric": None,
            "best_model_checkpoint": None,
            "epoch": last / 200,
            "eval_steps": 10,
            "global_step": last,
            "is_hyper_param_search": False,
            "is_local_process_zero": True,
            "is_world_process_zero": True,
            "log_history": entries,
            "logging_steps": 10,
            "max_steps": 200,
            "num_input_tokens_seen": 0,
            "num_train_epochs": 1,
            "save_steps": 100,
            "stateful_callbacks": {},
            "total_flos": 0.0,
            "train_batch_size": 8,
            "trial_name": None,
            "trial_params": None,
        }
        path = folder / f"checkpoint-{last}" / "trainer_state.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2), encoding="utf-8")


def pipelinerl(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """A PipelineRL experiment folder: streams/stats and streams/stats_test (file backend).

    Train stats are published once per trainer_model_version, with time_since_start; the actor
    restarted after version 150, so time_since_start starts again from 0 at version 151. Test
    stats (every 10 versions) carry test_success_mean and trainer_model_version only.
    """
    folder = HERE / "pipelinerl" / "exp_math"
    shutil.rmtree(folder, ignore_errors=True)
    by_step = evals.set_index("step")["val_reward"]
    stats, tests = [], []
    for row in train.itertuples(index=False):
        version = int(row.step)
        restart = 150 * SECONDS_PER_STEP if version > 150 else 0.0
        stats.append(
            {
                "reward_mean": float(row.train_reward),
                "success_mean": float(row.train_reward),
                "latency_mean": 12.5,
                "published_samples": 512 * version,
                "problem_queue_size": 64,
                "result_queue_size": 3,
                "finished_groups": 32 * version,
                "trainer_model_version": version,
                "time_since_start": float(row.wall_seconds) - restart,
            }
        )
        if version in by_step.index:
            tests.append(
                {
                    "test_reward_mean": float(by_step[version]),
                    "test_success_mean": float(by_step[version]),
                    "test_latency_mean": 9.0,
                    "trainer_model_version": version,
                }
            )
    write_jsonl(folder / "streams" / "stats" / "0" / "0" / "0.jsonl", stats)
    write_jsonl(folder / "streams" / "stats_test" / "0" / "0" / "0.jsonl", tests)


def recipe(train: pd.DataFrame, evals: pd.DataFrame) -> None:
    """The recipe trainer's run folder: log.jsonl (train and eval records) and config.yaml."""
    folder = HERE / "recipe" / "cispo_small"
    shutil.rmtree(folder, ignore_errors=True)
    by_step = evals.set_index("step")["val_reward"]
    records = []
    for row in train.itertuples(index=False):
        step = int(row.step)
        records.append(
            {
                "kind": "train",
                "step": step,
                "gpu_hours": float(row.gpu_hours),
                "wall_seconds": float(row.wall_seconds),
                "samples": 384 * step,
                "tokens": 98304 * step,
                "train_reward": float(row.train_reward),
                "loss": float(row.loss),
            }
        )
        if step in by_step.index:
            records.append(
                {
                    "kind": "eval",
                    "step": step,
                    "gpu_hours": float(row.gpu_hours),
                    "wall_seconds": float(row.wall_seconds),
                    "val_pass_rate": float(by_step[step]),
                    "val_prompts": 256,
                    "val_samples_per_prompt": 4,
                }
            )
    write_jsonl(folder / "log.jsonl", records)
    (folder / "config.yaml").write_text(
        "loss: cispo\nsteps: 200\ngpus: 8\nseed: 0\n", encoding="utf-8"
    )


def glitches() -> None:
    """The bundled simulated run with two compute values out of line (a clock glitch, not a
    restart): rows 50-51 (steps 5000, 5100) logged 3000 and 2000 GPU-hours instead of 10,000 and
    10,200. Read as a restart, every later row was shifted by 12,800 GPU-hours (issue 17); and a
    wide table: one reward column per model, as a W&B or spreadsheet export has it."""
    source = HERE.parents[2] / "rlcurves" / "data" / "simulated_scalerl_8b.csv"
    run = pd.read_csv(source, comment="#")
    run.loc[[50, 51], "gpu_hours"] = [3000.0, 2000.0]
    (HERE / "glitch").mkdir(parents=True, exist_ok=True)
    run.to_csv(HERE / "glitch" / "swapped_pair.csv", index=False)
    rng = np.random.default_rng(17)
    steps = np.arange(0, 2001, 50)
    compute = steps * 4.0  # GPU-hours
    wide = {"Step": steps, "gpu_hours": compute}
    for name, a, b, c_mid in (
        ("14b", 0.72, 1.9, 2500),
        ("8b", 0.61, 1.9, 2542),
        ("4b", 0.52, 1.7, 2700),
    ):
        clean = 0.3 + (a - 0.3) / (1 + (c_mid / np.maximum(compute, 1e-9)) ** b)
        wide[name] = np.round(clean + rng.normal(0, 0.008, steps.size), 5)
    (HERE / "wide").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(wide).to_csv(HERE / "wide" / "models.csv", index=False)


def main() -> None:
    train, evals = curves()
    for sub in ("csv", "tsv", "parquet", "jsonl", "verl", "wandb"):
        (HERE / sub).mkdir(parents=True, exist_ok=True)
    reference(train, evals)
    flat_tables(train, evals)
    verl(train, evals)
    wandb_history(train, evals)
    wandb_panel(train, evals)
    tensorboard(train, evals)
    trl(train, evals)
    pipelinerl(train, evals)
    recipe(train, evals)
    glitches()


if __name__ == "__main__":
    main()
