"""Several optimizer updates per generated batch (``updates_per_batch``, recipe/train.py).

One fixed batch from the tiny policy, scored by a reward that varies within groups (the tiny
policy scores 0 on the task itself), trained from the same initial weights in each test.
"""

from __future__ import annotations

import pytest
import recipe_helpers
import torch

from recipe import train as T
from recipe.advantages import advantages
from recipe.curriculum import PromptPool
from recipe.forward import completion_logprobs, right_pad
from recipe.loss import policy_loss
from recipe.pipeline import SharedPool
from recipe.run import make_generators, make_optimizer, make_rollouts, setup


def varied_reward(task, tokenizer, stop_ids, c, prompt):
    return float(sum(c.tokens) % 3 == 0)


BASE = {"prompts_per_step": 4, "generations": 4, "lr_warmup_steps": 0}


@pytest.fixture(scope="module")
def batch(init_dir, tmp_path_factory):
    """Step 1's rollouts (4 prompts x 4 completions) from the tiny policy."""
    torch.set_num_threads(1)
    cfg = recipe_helpers.tiny_cfg(init_dir, **BASE)
    s = setup(cfg, tmp_path_factory.mktemp("gen"))
    pool = SharedPool(PromptPool(len(s.train_prompts), cfg.seed, cfg.positive_threshold))
    generator, _ = make_generators(cfg, s, 64)
    return make_rollouts(cfg, generator, pool, s.train_ids, first_step=1).next_batch(1)


def one_step(init_dir, tmp_path, batch, monkeypatch, **extra):
    """(log row, setup) of one train_step on ``batch`` from the initial weights."""
    monkeypatch.setattr(T, "score", varied_reward)
    cfg = recipe_helpers.tiny_cfg(init_dir, **BASE, **extra)
    s = setup(cfg, tmp_path)
    pool = SharedPool(PromptPool(len(s.train_prompts), cfg.seed, cfg.positive_threshold))
    row = T.train_step(cfg, s, batch, make_optimizer(cfg, s.model), pool, step=1)
    return row, cfg, s


def test_minibatches_split_whole_prompt_groups():
    groups = torch.tensor([0, 0, 1, 1, 1, 3, 3, 5])
    assert T.minibatches(groups, 1, seed=0) == [list(range(8))]  # the one-update step
    parts = T.minibatches(groups, 3, seed=7)
    assert len(parts) == 3 and sorted(p for part in parts for p in part) == list(range(8))
    for part in parts:
        assert part == sorted(part)
        for g in {int(groups[p]) for p in part}:  # a group is never split
            assert set(part) >= {p for p in range(8) if groups[p] == g}
    assert T.minibatches(groups, 3, seed=7) == parts  # seeded
    assert len(T.minibatches(groups, 10, seed=0)) == 4  # no more updates than groups


def test_one_update_per_batch_is_the_plain_full_batch_update(
    init_dir, tmp_path, batch, monkeypatch
):
    # verified separately: logs and final weights of tiny runs (sync cispo / dapo, micro-batched
    # grpo, ppo-off-policy-3, zero-variance-filtered dapo) identical bit for bit to the trainer
    # before updates_per_batch existed; here the reference is that update written out by hand
    row, cfg, s = one_step(init_dir, tmp_path / "a", batch, monkeypatch, lr=1e-2, loss="dapo")
    assert row["updates"] == 1 and row["updated"]

    ref = setup(cfg, tmp_path / "b")
    optimizer = make_optimizer(cfg, ref.model)
    flat = [c for g in batch.groups for c in g]
    rewards = torch.tensor([varied_reward(None, None, None, c, None) for c in flat])
    group_ids = torch.arange(len(batch.indices)).repeat_interleave(cfg.generations)
    adv = advantages(rewards, group_ids, cfg.adv_norm)
    prompts = [ref.train_ids[batch.indices[int(g)]] for g in group_ids]
    logp, _ = completion_logprobs(
        ref.model, prompts, [c.tokens for c in flat], fp32_head=cfg.fp32_head,
        temperature=cfg.temperature, pad_id=ref.tokenizer.pad_token_id, dtype=cfg.dtype,
    )  # fmt: skip
    w = logp.shape[1]
    mask = right_pad([[1.0] * len(c.tokens) for c in flat], w)
    loss, _ = policy_loss(
        cfg.loss, logp, right_pad([c.logprobs for c in flat], w), adv, mask, group_ids,
        aggregation=cfg.aggregation,
    )  # fmt: skip
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(ref.model.parameters(), cfg.grad_clip)
    optimizer.step()
    assert row["loss"] == loss.item() and row["grad_norm"] == norm.item()
    expected = ref.model.state_dict()
    for name, a in s.model.state_dict().items():
        torch.testing.assert_close(a, expected[name], rtol=0, atol=0, msg=name)


def test_later_updates_leave_the_trust_region(init_dir, tmp_path, batch, monkeypatch):
    # 4 updates at lr 1e-2 on 16 completions: from the second one on, pi_train drifts from
    # pi_gen. Measured (seed 0, 1 thread): dapo zero_grad = clip = 0.203, cispo clip 0.0625 and
    # zero_grad 0, rho_max ~15-16 in both; one update: rho_max 1.0000005, nothing clipped
    dapo, _, _ = one_step(init_dir, tmp_path / "d", batch, monkeypatch, lr=1e-2, loss="dapo",
                          updates_per_batch=4)  # fmt: skip
    cispo, _, _ = one_step(init_dir, tmp_path / "c", batch, monkeypatch, lr=1e-2, loss="cispo",
                           updates_per_batch=4)  # fmt: skip
    single, _, _ = one_step(init_dir, tmp_path / "s", batch, monkeypatch, lr=1e-2, loss="dapo")
    assert dapo["updates"] == cispo["updates"] == 4 and dapo["updated"]
    assert dapo["rho_max"] > 4 and cispo["rho_max"] > 4  # beyond CISPO's eps_max = 4
    assert dapo["zero_grad_fraction"] > 0.1  # DAPO's clip removes gradients...
    assert dapo["zero_grad_fraction"] == dapo["clip_fraction"]
    assert cispo["clip_fraction"] > 0.03  # ...CISPO's truncation acts but keeps every one
    assert cispo["zero_grad_fraction"] == 0.0
    assert abs(single["rho_max"] - 1) < 1e-5 and single["zero_grad_fraction"] == 0.0
    # the minibatches partition the batch: every kept completion trained once, as with one
    assert dapo["trained_tokens"] == single["trained_tokens"]


def test_the_log_counts_optimizer_updates_across_resume(tmp_path, init_dir):
    # 4 prompt groups, no filter: 2 updates per step; weight decay makes each a real step
    cfg = recipe_helpers.tiny_cfg(init_dir, steps=4, eval_every=4, updates_per_batch=2)
    T.run(cfg, tmp_path, stop_after=3)  # checkpoint at step 2
    T.run(cfg, tmp_path, resume=True)
    train = [r for r in recipe_helpers.read_log(tmp_path / "log.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert [r["updates"] for r in train] == [2, 2, 2, 2]
    assert [r["optimizer_updates"] for r in train] == [2, 4, 6, 8]
    assert all(r["zero_grad_fraction"] is not None for r in train)
