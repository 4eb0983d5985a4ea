"""PipelineRL-k and PPO-off-policy-k with the torch generator (main .venv, no vLLM).

Two levels: the rollout sources of recipe/pipeline.py against a fake generator (admission and
pushes, exactly), and the trainer end to end in each mode (lag bounds, versions, failures,
resume). The vLLM engine's in-flight pushes are tested in tests/test_pipeline_vllm.py.
"""

from __future__ import annotations

import collections
import multiprocessing
import time
from types import SimpleNamespace

import pytest
import recipe_helpers
import torch

from recipe import cli
from recipe import config as C
from recipe import train as T
from recipe.curriculum import PromptPool
from recipe.generate import Completion, TorchGenerator
from recipe.generate_process import ProcessGenerator
from recipe.pipeline import (
    GeneratorFailed,
    OffPolicyRollouts,
    PipelineRollouts,
    SharedPool,
    version_stats,
)

tiny_cfg = recipe_helpers.tiny_cfg


# --------------------------------------------------------------------------- fake generator


class FakeGenerator:
    """Records pushes; every completion is one token stamped with the current version."""

    def __init__(self) -> None:
        self.version = 0
        self.calls = 0
        self.pushes: list[int] = []

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
        self.calls += 1
        return [[Completion([1], [-0.5], [self.version], False)] * n for _ in prompts]

    def push_weights(self, state_dict, version):
        self.pushes.append(version)
        self.version = version

    def close(self):
        pass


def fake_cfg(steps=20):
    return SimpleNamespace(
        steps=steps, prompts_per_step=2, generations=3, max_new_tokens=4, temperature=1.0
    )


def wait_until(predicate, timeout=30.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.01)


def test_pipeline_admission_bounds_the_lag_exactly():
    k = 3
    gen = FakeGenerator()
    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = PipelineRollouts(gen, pool, [[5]] * 50, fake_cfg(), k, first_step=1, version=0)
    try:
        # with version 0 published, the batches for steps 1..k+1 may start, and no more
        wait_until(lambda: src.batches.qsize() == k + 1)
        time.sleep(0.3)  # give an unbounded producer the chance to overshoot
        assert src.batches.qsize() == k + 1 and gen.calls == k + 1
        weights = {"w": torch.zeros(2)}
        for step in range(1, 12):
            batch = src.next_batch(step)
            stats = version_stats(batch.groups, trainer_version=step - 1)
            assert 0 <= stats["lag_min"] <= stats["lag_max"] <= k
            # this test waits for the producer after every push, so the producer is always
            # ahead and is held back by admission: the lag sits exactly at the bound, and the
            # weights it loads are the newest. (Free-running, the sampler process gives a
            # mixture: tests/test_generate_process.py.)
            if step > k + 1:
                assert stats["lag_max"] == k
            src.push(weights, version=step)
            # each published version admits exactly one more batch
            wait_until(lambda s=step: gen.calls == min(s + k + 1, 20))
        # the torch generator loads parked weights only between generate calls, in order
        assert gen.pushes == sorted(gen.pushes) and gen.pushes[-1] >= 8
    finally:
        src.close()
    assert not src.thread.is_alive()


def test_pipeline_hold_stops_new_batches():
    gen = FakeGenerator()
    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = PipelineRollouts(gen, pool, [[5]] * 50, fake_cfg(), 2, first_step=1, version=0)
    try:
        wait_until(lambda: gen.calls == 3)
        src.hold()
        src.next_batch(1)
        src.push({"w": torch.zeros(1)}, version=1)
        time.sleep(0.3)
        assert gen.calls == 3  # held: the admitted batch for step 4 waits
        src.release()
        wait_until(lambda: gen.calls == 4)
    finally:
        src.close()


def test_off_policy_rounds_are_frozen_then_pushed_once():
    k = 4
    gen = FakeGenerator()
    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = OffPolicyRollouts(gen, pool, [[5]] * 50, fake_cfg(steps=10), k)
    lags = []
    for step in range(1, 11):
        batch = src.next_batch(step)
        lags.append(version_stats(batch.groups, step - 1)["lag_max"])
        src.push({"w": torch.zeros(1)}, version=step)
    assert lags == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]  # k updates per frozen round, last one cut
    assert gen.pushes == [4, 8]  # one push per round, never within one
    assert gen.calls == 3  # one generate call per round


