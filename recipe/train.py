"""The ScaleRL reference trainer: read it top to bottom.

    python -m recipe.train --config recipe/configs/cpu_demo.yaml --out runs/cpu_demo
    python -m recipe.train --config recipe/configs/cpu_demo.yaml --out runs/cpu_demo --resume
    torchrun --standalone --nproc-per-node 2 -m recipe.train --config ... --out ...  # FSDP2

One step, as :func:`run`'s loop takes it:

1. **Rollouts** (``rollouts.next_batch``): 32 prompts from the pool, 16 completions each, with
   every token's log-probability and policy version from the generator. Where they come from
   depends on ``mode`` (recipe/pipeline.py): ``sync`` generates them right then;
   ``ppo-off-policy`` generates ``max_lag`` batches with frozen weights every ``max_lag`` steps;
   ``pipeline`` (PipelineRL-k) takes them from a queue that a background producer fills while
   the trainer trains, with tokens at most ``max_lag`` policy versions old. ``generator`` picks
   the engine: ``torch`` (the in-process sampler) or ``vllm`` (recipe/generate_vllm.py).
2. **Scores and advantages** (:func:`train_step`): the task's reward of each completion
   (recipe/tasks), the zero-variance filter, the group-baseline advantages.
3. **Updates** (:func:`update`): ``updates_per_batch`` AdamW steps (default 1: the whole batch;
   more: PPO-style minibatches of its prompt groups), each on the policy loss
   (recipe/loss.py) with its minibatch's aggregation denominators, accumulated over
   ``micro_batch_size`` completions at a time.
4. **Weight push** (``rollouts.push``): the new weights to the generator, on the steps whose
   weights it uses (every step in sync and pipeline modes, a round's last in PPO-off-policy).

A step is one generated batch whatever ``updates_per_batch`` is: ``steps``, the learning-rate
warm-up, the policy version (advanced once per batch, after its last update) and the lag bound
count batches; ``optimizer_updates`` in the log counts AdamW steps. The model sits on ``device``
with FP32 master weights; ``dtype`` is the body's autocast precision (recipe/forward.py).
Evaluation (mean@n pass rate on the held-out set, and per class as ``val_pass_rate/<class>``
when the task has ``prompt_class``) runs every ``eval_every`` steps and at step 0. Setup,
engines, the log and checkpoints are in recipe/run.py; the command line in recipe/cli.py.

With torchrun the same loop runs on every rank; what differs per rank is behind two calls of
recipe/distributed.py: :func:`~recipe.distributed.micro_batches` (this rank's share of an update)
and :func:`~recipe.distributed.reduce_stats` (an update's diagnostics over all ranks). Rank 0
generates, evaluates and logs; a push streams the sharded weights one parameter at a time
(:func:`~recipe.distributed.model_weights`).

Output in ``--out``: ``config.yaml`` (the resolved config), ``log.jsonl`` (one JSON object per
line: ``kind`` = "train" per step, "eval" per evaluation), ``checkpoint.pt`` (for ``--resume``),
``init/`` (the warm-up model when no ``init`` is given) and ``final/`` (the trained model, a
Hugging Face folder).

Compute accounting, in every row:

- ``gpu_hours`` = ``wall_seconds`` / 3600 x the devices in use. ``wall_seconds`` counts the
  training steps' wall-clock time (generation, scoring, update, weight push), not evaluation,
  checkpoints or start-up, so the evaluation frequency does not shift this axis. The devices in
  use are one per trainer rank plus one per vLLM engine on a GPU of its own (counted already),
  times nothing else: the config's ``devices`` (default 1) is for devices a one-rank run uses
  that the trainer cannot see. They are charged for the whole step in every mode, idle or not
  (a generator waiting for the update in sync and PPO-off-policy, a trainer waiting for data in
  PipelineRL), which is what makes modes comparable on the hardware they hold.
- ``allocated_gpu_hours`` = every GPU the job holds (all GPUs visible to it on every node; on
  CPU the devices in use) x the wall-clock time since each process started, summed over the
  run's processes (a ``--resume`` continues from the last row the killed process wrote): the
  bill, start-up, evaluation, checkpoints and idle GPUs included. Always >= ``gpu_hours``.
- ``flops`` = the cumulative 6 x parameters x trained tokens + 2 x parameters x generated tokens.

Each train row also splits its step's wall time: ``batch_wait_seconds`` (the trainer waiting
for its batch: in sync and PPO-off-policy modes the generation itself, with the load of the
parked weights), ``train_seconds`` (scoring, filter, advantages, updates) and ``push_seconds``
(handing the weights over: into the running engine in PipelineRL with vLLM), summing to
``step_seconds``; with the idle fractions they show which side a mode waits on.
``load_average`` is the machine's 1-minute load at the step's end: on a shared machine it
stretches all of these.

After ``--resume`` ``wall_seconds`` continues from the checkpoint's value: the time lost between
the checkpoint and the kill is not counted, and no log row written after the checkpoint survives.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from recipe import config as config_mod
from recipe import distributed, versions
from recipe.advantages import advantages, zero_variance_keep
from recipe.config import Config, ConfigError
from recipe.curriculum import PromptPool
from recipe.forward import completion_logprobs, resolve_device, right_pad
from recipe.generate import Completion
from recipe.loss import policy_loss, token_weights
from recipe.model import save_policy
from recipe.pipeline import Batch, SharedPool, push, version_stats
from recipe.run import (
    Bill,
    Log,
    NullLog,
    checkpoint,
    flops,
    launch_layout,
    make_generators,
    make_optimizer,
    make_rollouts,
    previous_bill,
    restore,
    setup,
    shard,
)
from recipe.tasks import Prompt


def score(task, tokenizer, stop_ids, completion: Completion, prompt: Prompt) -> float:
    """The task's reward of one completion; 0 when it hit the length limit without EOS (unless
    the task sets ``score_truncated``)."""
    finished = bool(completion.tokens) and completion.tokens[-1] in stop_ids
    if not finished and not getattr(task, "score_truncated", False):
        return 0.0
    body = completion.tokens[:-1] if finished else completion.tokens
    return float(task.reward(prompt, tokenizer.decode(body, skip_special_tokens=True)))


def loss_mask(c: Completion) -> list[float]:
    """1 on sampled tokens, 0 on tokens forced by length control."""
    mask = [1.0] * len(c.tokens)
    if c.forced is not None:
        mask[c.forced[0] : c.forced[1]] = [0.0] * (c.forced[1] - c.forced[0])
    return mask


def entropy(flat: list[Completion]) -> float:
    """Monte Carlo entropy estimate: the mean of -log pi_gen over the sampled tokens (free; the
    trainer's forward pass only sees the completions that survive the filter). Tokens forced by
    length control are left out: they were not sampled and carry a log-prob of 0."""
    total = sum(sum(lp for lp, on in zip(c.logprobs, loss_mask(c), strict=True) if on)
                for c in flat)  # fmt: skip
    return -total / max(1, sum(int(sum(loss_mask(c))) for c in flat))


@dataclass
class Kept:
    """The completions that survived the filter, in batch order, with what an update needs."""

    prompts: list[list[int]]  # prompt token ids
    tokens: list[list[int]]
    logp_gen: list[list[float]]
    versions: list[list[int]]
    masks: list[list[float]]  # loss masks (:func:`loss_mask`)
    adv: torch.Tensor  # (n,) advantages, on the trainer's device
    groups: torch.Tensor  # (n,) prompt group of each, on the trainer's device
    kv_versions: list[int | None]  # Completion.kv_version: the oldest weights behind its KV


def minibatches(groups: torch.Tensor, updates: int, seed: int) -> list[list[int]]:
    """Positions into the kept completions, split by prompt group into ``updates`` minibatches.

    ``updates=1``: one minibatch of every position in batch order (the one-update step exactly).
    Otherwise the groups are shuffled with ``seed`` and dealt into ``min(updates, groups)``
    near-equal minibatches, each in batch order; every completion is in exactly one.
    """
    order = groups.tolist()
    if updates == 1:
        return [list(range(len(order)))]
    unique = sorted(set(order))
    perm = torch.randperm(len(unique), generator=torch.Generator().manual_seed(seed))
    parts = []
    for chunk in torch.tensor_split(perm, min(updates, len(unique))):
        chosen = {unique[i] for i in chunk.tolist()}
        parts.append([p for p, g in enumerate(order) if g in chosen])
    return parts


@dataclass
class UpdateStats:
    """One update's diagnostics, summed over its micro-batches (and over the ranks by
    :func:`recipe.distributed.reduce_stats`): the per-token ones are weighted by ``tokens``."""

    SUMS = ("loss", "tokens", "clip", "zero_grad", "rho")  # summed over ranks
    MAXIMA = ("rho_max", "gap_max")  # maxed over ranks (None where no rank has one)

    loss: float = 0.0  # the micro-batches' losses (each weighted by the whole minibatch)
    tokens: float = 0.0  # loss tokens
    clip: float = 0.0  # ... of which clipped or truncated (x their count: a sum)
    zero_grad: float = 0.0  # ... of which the clip left without a gradient
    rho: float = 0.0  # sum of pi_train / pi_gen over the loss tokens
    rho_max: float | None = None
    gap_max: float | None = None  # max |log pi_train - log pi_gen| on fresh completions
    finite: bool = True  # no micro-batch's loss was NaN or inf (on any rank)
    grad_norm: float | None = None
    stepped: bool = False  # AdamW stepped

    def add(self, loss: float, diag: dict, tokens: float) -> None:
        self.loss += loss
        if tokens:
            self.tokens += tokens
            self.clip += diag["clip_fraction"] * tokens
            self.zero_grad += diag["zero_grad_fraction"] * tokens
            self.rho += diag["rho_mean"] * tokens
            self.rho_max = max(diag["rho_max"], self.rho_max or diag["rho_max"])

    def add_gap(self, gap: float | None) -> None:
        if gap is not None:
            self.gap_max = max(gap, self.gap_max or 0.0)


def fresh_gap(logp_train, logp_gen, mask, versions, kv_versions, version: int) -> float | None:
    """max |log pi_train - log pi_gen| over the tokens of completions that the trainer's own
    ``version`` sampled entirely, KV cache included: no policy change and no stale KV, so
    anything here is numerics (what the FP32 head controls). Mixed completions are left out:
    after an in-flight push their tokens come from new weights over KV of old ones, which the
    trainer never sees; so are those that waited in vLLM's queue across a push (their prompt KV
    may be the old weights', ``kv_version``)."""
    fresh = right_pad(
        [[set(v) == {version} and kv in (None, version)] * len(v)
         for v, kv in zip(versions, kv_versions, strict=True)],
        logp_train.shape[1], device=logp_train.device,
    )  # fmt: skip
    gap = (logp_train.detach() - logp_gen).abs()[(fresh * mask) > 0]
    return gap.max().item() if gap.numel() else None


