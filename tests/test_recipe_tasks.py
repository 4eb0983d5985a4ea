"""Tasks as a plug-in: the GSM8K-format grader and loader, user tasks, and runs end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import recipe_helpers

from recipe import cli
from recipe import train as T
from recipe.config import ConfigError
from recipe.tasks import Prompt, TaskError, load_task
from recipe.tasks.math import MathTask, final_answer, parse_number

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "gsm8k_tiny.jsonl"  # 12 problems written for these tests, GSM8K layout


@pytest.mark.parametrize(
    ("completion", "value"),
    [
        ("3 boxes of 4 is 12.\n#### 12", 12.0),
        ("first #### 5, no wait\n#### 7", 7.0),  # the last marker counts
        ("So the answer is \\boxed{42}.", 42.0),
        ("\\boxed{1} then \\boxed{3/4}", 0.75),
        ("#### $1,200.", 1200.0),
        ("#### -7 degrees", -7.0),
        ("the answer is 12", None),  # no marker: no answer
        ("#### twelve", None),
    ],
)
def test_final_answer(completion, value):
    assert final_answer(completion) == value


def test_math_reward_compares_numbers_with_a_tolerance():
    task = MathTask(FIXTURE, n_val=2, seed=0)
    p = Prompt("q", "1.5")
    assert task.reward(p, "#### 1.5") == 1.0
    assert task.reward(p, "#### 1.50") == 1.0
    assert task.reward(p, "\\boxed{3/2}") == 1.0
    assert task.reward(p, "#### 1.5000001") == 1.0  # within 1e-6 relative
    assert task.reward(p, "#### 1.501") == 0.0
    assert task.reward(p, "1.5") == 0.0
    assert parse_number("1,000") == 1000.0


def test_math_split_jsonl_and_parquet_agree(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "gsm.parquet")
    a = MathTask(FIXTURE, n_val=3, seed=1)
    b = MathTask(tmp_path / "gsm.parquet", n_val=3, seed=1)
    assert a.train_prompts() == b.train_prompts() and a.val_prompts() == b.val_prompts()
    assert len(a.train_prompts()) == 9 and len(a.val_prompts()) == 3
    assert not set(a.train_prompts()) & set(a.val_prompts())
    assert {p.answer for p in a.train_prompts() + a.val_prompts()} >= {"12", "-7", "1.5"}
    assert all(p.text.endswith('after "####".') for p in a.train_prompts())
    # a separate validation file
    c = MathTask(FIXTURE, tmp_path / "gsm.parquet", n_val=4, seed=0)
    assert len(c.train_prompts()) == 12 and len(c.val_prompts()) == 4


def test_bad_task_data_is_refused_with_what_to_do(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(TaskError, match="####"):
        MathTask(bad, n_val=0, seed=0)
    with pytest.raises(TaskError, match="does not exist"):
        MathTask(tmp_path / "missing.jsonl", n_val=1, seed=0)
    with pytest.raises(TaskError, match="leaves none"):
        MathTask(FIXTURE, n_val=12, seed=0)
    with pytest.raises(ConfigError, match="task_data"):
        recipe_helpers.hf_cfg(tmp_path, task="gsm8k")
    with pytest.raises(ConfigError, match="init"):
        recipe_helpers.C.from_dict({"task": "gsm8k", "task_data": str(FIXTURE)})


def test_user_task_is_loaded_from_a_file_or_module(tmp_path):
    cfg = recipe_helpers.hf_cfg(tmp_path)
    task = load_task(cfg)
    assert type(task).__name__ == "DigitTask" and len(task.val_prompts()) == 4
    assert task.reward(task.train_prompts()[0], "ab3") == 1.0
    for spec, match in [
        ("nonexistent_module_xyz:Task", "importing"),
        (f"{recipe_helpers.DIGIT_TASK}:Missing", "no attribute"),
        ("missing_file.py:Task", "does not exist"),
    ]:
        with pytest.raises(TaskError, match=match):
            load_task(recipe_helpers.hf_cfg(tmp_path, task=spec))
    # a name neither built in nor 'module:Class' is refused with the config, before the task
    with pytest.raises(ConfigError, match="'no_colon_here' is not a task"):
        recipe_helpers.hf_cfg(tmp_path, task="no_colon_here")
    with pytest.raises(TaskError, match="not built in"):  # a Config built without validation
        load_task(dataclasses.replace(cfg, task="no_colon_here"))


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_gsm8k_task_runs_end_to_end(tmp_path, kind):
    folder = recipe_helpers.build_hf_folder(kind, tmp_path / "model")
    cfg = recipe_helpers.hf_cfg(
        folder, task="gsm8k", task_data=str(FIXTURE), val_prompts=3, steps=2, eval_every=2,
        checkpoint_every=2, zero_variance_filter=False,
    )  # fmt: skip
    T.run(cfg, tmp_path / "run")
    rows = recipe_helpers.read_log(tmp_path / "run" / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2]
    assert [r["val_prompts"] for r in rows if r["kind"] == "eval"] == [3, 3]
    # a random model solves nothing; the grader itself is checked above and here through score
    s = T.setup(cfg, tmp_path / "run")
    good = s.tokenizer(f"so\n#### {s.train_prompts[0].answer}", add_special_tokens=False)
    from recipe.generate import Completion

    done = Completion(good["input_ids"] + [s.stop_ids[-1]], [0.0] * 99, [0] * 99, False)
    cut = Completion(good["input_ids"], [0.0] * 99, [0] * 99, True)
    assert T.score(s.task, s.tokenizer, s.stop_ids, done, s.train_prompts[0]) == 1.0
    assert T.score(s.task, s.tokenizer, s.stop_ids, cut, s.train_prompts[0]) == 0.0


def test_cli_reports_a_broken_user_task(tmp_path):
    folder = recipe_helpers.build_hf_folder("qwen2", tmp_path / "model")
    with pytest.raises(SystemExit, match=r"config error: task .*no attribute"):
        cli.main([
            "--out", str(tmp_path / "run"), "--set", f"init={folder}",
            "--set", f"task={recipe_helpers.DIGIT_TASK}:Nope",
        ])  # fmt: skip


def test_regression_a_malformed_task_data_file_is_a_task_error(tmp_path):
    """task_data that is a JSON array or lines of non-objects ended in AttributeError ('list'
    object has no attribute 'get'), a binary file in UnicodeDecodeError, a broken .parquet in
    pyarrow's ArrowInvalid, all tracebacks; each is a TaskError (the CLI's "config error: ...")
    naming the file and the format it takes."""
    row = {"question": "1+1?", "answer": "so #### 2"}
    cases = {
        "array.json": (json.dumps([row, row]) + "\n", "row 1 is a JSON list, not an object"),
        "strings.jsonl": ('"hello"\n', "row 1 is a JSON str, not an object"),
        "binary.jsonl": (b"\xff\xfe\x00\x81" * 50, "is not UTF-8 text"),
        "broken.parquet": (b"PAR1 not really" * 10, "cannot be read as Parquet"),
    }
    for name, (content, match) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(TaskError, match=match):
            MathTask(path, n_val=0, seed=0)
    with pytest.raises(TaskError, match=r"is a folder; name a \.jsonl or \.parquet file"):
        MathTask(tmp_path, n_val=0, seed=0)
    folder = recipe_helpers.build_hf_folder("qwen2", tmp_path / "model")
    with pytest.raises(SystemExit, match=r"config error: .*array\.json: row 1 is a JSON list"):
        cli.main([
            "--out", str(tmp_path / "run"), "--set", f"init={folder}", "--set", "task=gsm8k",
            "--set", f"task_data={tmp_path / 'array.json'}",
        ])  # fmt: skip


def test_regression_prompts_per_step_over_a_tasks_training_prompts_is_a_config_error(tmp_path):
    """A gsm8k task_data or a user task with fewer training prompts than prompts_per_step (the
    default 32 with a small file) trained on batches that held some prompts twice or more,
    without a word; it is a config error once the task is loaded, before the model is."""
    cfg_path = tmp_path / "c.yaml"
    for spec, extra, train in (
        ("gsm8k", {"task_data": str(FIXTURE), "val_prompts": 3}, 9),
        (f"{recipe_helpers.DIGIT_TASK}:DigitTask", {}, 6),
    ):
        cfg = recipe_helpers.hf_cfg(tmp_path / "no-model", task=spec, **extra)
        cfg_path.write_text(recipe_helpers.C.to_yaml(cfg))
        with pytest.raises(SystemExit) as err:
            cli.main(["--config", str(cfg_path), "--out", str(tmp_path / "run"),
                      "--set", f"prompts_per_step={train + 1}"])  # fmt: skip
        assert str(err.value).startswith(
            f"config error: config key 'prompts_per_step' = {train + 1} exceeds the task's "
            f"{train} training prompts (task={spec})"
        )
        assert f"lower prompts_per_step to at most {train}, or give the task more" in str(err.value)
        assert not (tmp_path / "run" / "log.jsonl").exists()