def test_regression_ppo_off_policy_generates_a_round_in_one_call():
    """PPO-off-policy-k made k generate calls per round, one after another, each waiting for
    its slowest sequence; the round's k x P prompts now go to the generator in one call, and
    the batches are the pool's draws, in order, each with its own prompts' groups."""

    class Recording(FakeGenerator):
        def __init__(self):
            super().__init__()
            self.prompts = []

        def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
            self.calls += 1
            self.prompts.append([p[0] for p in prompts])
            # each completion carries its prompt, so a misaligned split shows
            return [[Completion([p[0]], [-0.5], [self.version], False)] * n for p in prompts]

    k, cfg = 3, fake_cfg(steps=7)
    gen = Recording()
    pool = PromptPool(50, seed=0, positive_threshold=None)
    reference = PromptPool(50, seed=0, positive_threshold=None)  # the draws the steps make
    src = OffPolicyRollouts(gen, SharedPool(pool), [[i] for i in range(50)], cfg, k)
    for step in range(1, 8):
        batch = src.next_batch(step)
        assert batch.indices == reference.next_batch(cfg.prompts_per_step)
        assert [g[0].tokens[0] for g in batch.groups] == batch.indices
        assert all(len(g) == cfg.generations for g in batch.groups)
        src.push({"w": torch.zeros(1)}, version=step)
    # rounds of 3, 3 and the last step alone: one call each, with all of the round's prompts
    assert gen.calls == 3
    assert [len(p) for p in gen.prompts] == [k * cfg.prompts_per_step] * 2 + [cfg.prompts_per_step]


def test_a_failed_push_is_never_silent():
    class BadPush(FakeGenerator):
        def push_weights(self, state_dict, version):
            raise RuntimeError("size mismatch for lm_head.weight")

    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = OffPolicyRollouts(BadPush(), pool, [[5]] * 50, fake_cfg(), 1)
    src.next_batch(1)
    with pytest.raises(GeneratorFailed, match=r"weight push of policy version 1 failed.*lm_head"):
        src.push({"w": torch.zeros(1)}, version=1)
    src = PipelineRollouts(BadPush(), pool, [[5]] * 50, fake_cfg(), 0, first_step=1, version=0)
    try:
        src.next_batch(1)
        src.push({"w": torch.zeros(1)}, version=1)
        with pytest.raises(GeneratorFailed, match="weight push of policy version 1 failed"):
            src.next_batch(2)
    finally:
        src.close()


def test_version_stats_counts_mixed_completions():
    groups = [
        [Completion([1, 2, 3], [0.0] * 3, [4, 4, 5], False)],
        [Completion([1, 2], [0.0] * 2, [5, 5], False), Completion([1], [0.0], [3], True)],
    ]
    stats = version_stats(groups, trainer_version=6)
    assert stats == {"lag_min": 1, "lag_mean": 10 / 6, "lag_max": 3, "mixed_version_samples": 1}


# --------------------------------------------------------------------------- the trainer


def test_pipeline_mode_trains_within_the_lag_bound(tmp_path, init_dir):
    k = 2
    T.run(tiny_cfg(init_dir, mode="pipeline", max_lag=k, steps=10, eval_every=5), tmp_path)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 11))
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 5, 10]
    oldest = [r["step"] - 1 - r["lag_max"] for r in train]  # oldest token version per batch
    for r in train:
        assert 0 <= r["lag_min"] <= r["lag_mean"] <= r["lag_max"] <= k
        assert r["mixed_version_samples"] == 0  # the torch sampler cannot switch mid-sequence
        assert 0 <= r["generator_idle_fraction"] <= 1 and 0 <= r["trainer_idle_fraction"] <= 1
        assert not r["skipped_update"] and r["rho_mean"] is not None
    assert oldest == sorted(oldest) and oldest[-1] >= 10 - 1 - k  # versions advance
    assert (tmp_path / "final" / "model.safetensors").exists()
    # the sampler runs in its own process, so how stale a batch is depends on who was faster:
    # no fixed value to assert (tests/test_generate_process.py pins a mixture with a fake)
    print("lag histogram:", dict(sorted(collections.Counter(r["lag_max"] for r in train).items())))