def update(
    cfg: Config, s, optimizer, kept: Kept, pos: list[int], *, version: int, measure_gap: bool
) -> UpdateStats:
    """One AdamW step on the kept completions at ``pos``, with their own aggregation
    denominators, accumulated over ``micro_batch_size`` completions at a time.

    ``version``: the policy version the batch's fresh completions come from; ``measure_gap``:
    the trainer still holds that version (the first update of a batch).
    """
    device, ranks = s.device, s.ranks
    groups = kept.groups[torch.tensor(pos, device=device)]
    width = max(1, max(len(kept.masks[p]) for p in pos))
    # the minibatch's aggregation weights: every micro-batch divides by its global counts
    weights = token_weights(
        right_pad([kept.masks[p] for p in pos], width, device=device), groups, cfg.aggregation
    )
    stats = UpdateStats()
    optimizer.zero_grad(set_to_none=True)
    # this rank's micro-batches (with several ranks: its prompt groups; scale 0: a padding one)
    for local, scale in distributed.micro_batches(
        list(range(len(pos))), groups.tolist(), cfg.micro_batch_size or len(pos), ranks
    ):
        mb = [pos[i] for i in local]
        at = torch.tensor(local, device=device)
        logp_train, _ = completion_logprobs(
            s.model, [kept.prompts[k] for k in mb], [kept.tokens[k] for k in mb],
            fp32_head=cfg.fp32_head, temperature=cfg.temperature, pad_id=s.tokenizer.pad_token_id,
            dtype=cfg.dtype, chunk=cfg.logprob_chunk,
        )  # fmt: skip
        w = logp_train.shape[1]
        mask = right_pad([kept.masks[k] for k in mb], w, device=device)
        logp_gen = right_pad([kept.logp_gen[k] for k in mb], w, device=device)
        loss, diag = policy_loss(
            cfg.loss, logp_train, logp_gen, kept.adv[torch.tensor(mb, device=device)], mask,
            groups[at], aggregation=cfg.aggregation, eps_max=cfg.eps_max, eps_low=cfg.eps_low,
            eps_high=cfg.eps_high, weights=weights[at, :w] * scale,
        )  # fmt: skip
        if not distributed.backward(loss, ranks):
            stats.finite = False  # a NaN/inf loss must never reach the weights (nor AdamW's)
            if not ranks.active:
                break  # (several ranks: the backward ran anyway, the others' waits on it)
        stats.add(loss.item(), diag, tokens=float(mask.sum()) * scale)
        if measure_gap and scale:
            stats.add_gap(fresh_gap(
                logp_train, logp_gen, mask, [kept.versions[k] for k in mb],
                [kept.kv_versions[k] for k in mb], version,
            ))  # fmt: skip
    stats = distributed.reduce_stats(stats, ranks)  # the whole minibatch's, on every rank
    if stats.finite:
        clip = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
        norm = distributed.local_value(torch.nn.utils.clip_grad_norm_(s.model.parameters(), clip))
        stats.grad_norm = norm.item()
        if torch.isfinite(norm):
            optimizer.step()
            stats.stepped = True
    optimizer.zero_grad(set_to_none=True)
    return stats


