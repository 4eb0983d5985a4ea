"""The ScaleRL reference trainer: read it top to bottom.

    python -m recipe.train --config recipe/configs/cpu_demo.yaml --out runs/cpu_demo
    python -m recipe.train --config recipe/configs/cpu_demo.yaml --out runs/cpu_demo --resume

One step: draw 32 prompts from the pool, sample 16 completions each with the generator, score
them with the verifier, drop zero-variance prompts, compute advantages, take one AdamW step on the
policy loss, push the new weights to the generator. Where the batch comes from depends on
``mode`` (see recipe/pipeline.py): ``sync`` generates it right then; ``ppo-off-policy``
generates ``max_lag`` batches with frozen weights every ``max_lag`` steps; ``pipeline``
(PipelineRL-k) takes it from a queue that a background producer fills while the trainer trains,
with tokens at most ``max_lag`` policy versions old. ``generator`` picks the engine: ``torch``
(in-process sampler) or ``vllm`` (recipe/generate_vllm.py; the pipeline pushes weights into the
running engine mid-generation). Evaluation (mean@n pass rate on the held-out
set) runs every ``eval_every`` steps and at step 0.

Output in ``--out``: ``config.yaml`` (the resolved config), ``log.jsonl`` (one JSON object per
line: ``kind`` = "train" per step, "eval" per evaluation), ``checkpoint.pt`` (for ``--resume``),
``init/`` (the warm-up model when no ``init`` is given) and ``final/`` (the trained model, a
Hugging Face folder).

Compute accounting: ``wall_seconds`` counts the training steps' wall-clock time (generation,
scoring, update, weight push), not evaluation or checkpoint I/O, so the evaluation frequency does
not shift the compute axis; ``gpu_hours = wall_seconds / 3600 * devices`` (``devices`` = 1 on CPU).
After ``--resume`` the counter continues from the checkpoint's value: the time lost between the
checkpoint and the kill is not counted, and no log row written after the checkpoint survives.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from recipe import config as config_mod
from recipe.advantages import advantages, zero_variance_keep
from recipe.config import Config, ConfigError
from recipe.curriculum import PromptPool
from recipe.generate import Completion, TorchGenerator
from recipe.loss import policy_loss
from recipe.model import completion_logprobs, encode, load_policy, save_policy, warm_up
from recipe.pipeline import (
    Batch,
    GeneratorFailed,
    OffPolicyRollouts,
    PipelineRollouts,
    SharedPool,
    version_stats,
)
from recipe.task import Problem, reward, split_problems

# keys that may change between a run and its --resume (they do not change what is learned)
RESUMABLE = ("steps", "eval_every", "checkpoint_every", "threads")


def _finite(x: float | None) -> float | None:
    """JSON has no NaN/inf: non-finite numbers are logged as null."""
    return x if x is not None and math.isfinite(x) else None


def score(tokenizer, completion: Completion, problem: Problem) -> float:
    """0/1 reward of one completion (see recipe.task for the mapping)."""
    finished = not completion.truncated and bool(completion.tokens)
    body = completion.tokens[:-1] if finished else completion.tokens
    return reward(tokenizer.decode(body), problem.answer, finished)


def pad_right(rows: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(list(r), dtype=torch.float32)
    return out


def train_step(
    cfg: Config, model, tokenizer, batch: Batch, optimizer, pool, prompt_ids, problems, step
) -> dict:
    """One RL update on ``batch``; returns the train log fields (before accounting)."""
    idx, groups = batch.indices, batch.groups
    flat = [c for g in groups for c in g]
    rewards = torch.tensor(
        [score(tokenizer, c, problems[i]) for i, g in zip(idx, groups, strict=True) for c in g]
    )
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
        # Monte Carlo entropy estimate: mean of -log pi_gen over all sampled tokens (free; the
        # trainer's forward pass only sees the completions that survive the filter)
        "entropy": -sum(sum(c.logprobs) for c in flat) / max(1, n_tokens),
        "truncation_fraction": sum(c.truncated for c in flat) / len(flat),
        "prompts_filtered": len(idx) - len(group_ids[keep].unique()),
        "pool_size": pool.pool_size,
        **version_stats(groups, trainer_version=step - 1),
        "loss": None,
        "clip_fraction": None,
        "rho_mean": None,
        "rho_max": None,
        "fresh_logprob_mismatch": None,
        "grad_norm": None,
        "skipped_update": False,
    }
    lr = cfg.lr * min(1.0, step / max(1, cfg.lr_warmup_steps))
    for group in optimizer.param_groups:
        group["lr"] = lr
    row["lr"] = lr
    if bool(keep.any()):
        kept = keep.nonzero().squeeze(1).tolist()
        model.train()
        logp_train, _, mask = completion_logprobs(
            model,
            [prompt_ids[idx[int(group_ids[k])]] for k in kept],
            [flat[k].tokens for k in kept],
            fp32_head=cfg.fp32_head,
            temperature=cfg.temperature,
            pad_id=tokenizer.pad_token_id,
        )
        logp_gen = pad_right([flat[k].logprobs for k in kept], logp_train.shape[1])
        loss, diag = policy_loss(
            cfg.loss, logp_train, logp_gen, adv, mask, group_ids[keep],
            aggregation=cfg.aggregation, eps_max=cfg.eps_max,
            eps_low=cfg.eps_low, eps_high=cfg.eps_high,
        )  # fmt: skip
        row.update(loss=loss.item(), **diag)
        # generator/trainer mismatch on completions sampled entirely by the trainer's own
        # version: no policy change, no stale KV, so anything here is numerics (what the FP32
        # head controls). Mixed completions are excluded: after an in-flight push their tokens
        # come from new weights over KV of old ones, which the trainer's forward never sees.
        fresh = pad_right(
            [[set(flat[k].versions) == {step - 1}] * len(flat[k].versions) for k in kept],
            mask.shape[1],
        )
        gap = (logp_train.detach() - logp_gen).abs()[(fresh * mask) > 0]
        row["fresh_logprob_mismatch"] = gap.max().item() if gap.numel() else None
        optimizer.zero_grad(set_to_none=True)
        if torch.isfinite(loss):
            loss.backward()
            clip = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            row["grad_norm"] = grad_norm.item()
            if torch.isfinite(grad_norm):
                optimizer.step()
            else:
                row["skipped_update"] = True
        else:
            # a NaN/inf loss must never reach the weights (nor AdamW's moments)
            row["skipped_update"] = True
        optimizer.zero_grad(set_to_none=True)
    return row


def evaluate(cfg: Config, evaluator, tokenizer, val_ids, val_problems, step) -> float:
    """mean@n pass rate on the held-out set, with sampling reseeded from (seed, step)."""
    evaluator.rng.manual_seed(cfg.seed * 7919 + step)
    total, chunk = 0.0, max(1, 512 // cfg.val_samples_per_prompt)
    for lo in range(0, len(val_ids), chunk):
        groups = evaluator.generate(
            val_ids[lo : lo + chunk],
            cfg.val_samples_per_prompt,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
        )
        for g, p in zip(groups, val_problems[lo : lo + chunk], strict=True):
            total += sum(score(tokenizer, c, p) for c in g)
    return total / (len(val_ids) * cfg.val_samples_per_prompt)


def make_generator(cfg: Config, model, tokenizer, init: Path, max_model_len: int):
    """The rollout engine: the in-process torch sampler, or vLLM on the ``init`` folder."""
    if cfg.generator == "torch":
        return TorchGenerator(
            model, fp32_head=cfg.fp32_head, seed=cfg.seed + 1,
            eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id,
        )  # fmt: skip
    # imported here: vllm is optional (and starts engine processes: callers need a main guard)
    from recipe.generate_vllm import AsyncVLLMGenerator, VLLMGenerator

    engine = AsyncVLLMGenerator if cfg.mode == "pipeline" else VLLMGenerator
    return engine(
        init, fp32_head=cfg.fp32_head, dtype=cfg.dtype, seed=cfg.seed + 1,
        max_model_len=max_model_len,
    )  # fmt: skip


def make_rollouts(cfg: Config, generator, pool, prompt_ids, first_step: int):
    """The rollout source of ``cfg.mode`` (recipe/pipeline.py)."""
    if cfg.mode == "pipeline":
        return PipelineRollouts(
            generator, pool, prompt_ids, cfg, cfg.max_lag,
            first_step=first_step, version=first_step - 1,
        )  # fmt: skip
    k = cfg.max_lag if cfg.mode == "ppo-off-policy" else 1
    return OffPolicyRollouts(generator, pool, prompt_ids, cfg, k)


def save_checkpoint(path: Path, state: dict) -> None:
    """Write atomically: a kill mid-save leaves the previous checkpoint intact."""
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def run(cfg: Config, out: str | Path, *, resume: bool = False, stop_after: int | None = None):
    """Train according to ``cfg``, writing into ``out``; see the module docstring.

    ``stop_after`` ends the process's work right after that step's log rows, without a final
    checkpoint, exactly as a kill would (used to test ``resume``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log_path, ckpt_path = out / "log.jsonl", out / "checkpoint.pt"
    state = torch.load(ckpt_path, weights_only=True) if resume and ckpt_path.exists() else None
    if not resume and log_path.exists() and log_path.stat().st_size > 0:
        raise ConfigError(f"{log_path} already exists; pass --resume or choose another --out")
    (out / "config.yaml").write_text(config_mod.to_yaml(cfg))
    torch.set_num_threads(cfg.threads)
    for note in config_mod.inert_settings(cfg):
        warnings.warn(f"config: {note}", UserWarning, stacklevel=2)

    train_problems, val_problems = split_problems(
        cfg.digits, cfg.train_prompts, cfg.val_prompts, cfg.seed
    )
    init = cfg.init
    if init is None:
        init = out / "init"
        if not (init / "config.json").exists():
            warm_up(
                init, digits=cfg.digits, n_layer=cfg.n_layer, hidden=cfg.hidden, heads=cfg.heads,
                intermediate=cfg.intermediate, steps=cfg.warmup_sft_steps, mix=cfg.warmup_mix,
                pool=train_problems, target=cfg.warmup_target, seed=cfg.seed,
            )  # fmt: skip
    model, tokenizer = load_policy(init, cfg.dtype, cfg.fp32_head)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )  # fmt: skip
    pool = SharedPool(PromptPool(len(train_problems), cfg.seed, cfg.positive_threshold))
    train_ids = encode(tokenizer, train_problems)
    val_ids = encode(tokenizer, val_problems)
    max_len = max(map(len, train_ids + val_ids)) + cfg.max_new_tokens
    generator = make_generator(cfg, model, tokenizer, Path(init), max_len)
    # evaluation always uses the torch sampler: it needs no second engine
    evaluator = TorchGenerator(
        model, fp32_head=cfg.fp32_head, seed=cfg.seed + 2,
        eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id,
    )  # fmt: skip
    rng = getattr(generator, "rng", None)  # vLLM samples with its own seeded engine

    start, wall, samples_total, tokens_total = 0, 0.0, 0, 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        pool.load_state_dict(state["pool"])
        generator.push_weights(model.state_dict(), version=state["step"])
        if rng is not None and state["sampler_rng"] is not None:
            rng.set_state(state["sampler_rng"])
        start, wall = state["step"], state["wall_seconds"]
        samples_total, tokens_total = state["samples_total"], state["tokens_total"]
        with open(log_path, "r+b") as f:
            f.truncate(state["log_bytes"])
    elif log_path.exists():
        log_path.unlink()  # --resume without a checkpoint: nothing to keep, start over

    log = open(log_path, "ab")

    def write(row: dict) -> None:
        clean = {k: _finite(v) if isinstance(v, float) else v for k, v in row.items()}
        log.write((json.dumps(clean) + "\n").encode())
        log.flush()

    def eval_row(step: int) -> dict:
        evaluator.push_weights(model.state_dict(), version=step)
        rate = evaluate(cfg, evaluator, tokenizer, val_ids, val_problems, step)
        return {
            "kind": "eval", "step": step, "gpu_hours": wall / 3600 * cfg.devices,
            "wall_seconds": wall, "val_pass_rate": rate, "val_prompts": len(val_ids),
            "val_samples_per_prompt": cfg.val_samples_per_prompt,
        }  # fmt: skip

    rollouts = None
    try:
        if start == 0:
            write(eval_row(0))
        rollouts = make_rollouts(cfg, generator, pool, train_ids, first_step=start + 1)
        bar = tqdm(range(start + 1, cfg.steps + 1), desc="rl", disable=None, initial=start,
                   total=cfg.steps)  # fmt: skip
        for step in bar:
            t0 = time.perf_counter()
            gen_idle0, waited0 = rollouts.generator_idle.seconds(), rollouts.trainer_wait
            batch = rollouts.next_batch(step)  # raises GeneratorFailed if the generator died
            row = train_step(
                cfg, model, tokenizer, batch, optimizer, pool, train_ids, train_problems, step
            )
            rollouts.push(model.state_dict(), version=step)  # a failed push raises: stop
            elapsed = time.perf_counter() - t0
            wall += elapsed
            samples_total += row["samples"]
            tokens_total += row["tokens"]
            write({
                "kind": "train", "step": step, "gpu_hours": wall / 3600 * cfg.devices,
                "wall_seconds": wall, **row,
                "generator_idle_fraction":
                    min(1.0, (rollouts.generator_idle.seconds() - gen_idle0) / elapsed),
                "trainer_idle_fraction": (rollouts.trainer_wait - waited0) / elapsed,
                "samples_total": samples_total, "tokens_total": tokens_total,
            })  # fmt: skip
            if step % cfg.eval_every == 0 or step == cfg.steps:
                rollouts.hold()  # the pipeline's producer starts no new batch meanwhile
                ev = eval_row(step)
                rollouts.release()
                write(ev)
                bar.set_postfix(val=f"{ev['val_pass_rate']:.3f}")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                os.fsync(log.fileno())
                save_checkpoint(ckpt_path, {
                    "step": step, "wall_seconds": wall, "samples_total": samples_total,
                    "tokens_total": tokens_total, "log_bytes": log.tell(),
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "pool": pool.state_dict(),
                    "sampler_rng": rng.get_state() if rng is not None else None,
                })  # fmt: skip
            if stop_after is not None and step >= stop_after:
                return
        if start < cfg.steps or not (out / "final" / "config.json").exists():
            save_policy(model, tokenizer, out / "final")
    finally:
        if rollouts is not None:
            rollouts.close()
        log.close()
        generator.close()
        evaluator.close()


