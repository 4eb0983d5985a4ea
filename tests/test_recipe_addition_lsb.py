"""The LSB-first addition task, per-class validation columns, and the task-supplied warm-up."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import recipe_helpers
import torch

from recipe import config as C
from recipe import train as T
from recipe.tasks import Prompt, load_task
from recipe.tasks.addition import AdditionTask
from recipe.tasks.addition_lsb import (
    AdditionLSBTask,
    carries,
    lsb_answer,
    mix_weights,
    parse_prompt,
)

ROOT = Path(__file__).resolve().parents[1]


def test_answer_is_fixed_width_least_significant_digit_first():
    assert lsb_answer(347, 86, 3) == "3340"  # 433 -> "0433" -> reversed
    assert lsb_answer(999, 999, 3) == "8991"  # 1998, the carry into a fourth digit
    assert lsb_answer(500, 500, 3) == "0001"  # 1000: only the new digit is non-zero
    assert lsb_answer(0, 0, 3) == "0000"
    assert lsb_answer(7, 5, 1) == "21"
    task = AdditionLSBTask(3, 300, 50, seed=0)
    for p in task.train_prompts() + task.val_prompts():
        a, b, digits = parse_prompt(p.text)
        assert len(p.answer) == digits + 1 == 4
        assert int(p.answer[::-1]) == a + b


def test_reward_is_the_exact_answer_only():
    task = AdditionLSBTask(3, 10, 10, seed=0)
    p = Prompt("347+086=", "3340")
    assert task.reward(p, "3340") == 1.0
    for wrong in ("334", "0433", "433", "33400", " 3340", "3341"):
        assert task.reward(p, wrong) == 0.0


def test_carry_class_counts_the_columns_that_carry():
    assert carries(123, 456, 3) == 0
    assert carries(950, 50, 3) == 2  # tens carry, then the hundreds take it and carry
    assert carries(999, 1, 3) == 3
    assert carries(500, 500, 3) == 1
    assert carries(55, 45, 3) == 2
    # against an independent definition: column k carries iff the low k digits overflow
    for a in range(100):
        for b in range(100):
            want = sum((a % 10**k + b % 10**k) >= 10**k for k in (1, 2))
            assert carries(a, b, 2) == want
    task = AdditionLSBTask(3, 10, 10, seed=0)
    assert task.prompt_class(Prompt("950+050=", "0001")) == "carries_2"
    assert task.carry_class(Prompt("999+999=", "8991")) == 3
    with pytest.raises(ValueError, match="not an addition prompt"):
        parse_prompt("347-086=")


def test_split_is_the_old_tasks_split():
    old, new = AdditionTask(3, 300, 100, seed=4), AdditionLSBTask(3, 300, 100, seed=4)
    for a, b in (
        (old.train_prompts(), new.train_prompts()),
        (old.val_prompts(), new.val_prompts()),
    ):
        assert [p.text for p in a] == [p.text for p in b]
        assert [int(p.answer) for p in a] == [int(q.answer[::-1]) for q in b]
    # the old task's classes are the same carry counts
    assert [old.prompt_class(p) for p in old.val_prompts()] == [
        new.prompt_class(p) for p in new.val_prompts()
    ]


def test_warmup_examples_cover_every_class_from_the_pool_only():
    task = AdditionLSBTask(3, 2000, 200, seed=1)
    ex = task.warmup_examples(4000, seed=5)
    assert len(ex) == 4000 and ex == task.warmup_examples(4000, seed=5)
    assert ex != task.warmup_examples(4000, seed=6)
    train, val = set(task.train_prompts()), set(task.val_prompts())
    assert set(ex) <= train and not set(ex) & val
    counts = Counter(task.carry_class(p) for p in ex)
    # equal shares by default (binomial sd of a share: 0.007; the pool itself is 17/36/34/13%)
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(abs(counts[k] / 4000 - 0.25) < 0.03 for k in range(4))
    only = AdditionLSBTask(3, 2000, 200, seed=1, class_weights=[0, 0, 1, 3])
    counts = Counter(only.carry_class(p) for p in only.warmup_examples(4000, seed=5))
    assert set(counts) == {2, 3} and abs(counts[3] / 4000 - 0.75) < 0.03
    with pytest.raises(ValueError, match="4 non-negative shares"):
        AdditionLSBTask(3, 20, 20, seed=0, class_weights=[1, 1, 1])


def test_built_in_name_and_config():
    cfg = C.from_dict({"task": "addition_lsb", "train_prompts": 200, "val_prompts": 20})
    task = load_task(cfg)  # init: null is allowed, as for the old task
    assert isinstance(task, AdditionLSBTask)
    assert task.val_prompts() == AdditionLSBTask(3, 200, 20, seed=0).val_prompts()
    # warmup_mix: the share of problems that carry, split equally; the rest carry-free
    assert task.class_weights == pytest.approx([0.75, 0.25 / 3, 0.25 / 3, 0.25 / 3])
    assert mix_weights(0.43, 3) == pytest.approx([0.57, 0.43 / 3, 0.43 / 3, 0.43 / 3])
    demo = C.load(ROOT / "recipe" / "configs" / "cpu_demo_lsb.yaml")
    assert demo.task == "addition_lsb" and demo.init is None and C.inert_settings(demo) == []
    demo_task = load_task(demo)  # once: building the 20,000-problem split takes seconds
    shares = Counter(demo_task.carry_class(p) for p in demo_task.warmup_examples(7000, 1))
    assert abs(shares[0] / 7000 - 0.57) < 0.03 and all(shares[k] > 800 for k in (1, 2, 3))
    with pytest.raises(C.ConfigError, match="max_new_tokens"):
        C.from_dict({"task": "addition_lsb", "max_new_tokens": 4})


def _tiny_warm_up(tmp_path, name, **kw):
    from recipe.model import warm_up

    sizes = {"n_layer": 1, "hidden": 32, "heads": 4, "intermediate": 64, "batch": 16}
    kw.setdefault("final_per_class", 16)  # the trainer's 256 per class take seconds
    return warm_up(tmp_path / name, **sizes, **kw)


def test_warm_up_trains_on_the_tasks_examples_and_records_every_class(tmp_path, monkeypatch):
    import recipe.model as M

    seen: list[Prompt] = []
    loss = M.sft_step_loss

    def spy(model, tokenizer, examples):
        seen.extend(examples)
        return loss(model, tokenizer, examples)

    monkeypatch.setattr(M, "sft_step_loss", spy)
    task = AdditionLSBTask(3, 400, 20, seed=0)
    out = _tiny_warm_up(tmp_path, "w", steps=3, seed=2, task=task)
    assert seen == task.warmup_examples(3 * 16, seed=3)  # seed + 1, as the old path's problems
    record = json.loads((out / "warmup.json").read_text())
    assert record["examples"] == "task.warmup_examples" and record["mix"] is None
    assert sorted(record["final_by_class"]) == ["carries_0", "carries_1", "carries_2", "carries_3"]
    assert all(0 <= v <= 1 for v in record["final_by_class"].values())
    assert 0 <= record["final_pass_rate"] <= 1


# Fingerprint of the old warm-up path (carry-free problems + a 25% pool mix, target probes),
# computed on main before the task-supplied warm-up existed (sha256 of the weights there:
# 08fd0c31...; the cpu_demo config's full warm-up also hashed the same before and after,
# 36b178e6...). Entries [5, :4] of a few tensors after 6 steps: a change of the old data, its
# order or its loss moves them by ~1e-3; float noise across CPUs is ~1e-7.
OLD_WARM_UP = {
    "lm_head.weight": [-0.004069408401846886, 0.0025175248738378286, -0.02893422171473503,
                       -0.013642465695738792],
    "model.embed_tokens.weight": [0.03423592075705528, 0.004867524839937687,
                                  -0.016344357281923294, 0.024682382121682167],
    "model.layers.0.mlp.down_proj.weight": [-0.01930893212556839, 0.0026870432775467634,
                                            -0.015038341283798218, -0.002207835903391242],
    "model.layers.0.self_attn.q_proj.weight": [-0.013709034770727158, -0.015747195109725,
                                               -0.020996909588575363, 0.00846948754042387],
}  # fmt: skip


@pytest.mark.parametrize("with_task", [False, True])
def test_old_warm_up_is_unchanged(tmp_path, with_task):
    from safetensors.torch import load_file

    from recipe.tasks.addition import split_problems

    torch.set_num_threads(1)
    pool, _ = split_problems(3, 300, 10, seed=0)
    # the trainer passes the old task too: it has classes but no examples of its own
    task = AdditionTask(3, 300, 10, seed=0) if with_task else None
    out = _tiny_warm_up(
        tmp_path, "old", steps=6, mix=0.25, pool=pool, target=0.9, probe_every=3, seed=0,
        task=task,
    )  # fmt: skip
    weights = load_file(out / "model.safetensors")
    for name, want in OLD_WARM_UP.items():
        assert torch.allclose(weights[name][5, :4].double(), torch.tensor(want).double(), atol=1e-6)
    record = json.loads((out / "warmup.json").read_text())
    assert record["steps_done"] == 6 and [s for s, _ in record["probes"]] == [3, 6]
    assert ("final_by_class" in record) == with_task


@pytest.mark.parametrize("task", ["addition_lsb", "addition"])
def test_eval_rows_hold_one_column_per_class(tmp_path, init_dir, task):
    import rlcurves

    cfg = recipe_helpers.tiny_cfg(
        init_dir, task=task, val_prompts=40, steps=2, eval_every=2, checkpoint_every=2
    )
    T.run(cfg, tmp_path / "run")
    rows = [
        r for r in recipe_helpers.read_log(tmp_path / "run" / "log.jsonl") if r["kind"] == "eval"
    ]
    assert [r["step"] for r in rows] == [0, 2]
    val = load_task(cfg).val_prompts()
    counts = Counter(AdditionLSBTask(3, 1, 1, 0).prompt_class(p) for p in val)
    assert len(counts) == 4  # 40 prompts hold every class (seed 0)
    for r in rows:
        cols = {
            k[len("val_pass_rate/") :]: v for k, v in r.items() if k.startswith("val_pass_rate/")
        }
        assert set(cols) == set(counts)
        # the overall rate is unchanged: the prompt-weighted mean of the classes
        mean = sum(cols[k] * counts[k] for k in counts) / len(val)
        assert r["val_pass_rate"] == pytest.approx(mean, abs=1e-12)
    curve = rlcurves.read_log(tmp_path / "run")
    assert curve.attrs["reward"]["column"] == "val_pass_rate"
    assert curve["reward"].tolist() == [r["val_pass_rate"] for r in rows]
    one = rlcurves.read_log(tmp_path / "run", reward="val_pass_rate/carries_1")
    assert one["reward"].tolist() == [r["val_pass_rate/carries_1"] for r in rows]