def merge_updates(parts: list[UpdateStats]) -> dict:
    """A batch's log fields from its updates: ratio statistics over the tokens of every update
    with a finite loss, loss and gradient norm averaged over those updates, the logprob
    mismatch of the first update."""
    good = [p for p in parts if p.finite]
    row = {
        "updates": sum(p.stepped for p in parts),
        "updated": any(p.stepped for p in parts),
        "skipped_update": not all(p.stepped for p in parts),
        "fresh_logprob_mismatch": parts[0].gap_max if parts[0].finite else None,
    }
    if not good:
        return row
    tokens = sum(p.tokens for p in good)
    rho_max = [p.rho_max for p in good if p.rho_max is not None]
    row.update(
        loss=sum(p.loss for p in good) / len(good),
        grad_norm=sum(p.grad_norm for p in good) / len(good),
        rho_max=max(rho_max) if rho_max else None,
    )
    if tokens:
        row.update(
            clip_fraction=sum(p.clip for p in good) / tokens,
            zero_grad_fraction=sum(p.zero_grad for p in good) / tokens,
            rho_mean=sum(p.rho for p in good) / tokens,
        )
    return row


def train_step(cfg: Config, s, batch: Batch, optimizer, pool, step: int) -> dict:
    """One RL step on ``batch``; returns the train log fields (before accounting).

    Rewards, the zero-variance filter and the advantages are computed once for the whole batch;
    then ``updates_per_batch`` optimizer updates follow, one per minibatch of prompt groups
    (:func:`minibatches`, :func:`update`). ``logp_gen`` stays the generator's, so from the second
    update on the ratio leaves 1 and the loss's truncation or clip acts.
    """
    idx, groups = batch.indices, batch.groups
    flat = [c for g in groups for c in g]
    rewards = torch.tensor([
        score(s.task, s.tokenizer, s.stop_ids, c, s.train_prompts[i])
        for i, g in zip(idx, groups, strict=True) for c in g
    ])  # fmt: skip
    group_ids = torch.arange(len(idx)).repeat_interleave(cfg.generations)
    pool.update(idx, rewards.view(len(idx), cfg.generations).mean(1).tolist())

    keep = torch.ones_like(rewards, dtype=torch.bool)
    if cfg.zero_variance_filter:
        keep = zero_variance_keep(rewards, group_ids)
    adv = advantages(rewards[keep], group_ids[keep], cfg.adv_norm)

    n_tokens = sum(len(c.tokens) for c in flat)
    row = {
        "samples": len(flat),
        "tokens": n_tokens,
        "train_reward": rewards.mean().item(),
        "entropy": entropy(flat),
        "truncation_fraction": sum(c.truncated for c in flat) / len(flat),
        "interrupted_fraction": sum(c.forced is not None for c in flat) / len(flat),
        "prompts_filtered": len(idx) - len(group_ids[keep].unique()),
        "pool_size": pool.pool_size,
        **version_stats(groups, trainer_version=step - 1),
        "loss": None,
        "clip_fraction": None,
        "zero_grad_fraction": None,
        "rho_mean": None,
        "rho_max": None,
        "fresh_logprob_mismatch": None,
        "grad_norm": None,
        "skipped_update": False,
        "updated": False,
        "updates": 0,
        "trained_tokens": 0,
    }
    lr = cfg.lr * min(1.0, step / max(1, cfg.lr_warmup_steps))  # warm-up counts batches
    for group in optimizer.param_groups:
        group["lr"] = lr
    row["lr"] = lr
    if not bool(keep.any()):
        return row

    at = keep.nonzero().squeeze(1).tolist()
    prompts = [s.train_ids[idx[int(group_ids[k])]] for k in at]
    kept = Kept(
        prompts=prompts, tokens=[flat[k].tokens for k in at],
        logp_gen=[flat[k].logprobs for k in at], versions=[flat[k].versions for k in at],
        masks=[loss_mask(flat[k]) for k in at], adv=adv.to(s.device),
        groups=group_ids[keep].to(s.device), kv_versions=[flat[k].kv_version for k in at],
    )  # fmt: skip
    # what the forward and backward process (each kept completion once, in one minibatch)
    row["trained_tokens"] = sum(len(p) + len(t) for p, t in zip(prompts, kept.tokens, strict=True))
    s.model.train()
    parts = []
    for pos in minibatches(kept.groups, cfg.updates_per_batch, seed=cfg.seed * 100_003 + step):
        parts.append(update(cfg, s, optimizer, kept, pos, version=step - 1,
                            measure_gap=not parts))  # fmt: skip
    row.update(merge_updates(parts))
    return row