def _epilog() -> str:
    lines = [
        "log.jsonl: kind=train rows (step, gpu_hours, wall_seconds, samples, tokens, train_reward,",
        "  loss, entropy, clip_fraction, rho_mean, rho_max, truncation_fraction, prompts_filtered,",
        "  pool_size, skipped_update, grad_norm, lr, lag_min, lag_mean, lag_max (policy versions",
        "  between the trainer and the batch's tokens), mixed_version_samples,",
        "  fresh_logprob_mismatch (max |log pi_train - log pi_gen| over completions wholly",
        "  sampled by the trainer's own version),",
        "  generator_idle_fraction, trainer_idle_fraction, samples_total, tokens_total) and",
        "  kind=eval rows (step, gpu_hours, wall_seconds, val_pass_rate, val_prompts,",
        "  val_samples_per_prompt).",
        "  Rewards are 0/1 (exact answer + EOS); val_pass_rate is mean@n in [0, 1].",
        "",
        "config keys (YAML file or --set key=value; defaults in brackets):",
    ]
    for name, f in config_mod.FIELDS.items():
        lines.append(f"  {name:24s} {f.metadata['help']} [{f.default}]")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.train",
        description="ScaleRL reference trainer (modes sync | pipeline | ppo-off-policy; "
        "generators torch | vllm). Writes "
        "OUT/config.yaml and OUT/log.jsonl (kind=train per step, kind=eval per evaluation).",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="YAML file of config keys (default: built-in defaults)")
    parser.add_argument("--out", required=True, help="run folder (log, config, checkpoints)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key (repeatable; value parsed as YAML: 0.5, true, null)",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="continue from OUT/checkpoint.pt: log rows after it are dropped, compute continues; "
        "the config must match OUT/config.yaml except " + ", ".join(RESUMABLE),
    )  # fmt: skip
    parser.add_argument(
        "--stop-after", type=int, metavar="STEP",
        help="stop right after STEP as if killed (no final checkpoint); for testing --resume",
    )  # fmt: skip
    return parser


def resolve_config(args: argparse.Namespace) -> Config:
    """The run's config: from --config/--set, checked against OUT/config.yaml on --resume."""
    saved_path = Path(args.out) / "config.yaml"
    if args.resume and saved_path.exists():
        saved = config_mod.load(saved_path)
        cfg = config_mod.load(args.config or saved_path, args.set)
        changed = [
            k for k in config_mod.FIELDS
            if getattr(cfg, k) != getattr(saved, k) and k not in RESUMABLE
        ]  # fmt: skip
        if changed:
            raise ConfigError(
                f"--resume with a config that differs from {saved_path} in {changed}; only "
                f"{list(RESUMABLE)} may change (start a new --out instead)"
            )
        return cfg
    return config_mod.load(args.config, args.set)


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        cfg = resolve_config(args)
    except ConfigError as err:
        raise SystemExit(f"config error: {err}") from None
    try:
        run(cfg, args.out, resume=args.resume, stop_after=args.stop_after)
    except GeneratorFailed as err:
        raise SystemExit(
            f"run stopped: {err}\nthe log and the last checkpoint in {args.out} are intact; "
            "fix the cause and continue with --resume"
        ) from None


if __name__ == "__main__":
    main()