def test_ppo_off_policy_takes_k_updates_per_frozen_batch(tmp_path, init_dir):
    k = 3
    # weight decay moves the weights every step even when all advantages are 0 (weak init)
    cfg = tiny_cfg(
        init_dir, mode="ppo-off-policy", max_lag=k, steps=7, lr=1e-2, lr_warmup_steps=1,
        weight_decay=1.0,
    )  # fmt: skip
    T.run(cfg, tmp_path)
    train = [r for r in recipe_helpers.read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    assert [r["lag_min"] for r in train] == [0, 1, 2, 0, 1, 2, 0]
    assert [r["lag_max"] for r in train] == [0, 1, 2, 0, 1, 2, 0]
    # pi_train / pi_gen is 1 right after a round's push (the push landed) and moves off 1 once
    # the trainer is ahead of the frozen generator (lag >= 1)
    assert all(abs(r["rho_max"] - 1) < 1e-4 for r in train if r["lag_max"] == 0)
    assert any(abs(r["rho_max"] - 1) > 1e-4 for r in train if r["lag_max"] > 0)


def test_sync_mode_has_zero_lag(tmp_path, init_dir):
    T.run(tiny_cfg(init_dir, steps=3, eval_every=3), tmp_path)
    train = [r for r in recipe_helpers.read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    assert all(r["lag_max"] == 0 and r["mixed_version_samples"] == 0 for r in train)
    # same weights in sampler and trainer: only numerics (KV-cached vs full forward) differ
    assert all(r["fresh_logprob_mismatch"] < 1e-4 for r in train)


@pytest.mark.parametrize("mode", ["pipeline", "ppo-off-policy", "sync"])
def test_a_dying_generator_stops_the_run_cleanly_and_it_resumes(
    tmp_path, init_dir, monkeypatch, mode
):
    # the in-process sampler (evaluation; sync and off-policy rollouts) and the pipeline's
    # sampler process, as the producer sees it, count calls together
    real = {cls: cls.generate for cls in (TorchGenerator, ProcessGenerator)}
    calls = {"n": 0}

    def dies_on_the_fifth_call(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise MemoryError("sampler ran out of memory")
        return real[type(self)](self, *args, **kwargs)

    for cls in real:
        monkeypatch.setattr(cls, "generate", dies_on_the_fifth_call)
    cfg = tiny_cfg(init_dir, mode=mode, max_lag=2, eval_every=100)
    config_file = tmp_path / "cfg.yaml"
    config_file.write_text(C.to_yaml(cfg))
    out = tmp_path / "run"
    children = set(multiprocessing.active_children())
    with pytest.raises(SystemExit, match=r"generator failed: MemoryError(.|\n)*--resume"):
        cli.main(["--config", str(config_file), "--out", str(out)])
    assert set(multiprocessing.active_children()) <= children  # the sampler process is gone
    rows = recipe_helpers.read_log(out / "log.jsonl")  # every line still parses
    steps = [r["step"] for r in rows if r["kind"] == "train"]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) < cfg.steps
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] >= 2

    for cls, method in real.items():
        monkeypatch.setattr(cls, "generate", method)
    cli.main(["--config", str(config_file), "--out", str(out), "--resume"])
    rows = recipe_helpers.read_log(out / "log.jsonl")
    keys = [(r["kind"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert [s for k, s in keys if k == "train"] == list(range(1, cfg.steps + 1))
    hours = [r["gpu_hours"] for r in rows]
    assert hours == sorted(hours)


def test_pipeline_run_resumes_after_a_kill(tmp_path, init_dir):
    cfg = tiny_cfg(init_dir, mode="pipeline", max_lag=2, steps=6, eval_every=3)
    T.run(cfg, tmp_path, stop_after=3)  # checkpoint at step 2, rows up to 3
    T.run(cfg, tmp_path, resume=True)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    keys = [(r["kind"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert [s for k, s in keys if k == "train"] == [1, 2, 3, 4, 5, 6]
    assert [s for k, s in keys if k == "eval"] == [0, 3, 6]
    for r in rows:
        if r["kind"] == "train":
            assert r["lag_max"] <= 2


@pytest.mark.parametrize("mode", ["sync", "ppo-off-policy", "pipeline"])
def test_every_mode_charges_every_device(tmp_path, init_dir, mode):
    # devices = 2 (on CPU, standing for a trainer device and a generator device): the
    # generator's device is held for the whole run in every mode, idle or not, so gpu_hours
    # counts both everywhere; the bill (allocated_gpu_hours: start-up and evaluations too) is
    # never below it
    T.run(tiny_cfg(init_dir, mode=mode, max_lag=2, steps=2, eval_every=2, devices=2), tmp_path)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    assert {r["kind"] for r in rows} == {"train", "eval"}
    for r in rows:
        assert r["gpu_hours"] == pytest.approx(r["wall_seconds"] / 3600 * 2, rel=1e-12)
        assert r["allocated_gpu_hours"] >= r["gpu_hours"]
    # evaluation and start-up are billed: the bill grows past the busy hours
    assert rows[-1]["allocated_gpu_hours"] > rows[-1]["gpu_hours"] > 0
    assert rows[-1]["wall_seconds"] > 0


@pytest.mark.parametrize(("mode", "expected"), [("ppo-off-policy", 4), ("sync", 8)])
def test_the_loop_gathers_weights_only_when_the_generator_uses_them(
    tmp_path, init_dir, monkeypatch, mode, expected
):
    # 7 steps, evaluations at 0 and 7 (the torch evaluator takes the weights at each). With
    # PPO-off-policy-3 only the rounds' last steps 3 and 6 are pushed (2 + 2 = 4); sync pushes
    # steps 1-6 (6 + 2 = 8); nobody takes step 7's but the evaluation. With several ranks each
    # of these reads is a collective gather, so a push nobody uses costs one per parameter.
    from recipe import distributed

    real, reads = distributed.model_weights, []

    def counting(model, ranks, dtype=None):
        weights = real(model, ranks, dtype)
        inner = weights._items

        def items():
            reads.append(1)
            return inner()

        weights._items = items
        return weights

    monkeypatch.setattr(distributed, "model_weights", counting)
    T.run(tiny_cfg(init_dir, mode=mode, max_lag=3, steps=7, eval_every=100), tmp_path)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(1, 8))
    assert len(reads) == expected


@pytest.mark.parametrize("mode", ["sync", "ppo-off-policy", "pipeline"])
def test_step_time_is_split_between_waiting_training_and_pushing(
    tmp_path, init_dir, mode, monkeypatch
):
    """The per-step timing fields (issue 30) sum to the step's wall time, which is what the
    compute axis adds up; a trainer slowed by 0.2 s per step shows it in ``train_seconds``, not
    in the wait for the batch."""
    import time

    real = T.train_step

    def slow(*args, **kwargs):
        time.sleep(0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(T, "train_step", slow)
    T.run(tiny_cfg(init_dir, mode=mode, max_lag=2, steps=4, eval_every=4), tmp_path)
    train = [r for r in recipe_helpers.read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    wall = 0.0
    for r in train:
        parts = r["batch_wait_seconds"] + r["train_seconds"] + r["push_seconds"]
        assert parts == pytest.approx(r["step_seconds"], abs=1e-9)
        wall += r["step_seconds"]
        assert r["wall_seconds"] == pytest.approx(wall, rel=1e-9)
        assert r["train_seconds"] >= 0.2 and min(r["batch_wait_seconds"], r["push_seconds"]) >= 0
        # the trainer's idle time (measured inside next_batch) lies within the wait for the batch
        assert r["trainer_idle_fraction"] * r["step_seconds"] <= r["batch_wait_seconds"] + 1e-9
        assert r["load_average"] is None or r["load_average"] >= 0