def push_dtype(cfg: Config) -> torch.dtype | None:
    """The dtype a push reaches the generator in, which a sharded push gathers in: the vLLM
    engines' weight dtype; None (the FP32 master weights) for the torch sampler."""
    from recipe.forward import DTYPES

    return DTYPES[cfg.dtype] if cfg.generator == "vllm" else None


def evaluate(cfg: Config, evaluator, s, step: int) -> tuple[float, dict[str, float]]:
    """mean@n pass rate on the held-out set, with sampling reseeded from (seed, step), and the
    same per class of the task's ``prompt_class`` (``{}`` when the task has no classes)."""
    if getattr(evaluator, "rng", None) is not None:  # vLLM samples with its own seeded engine
        evaluator.rng.manual_seed(cfg.seed * 7919 + step)
    classify = getattr(s.task, "prompt_class", None)
    total, chunk = 0.0, max(1, 512 // cfg.val_samples_per_prompt)
    by_class: dict[str, list[float]] = {}  # class -> [reward sum, samples]
    for lo in range(0, len(s.val_ids), chunk):
        groups = evaluator.generate(
            s.val_ids[lo : lo + chunk], cfg.val_samples_per_prompt,
            max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
        )  # fmt: skip
        for g, p in zip(groups, s.val_prompts[lo : lo + chunk], strict=True):
            got = sum(score(s.task, s.tokenizer, s.stop_ids, c, p) for c in g)
            total += got
            cls = classify(p) if callable(classify) else None
            if cls is not None:
                acc = by_class.setdefault(str(cls), [0.0, 0])
                acc[0] += got
                acc[1] += len(g)
    rate = total / (len(s.val_ids) * cfg.val_samples_per_prompt)
    return rate, {k: by_class[k][0] / by_class[k][1] for k in sorted(by_class)}


def eval_row(cfg: Config, s, evaluator, step: int, *, holds_weights: bool, counts: dict) -> dict:
    """The evaluation at ``step`` as a log row (rank 0; ``{}`` on the others).

    The evaluator first takes the trainer's weights (every rank joins the gathers) unless it
    ``holds_weights``: vLLM evaluates on the rollout engine, which holds them when this step's
    push brought them (or at step 0). The torch sampler always takes them (one process: it shares
    the trainer's model, so only its version changes). ``counts``: the accounting columns.
    """
    if not holds_weights:
        weights = distributed.model_weights(s.model, s.ranks, push_dtype(cfg))
        consume = None if evaluator is None else (lambda w: push(evaluator, w, version=step))
        distributed.hand_over(weights, consume, s.ranks)
    if not s.ranks.main:
        return {}
    rate, by_class = evaluate(cfg, evaluator, s, step)
    return {
        "kind": "eval", "step": step, **counts, "val_pass_rate": rate,
        "val_prompts": len(s.val_ids), "val_samples_per_prompt": cfg.val_samples_per_prompt,
        # flat columns (val_pass_rate/carries_0 ...): read_log(..., reward=<one>) fits a class
        **{f"val_pass_rate/{k}": v for k, v in by_class.items()},
    }  # fmt: skip


@dataclass
class Progress:
    """The run's counters (checkpointed; ``--resume`` continues them)."""

    step: int = 0
    wall_seconds: float = 0.0  # the training steps' wall-clock time
    samples_total: int = 0
    tokens_total: int = 0
    flops_total: float = 0.0
    updates_total: int = 0

    @classmethod
    def from_checkpoint(cls, state: dict | None) -> Progress:
        if state is None:
            return cls()
        return cls(
            step=state["step"], wall_seconds=state["wall_seconds"],
            samples_total=state["samples_total"], tokens_total=state["tokens_total"],
            flops_total=state.get("flops_total", 0.0),  # absent in checkpoints before the key
            # absent before updates_per_batch: one update per step then (skipped ones aside)
            updates_total=state.get("updates_total", state["step"]),
        )  # fmt: skip

    def add(self, step: int, seconds: float, row: dict, parameters: int) -> None:
        self.step = step
        self.wall_seconds += seconds
        self.samples_total += row["samples"]
        self.tokens_total += row["tokens"]
        self.flops_total += flops(parameters, row["trained_tokens"], row["tokens"])
        self.updates_total += row["updates"]


def close_engines(generator, evaluator) -> None:
    """Close the rollout engine and the evaluator (the same object with vLLM)."""
    if generator is not None:
        generator.close()
    if evaluator is not None and evaluator is not generator:
        evaluator.close()


def run(cfg: Config, out: str | Path, *, resume: bool = False, stop_after: int | None = None):
    """Train according to ``cfg``, writing into ``out``; see the module docstring.

    ``stop_after`` ends the process's work right after that step's log rows, without a final
    checkpoint, exactly as a kill would (used to test ``resume``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log_path, ckpt_path = out / "log.jsonl", out / "checkpoint.pt"
    if not resume and log_path.exists() and log_path.stat().st_size > 0:
        raise ConfigError(f"{log_path} already exists; pass --resume or choose another --out")
    if (out / "config.yaml").exists():  # overwritten below: only ever a run's own
        try:
            config_mod.load(out / "config.yaml")
        except ConfigError as err:
            raise ConfigError(
                f"{out / 'config.yaml'} is not a config this trainer wrote ({err}); --out names "
                "the run's folder, and the run would overwrite it: choose another --out"
            ) from None
    # torch (and vLLM) in the supported ranges, before any rank joins a collective
    versions.check(vllm=cfg.generator == "vllm", sharded=distributed.launched_ranks() > 1)
    # torchrun's ranks, or one process; a rank stuck dist_timeout seconds fails the job
    ranks = distributed.init(resolve_device(cfg.device), timeout=cfg.dist_timeout)
    distributed.barrier(ranks)  # every rank has checked the log before rank 0 writes
    if ranks.main:
        (out / "config.yaml").write_text(config_mod.to_yaml(cfg))
    torch.set_num_threads(cfg.threads)
    for note in config_mod.inert_settings(cfg):
        warnings.warn(f"config: {note}", UserWarning, stacklevel=2)

    s = setup(cfg, out, ranks)  # task, model (FP32 master weights), tokenizer, prompts
    layout = launch_layout(cfg, ranks, s.device)  # engines' GPUs, devices used and held
    pool = SharedPool(
        PromptPool(
            len(s.train_prompts), cfg.seed, cfg.positive_threshold,
            # ten batches' worth, or a tenth of a pool that small from the start
            warn_below=min(10 * cfg.prompts_per_step, len(s.train_prompts) // 10)
            if ranks.main else None,
        )
    )  # fmt: skip
    max_len = max(map(len, s.train_ids + s.val_ids)) + cfg.max_new_tokens
    generator, evaluator = make_generators(cfg, s, max_len)  # rank 0's (None elsewhere)
    rollouts, log = None, NullLog()
    try:  # the engines run processes (the pipeline's sampler, vLLM): stop them on any error
        shard(cfg, s)  # FSDP2 over the ranks; nothing with one process
        optimizer = make_optimizer(cfg, s.model)
        rng = getattr(generator, "rng", None)  # vLLM samples with its own seeded engine

        # model and AdamW state restored in place (sharded: each rank reads its own shards)
        state = restore(ckpt_path, s.model, optimizer, ranks) if resume else None
        progress = Progress.from_checkpoint(state)
        bill = Bill(layout.held, previous_bill(log_path, state) if ranks.main else 0.0)
        if state is not None:
            pool.load_state_dict(state["pool"])
            weights = distributed.model_weights(s.model, ranks, push_dtype(cfg))  # all ranks
            consume = None if generator is None else (
                lambda w: push(generator, w, version=state["step"]))  # fmt: skip
            distributed.hand_over(weights, consume, ranks)
            if rng is not None and state["sampler_rng"] is not None:
                rng.set_state(state["sampler_rng"].cpu())
        if ranks.main:  # rank 0's log only (truncated to the checkpoint on --resume)
            log = Log(log_path, keep_bytes=state["log_bytes"] if state is not None else None)

        def counts() -> dict:  # the compute axes of a log row
            return {
                "gpu_hours": progress.wall_seconds / 3600 * layout.in_use,
                "allocated_gpu_hours": bill.hours(), "wall_seconds": progress.wall_seconds,
                "flops": progress.flops_total,
            }  # fmt: skip

        if progress.step == 0:
            # vLLM evaluates on the rollout engine, started from the initial weights
            log.write(eval_row(cfg, s, evaluator, 0, holds_weights=cfg.generator == "vllm",
                               counts=counts()))  # fmt: skip
        start = progress.step
        rollouts = make_rollouts(cfg, generator, pool, s.train_ids, start + 1, ranks)
        bar = tqdm(range(start + 1, cfg.steps + 1), desc="rl", initial=start,
                   total=cfg.steps, disable=None if ranks.main else True)  # fmt: skip
        for step in bar:
            t0 = time.perf_counter()
            gen_idle0, waited0 = rollouts.generator_idle.seconds(), rollouts.trainer_wait
            # 1. this step's prompts and completions (GeneratorFailed if the generator died)
            batch = rollouts.next_batch(step)
            t_batch = time.perf_counter()
            # 2-3. rewards, filter, advantages; updates_per_batch AdamW steps
            row = train_step(cfg, s, batch, optimizer, pool, step)
            t_trained = time.perf_counter()
            # 4. the new weights to the generator, on steps whose weights it uses (several
            # ranks: each parameter gathered as it is sent); a failed push raises: stop
            if rollouts.takes_weights(step):
                weights = distributed.model_weights(s.model, ranks, push_dtype(cfg))
                rollouts.push(weights, version=step)
            elapsed = time.perf_counter() - t0
            progress.add(step, elapsed, row, s.parameters)
            log.write({
                "kind": "train", "step": step, **counts(), **row,
                "generator_idle_fraction":
                    min(1.0, (rollouts.generator_idle.seconds() - gen_idle0) / elapsed),
                "trainer_idle_fraction": (rollouts.trainer_wait - waited0) / elapsed,
                # where the step's time went: waiting for the batch (sync, PPO-off-policy: its
                # generation and the parked weights' load), scoring + updates, the weight push
                "step_seconds": elapsed, "batch_wait_seconds": t_batch - t0,
                "train_seconds": t_trained - t_batch, "push_seconds": t0 + elapsed - t_trained,
                # the machine's 1-minute load: on a shared machine it stretches every second
                "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
                "samples_total": progress.samples_total, "tokens_total": progress.tokens_total,
                "optimizer_updates": progress.updates_total,
            })  # fmt: skip
            if step % cfg.eval_every == 0 or step == cfg.steps:
                rollouts.hold()  # the pipeline's producer starts no new batch meanwhile
                holds = cfg.generator == "vllm" and rollouts.takes_weights(step)
                ev = eval_row(cfg, s, evaluator, step, holds_weights=holds, counts=counts())
                rollouts.release()
                log.write(ev)
                if ranks.main:
                    bar.set_postfix(val=f"{ev['val_pass_rate']:.3f}")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                checkpoint(ckpt_path, {
                    "step": step, "wall_seconds": progress.wall_seconds,
                    "samples_total": progress.samples_total,
                    "tokens_total": progress.tokens_total, "flops_total": progress.flops_total,
                    "updates_total": progress.updates_total,
                    "allocated_gpu_hours": bill.hours(), "log_bytes": log.sync(),
                    "pool": pool.state_dict(),
                    "sampler_rng": rng.get_state() if rng is not None else None,
                }, s.model, optimizer, ranks)  # fmt: skip
            if stop_after is not None and step >= stop_after:
                return
        if start < cfg.steps or not (out / "final" / "config.json").exists():
            weights = distributed.full_state_dict(s.model, ranks)  # all ranks take part
            if ranks.main:  # beside, then renamed: a kill mid-save leaves no half a folder,
                # which a --resume after the last checkpoint would take for the saved model
                tmp = out / "final.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                save_policy(s.model, s.tokenizer, tmp, state_dict=weights)
                shutil.rmtree(out / "final", ignore_errors=True)
                os.replace(tmp, out / "final")
    finally:
        if rollouts is not None:
            rollouts.close()
        log.close()
        close_engines(generator, evaluator)
        distributed.close(ranks)


if __name__ == "__main__":
    from recipe.cli import main

    main()
