"""The trainer's device check: figures, thresholds, one JSON file, exit 1 when a check fails.

    python -m recipe.gpu_check --out gpu_check/ [--quick] [--budget 415] [--max-... X]
    bash scripts/gpu_check.sh gpu_check      # the same, within 8 minutes on one GPU

Needs torch and transformers (plus this package: no pytest, no plotting), and vLLM on a machine
with CUDA. On a GPU (``device: cuda``) every part runs there; without CUDA the parts that fit run
on CPU with a tiny model (``--quick`` is implied): that is what CI runs. The parts, in this order
(the most informative first, so that a one-GPU machine's time goes to them), each writing its
figures into ``OUT/gpu_check.json`` as soon as it ends (a timeout keeps what was measured):

1. ``model``: builds and warms up a Llama (``gpu_small.yaml``'s shape: ~86M parameters; tiny with
   ``--quick``) that every other part starts from.
2. ``device``: on that model, on the device: the bf16-autocast forward's log-prob error against
   FP32 with the FP32 head and with a bf16 head; the share of FP32 master weights that 10 AdamW
   steps at lr 1e-6 move under bf16 autocast (bf16 weights lose most such updates); the largest
   gradient difference between micro-batches of one and the whole batch (FP32; the aggregation
   keeps global denominators, so only summation order differs).
3. ``vllm_pipeline`` (vLLM; required where CUDA is): PipelineRL-8 with vLLM on the trainer's GPU
   (``gpu_memory_utilization`` 0.3, weights pushed by RPC).
4. ``vllm_two_gpus`` (2+ GPUs): the trainer on GPU 0, the engine on GPU 1, pushes through the
   one-group NCCL broadcast (recipe/weight_broadcast.py).
5. ``fsdp_two_ranks`` (2+ GPUs): ``torchrun --nproc-per-node 2``: FSDP2 over GPUs 0-1, sync mode,
   each push streamed parameter by parameter from the shards into vLLM (the engine shares GPU 0
   by RPC; on 3+ GPUs it has GPU 2 and NCCL).
6. ``vllm_two_engines`` (3+ GPUs): the trainer on GPU 0, two offline engines on GPUs 1 and 2, sync
   mode, one NCCL group at rank offsets 1 and 2: every token is the trainer's own version, so the
   log-prob check covers both engines' copies of every push.
7. ``torch_pipeline``: PipelineRL-8 with the torch sampler in its own process.

A part runs where the machine has what it needs and says plainly when it does not ("needs 2 GPUs
(found 1)"); one that would start with less than its usual time left of ``--budget`` is skipped
as such. Every figure with a threshold is a check (:data:`CHECKS`; each has a command-line flag).
A check passes, fails, or is skipped (its part did not run); every threshold is one a broken
setup fails. A part that raises fails its ``<part>_ran`` check; the error is in the JSON. The
exit status is 1 when any check failed, else 0.

Throughput floors come from the device's dense bf16 peak (:data:`PEAK_BF16`, or
``--peak-tflops``), as MFU does: generated tokens/s must reach ``share x peak / (2 x
parameters)`` (a generation-only MFU of ``share``), and the run's MFU (below) its own floor.
Both floors are about a tenth of what an H100 is expected to give here (an estimate: no GPU has
run this yet), far above a trainer that fell back to CPU (~0.01%). Without a known peak (CPU,
an unlisted GPU) the tokens/s floors are absolute (``default``) and MFU is skipped.

MFU, an estimate stated as such: the trainer's useful FLOPs per step are taken as
``6 x parameters x trained tokens`` (forward + backward of the kept completions, prompt tokens
included) and the generator's as ``2 x parameters x generated tokens``; divided by the run's wall
time and the device's dense bf16 peak (H100/H200: 989 TFLOP/s).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

PEAK_BF16 = {
    "H100": 989e12, "H200": 989e12, "GH200": 989e12, "H20": 148e12, "A100": 312e12,
    "A800": 312e12, "L40S": 362e12, "L40": 181e12, "L4": 121e12, "A10": 125e12,
    "B200": 2250e12, "B100": 1750e12,
}  # fmt: skip
GIB = 2**30


@dataclass(frozen=True)
class Check:
    """One figure's threshold: ``kind`` "max" (value <= threshold passes) or "min" (>=).

    ``peak_share``: the threshold is ``peak_share x peak / (2 x parameters)`` tokens/s when the
    device's peak is known, ``default`` otherwise.
    """

    name: str
    kind: str
    default: float
    why: str
    peak_share: float | None = None

    @property
    def flag(self) -> str:
        return f"--{self.kind}-{self.name.replace('_', '-')}"


def ran(part: str, what: str) -> Check:
    return Check(f"{part}_ran", "min", 1, f"{what} finished (1) or raised or could not run (0)")


GEN_SHARE = 5e-5  # generated tokens/s floor: this share of the peak at 2 x parameters FLOPs each
CHECKS = [
    ran("model", "building and warming up the model"),
    Check(
        "head_mismatch_fp32", "max", 0.05,
        "mean |log pi| error of the bf16-autocast forward with the FP32 head, against FP32",
    ),
    Check(
        "fp32_head_gain", "min", 1.0,
        "the bf16 head's mean error over the FP32 head's (the FP32 head must not be worse)",
    ),
    Check(
        "master_weights_moved", "min", 0.9,
        "share of FP32 master weights moved by 10 AdamW steps at lr 1e-6 under bf16 autocast",
    ),
    Check(
        "microbatch_gradient_gap", "max", 1e-4,
        "max |grad(micro-batches of 1) - grad(whole batch)| / max |grad| in FP32",
    ),
    ran("vllm_pipeline", "the vLLM PipelineRL run on the trainer's GPU"),
    Check("vllm_updates", "min", 1, "optimizer updates taken in the vLLM run"),
    Check(
        "vllm_fresh_logprob_mismatch", "max", 0.5,
        "max |log pi_train - log pi_gen| on vLLM's fresh completions (bf16 engine, FP32 head)",
    ),
    Check(
        "vllm_tokens_per_s", "min", 10.0,
        "generated tokens per second of the vLLM run (floor: 5e-5 of the peak at 2N FLOPs a "
        "token; 10 without a known peak)", peak_share=GEN_SHARE,
    ),
    Check("vllm_mfu", "min", 5e-4, "MFU estimate of the vLLM run (skipped: unknown peak)"),
    Check(
        "vllm_peak_memory_gb", "max", 8.0,
        "peak memory of the trainer's process in the vLLM run, GiB (GPU: allocated; CPU: RSS); "
        "expected ~2.5 on the full model",
    ),
    ran("vllm_two_gpus", "the 2-GPU run with NCCL weight pushes"),
    Check("two_gpu_updates", "min", 1, "optimizer updates (hence NCCL pushes) in the 2-GPU run"),
    Check(
        "two_gpu_fresh_logprob_mismatch", "max", 0.5,
        "max |log pi_train - log pi_gen| on fresh completions after NCCL pushes",
    ),
    ran("fsdp_two_ranks", "the 2-rank torchrun/FSDP2 run"),
    Check("fsdp_updates", "min", 1, "optimizer updates in the 2-rank run"),
    Check(
        "fsdp_fresh_logprob_mismatch", "max", 0.5,
        "max |log pi_train - log pi_gen| in the 2-rank sync run (every push streamed from the "
        "shards; every token fresh)",
    ),
    ran("vllm_two_engines", "the run with one trainer GPU and two engine GPUs"),
    Check("two_engines_updates", "min", 1, "optimizer updates in the two-engine run"),
    Check(
        "two_engines_fresh_logprob_mismatch", "max", 0.5,
        "max |log pi_train - log pi_gen| over both engines' tokens in the two-engine sync run",
    ),
    ran("torch_pipeline", "the torch PipelineRL run"),
    Check("torch_updates", "min", 1, "optimizer updates taken in the torch run"),
    Check(
        "torch_tokens_per_s", "min", 10.0,
        "generated tokens per second of the torch run (floor: 5e-5 of the peak at 2N FLOPs a "
        "token; 10 without a known peak)", peak_share=GEN_SHARE,
    ),
    Check(
        "torch_fresh_logprob_mismatch", "max", 0.1,
        "max |log pi_train - log pi_gen| on the torch sampler's fresh completions",
    ),
    Check("torch_lag_max", "max", 8, "largest token lag in versions (the lag bound k = 8)"),
    Check(
        "allocated_over_busy", "min", 1.0,
        "allocated_gpu_hours / gpu_hours at the torch run's end (the bill is never below the "
        "busy hours)",
    ),
    Check("torch_mfu", "min", 5e-4, "MFU estimate of the torch run (skipped: unknown peak)"),
    Check(
        "torch_peak_memory_gb", "max", 8.0,
        "peak memory of the trainer's process in the torch run, GiB (GPU: allocated; CPU: RSS)",
    ),
]  # fmt: skip
BY_NAME = {c.name: c for c in CHECKS}
ORDER = {c.name: i for i, c in enumerate(CHECKS)}

# Each part: what it needs (GPUs, vLLM) and the seconds it is expected to need at least (a part
# is not started with less of the budget left: it would be cut mid-way and say less).
PARTS = {
    "model": (0, False, 30), "device": (0, False, 15), "vllm_pipeline": (0, True, 90),
    "vllm_two_gpus": (2, True, 100), "fsdp_two_ranks": (2, False, 100),
    "vllm_two_engines": (3, True, 120), "torch_pipeline": (0, False, 45),
}  # fmt: skip


def judge(value, check: Check, threshold: float) -> bool | None:
    """True (passes), False (fails), None (no value: skipped)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return False
    return value <= threshold if check.kind == "max" else value >= threshold


def threshold(check: Check, given: float | None, peak: float | None, params: int | None) -> float:
    """The flag's value when given, else the floor derived from the peak, else the default."""
    if given is not None:
        return given
    if check.peak_share is not None and peak and params:
        return check.peak_share * peak / (2 * params)
    return check.default


def peak_flops(given_tflops: float | None = None) -> float | None:
    if given_tflops is not None:
        return given_tflops * 1e12
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    # the longest matching key: "GH200" before "H200", "L40S" before "L40" and "L4"
    keys = sorted((k for k in PEAK_BF16 if k in name), key=len, reverse=True)
    return PEAK_BF16[keys[0]] if keys else None


def model_shape(quick: bool) -> dict:
    if quick:  # head size 32: the smallest vLLM's CPU attention takes (16 kills its engine)
        return {"n_layer": 1, "hidden": 64, "heads": 2, "intermediate": 128}
    return {"n_layer": 12, "hidden": 768, "heads": 12, "intermediate": 2048}


def base_config(quick: bool, device: str, init: str | None) -> dict:
    return {
        "device": device, "dtype": "bfloat16", "fp32_head": True, "mode": "pipeline",
        "max_lag": 8, "init": init, "digits": 2, "max_new_tokens": 4, "train_prompts": 2000,
        "val_prompts": 32, "val_samples_per_prompt": 2,
        "warmup_sft_steps": 20 if quick else 400, "steps": 3 if quick else 20,
        "prompts_per_step": 4 if quick else 48, "generations": 4 if quick else 16,
        "eval_every": 1000, "checkpoint_every": 1000, "lr": 3e-4 if quick else 3e-5,
        "lr_warmup_steps": 1, "micro_batch_size": 8 if quick else 256, "threads": 1 if quick else 8,
        # the tiny quick model solves nothing yet: without the filter its steps still update
        "zero_variance_filter": not quick, **model_shape(quick),
    }  # fmt: skip


def vllm_config(quick: bool, device: str, init: str | None) -> dict:
    """PipelineRL-8 with vLLM on the trainer's GPU (bf16 on GPU; FP32 on CPU)."""
    cuda = device == "cuda"
    return {
        **base_config(quick, device, init), "generator": "vllm", "gpu_memory_utilization": 0.3,
        "enforce_eager": not cuda, "dtype": "bfloat16" if cuda else "float32",
    }  # fmt: skip


def two_gpu_config(quick: bool, init: str | None) -> dict:
    """The 1-trainer + 1-engine variant: trainer on GPU 0, the engine alone on GPU 1 (vLLM's
    default memory share there), weights through the one-group NCCL broadcast, CUDA graphs on."""
    return {
        **base_config(quick, "cuda", init), "generator": "vllm", "weight_transfer": "nccl",
        "generator_devices": [1], "enforce_eager": False, "dtype": "bfloat16",
    }  # fmt: skip


def two_engines_config(quick: bool, init: str | None) -> dict:
    """1 trainer GPU + 2 engine GPUs (1 and 2), sync mode: offline engines, one NCCL group."""
    return {
        **base_config(quick, "cuda", init), "generator": "vllm", "mode": "sync",
        "generators": 2, "weight_transfer": "nccl", "enforce_eager": False, "dtype": "bfloat16",
        "steps": 3 if quick else 8,
    }  # fmt: skip


def fsdp_config(quick: bool, device: str, init: str | None, gpus: int, has_vllm: bool) -> dict:
    """2 torchrun ranks, sync mode; vLLM sharing GPU 0 by RPC (on 3+ GPUs: GPU 2, NCCL), the
    torch sampler where there is no vLLM (CPU)."""
    cfg = {**base_config(quick, device, init), "mode": "sync", "steps": 3 if quick else 8}
    if has_vllm:
        cfg.update(generator="vllm", enforce_eager=device != "cuda",
                   dtype="bfloat16" if device == "cuda" else "float32")  # fmt: skip
        if gpus >= 3:
            cfg.update(weight_transfer="nccl")  # engine on GPU 2, after the trainer ranks
        else:
            cfg.update(gpu_memory_utilization=0.3)
    else:
        cfg.update(generator="torch")
    return cfg


def plan(cuda_devices: int, has_vllm: bool, cuda: bool | None = None) -> dict[str, str | None]:
    """Each part of the check: None (it runs) or why it cannot run on this machine."""
    cuda = cuda_devices > 0 if cuda is None else cuda
    out: dict[str, str | None] = {}
    for name, (gpus, needs_vllm, _) in PARTS.items():
        why = None
        if needs_vllm and not has_vllm:
            why = "vllm is not importable"
        if gpus and cuda_devices < gpus:
            why = f"needs {gpus} GPUs (found {cuda_devices})"
        out[name] = why
    return out


def skip_fails(why: str, vllm_required: bool) -> bool:
    """Whether a part skipped for ``why`` fails its ``<part>_ran`` check: a missing vLLM where
    it is required (CUDA, or ``--require-vllm``), or a part the budget left no time for (the
    machine is slower than the check was sized for). Too few GPUs is a plain skip."""
    if why == "vllm is not importable":
        return vllm_required
    return why.startswith("not started")


def read_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def summarize(out: Path, n_params: int, peak: float | None) -> dict:
    """A run's figures from its log."""
    train = [r for r in read_rows(out) if r["kind"] == "train"]
    wall = train[-1]["wall_seconds"]
    tokens = sum(r["tokens"] for r in train)
    flops = 6 * n_params * sum(r["trained_tokens"] for r in train) + 2 * n_params * tokens
    fresh = [r["fresh_logprob_mismatch"] for r in train if r["fresh_logprob_mismatch"] is not None]
    rho = [r["rho_mean"] for r in train if r["rho_mean"] is not None]
    last = train[-1]
    return {
        "steps": len(train),
        "updates": sum(r["updates"] for r in train),
        "wall_seconds": wall,
        "tokens_per_s": tokens / wall if wall else None,
        "samples_per_s": sum(r["samples"] for r in train) / wall if wall else None,
        "mfu_estimate": flops / wall / peak if wall and peak else None,
        "fresh_logprob_mismatch_max": max(fresh) if fresh else None,
        "rho_mean_range": [min(rho), max(rho)] if rho else None,
        "lag_max": max(r["lag_max"] for r in train),
        # lag_mean is per token (every token's lag, averaged), not per rollout
        "lag_mean_per_token": sum(r["lag_mean"] for r in train) / len(train),
        "generator_idle_fraction_mean": sum(r["generator_idle_fraction"] for r in train)
        / len(train),
        "trainer_idle_fraction_mean": sum(r["trainer_idle_fraction"] for r in train) / len(train),
        "train_reward_first_last": [train[0]["train_reward"], last["train_reward"]],
        "gpu_hours": last["gpu_hours"],
        "allocated_gpu_hours": last["allocated_gpu_hours"],
        "devices_counted": last["gpu_hours"] * 3600 / wall if wall else None,
    }


def peak_memory_gb(cuda: bool) -> float:
    """This process's peak: GPU memory allocated since the last reset, or the host RSS."""
    if cuda:
        return torch.cuda.max_memory_allocated() / GIB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # KiB on Linux


# --------------------------------------------------------------------------- device figures


def sampled(init: Path, device: torch.device, n_prompts: int = 16, n: int = 4):
    """The warmed-up policy on ``device``, prompts, and completions it sampled."""
    from recipe.generate import TorchGenerator
    from recipe.model import load_policy, stop_token_ids
    from recipe.tasks.addition import split_problems

    model, tok = load_policy(init, device)
    stops = stop_token_ids(tok, init)
    problems, _ = split_problems(2, n_prompts, 1, seed=5)
    prompts = [tok(p.prompt)["input_ids"] for p in problems]
    gen = TorchGenerator(model, eos_ids=stops, pad_id=tok.pad_token_id, fp32_head=True, seed=0,
                         copy=False)  # fmt: skip
    groups = gen.generate(prompts, n, max_new_tokens=4)
    rows = [p for p in prompts for _ in range(n)]
    return model, tok, rows, [c.tokens for g in groups for c in g]


def head_mismatch(model, tok, prompts, completions) -> dict:
    """|log pi| error of bf16-autocast forwards, with and without the FP32 head, against FP32."""
    from recipe.forward import completion_logprobs

    out = {}
    kw = {"temperature": 1.0, "pad_id": tok.pad_token_id}
    with torch.no_grad():
        ref, mask = completion_logprobs(model, prompts, completions, fp32_head=True,
                                        dtype="float32", **kw)  # fmt: skip
        for head in (True, False):
            lp, _ = completion_logprobs(model, prompts, completions, fp32_head=head,
                                        dtype="bfloat16", **kw)  # fmt: skip
            gap = (lp - ref).abs()[mask > 0]
            out["fp32_head" if head else "bf16_head"] = {
                "max": gap.max().item(),
                "mean": gap.mean().item(),
            }
    out["tokens"] = int(mask.sum())
    return out


def master_weights_moved(model, tok, prompts, completions) -> float:
    """Share of FP32 master weights that 10 AdamW steps at lr 1e-6 move under bf16 autocast."""
    from recipe.forward import completion_logprobs

    model = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, eps=1e-15, weight_decay=0.0)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    for _ in range(10):
        logp, mask = completion_logprobs(
            model, prompts, completions, fp32_head=True, temperature=1.0,
            pad_id=tok.pad_token_id, dtype="bfloat16",
        )  # fmt: skip
        opt.zero_grad()
        (-(logp * mask).sum() / mask.sum()).backward()
        opt.step()
    moved = sum(int((p.detach() != start[n]).sum()) for n, p in model.named_parameters())
    return moved / sum(p.numel() for p in model.parameters())


def microbatch_gradient_gap(model, tok, prompts, completions, n: int = 4) -> float:
    """Largest gradient difference (relative to the largest gradient) between micro-batches of
    one completion and the whole batch, with the whole batch's aggregation denominators; FP32."""
    from recipe.forward import completion_logprobs, right_pad
    from recipe.loss import policy_loss, token_weights

    model = copy.deepcopy(model).train()
    device = next(model.parameters()).device
    groups = torch.arange(len(prompts), device=device) // n
    adv = torch.linspace(-1, 1, len(prompts), device=device)
    width = max(1, max(len(c) for c in completions))
    masks = [[1.0] * len(c) for c in completions]
    weights = token_weights(right_pad(masks, width, device=device), groups, "prompt")

    def gradient(size: int) -> list[torch.Tensor]:
        model.zero_grad(set_to_none=True)
        for lo in range(0, len(prompts), size):
            at = torch.arange(lo, min(lo + size, len(prompts)), device=device)
            logp, mask = completion_logprobs(
                model, prompts[lo : lo + size], completions[lo : lo + size], fp32_head=True,
                temperature=1.0, pad_id=tok.pad_token_id, dtype="float32",
            )  # fmt: skip
            w = logp.shape[1]
            loss, _ = policy_loss(
                "cispo", logp, logp.detach(), adv[at], mask, groups[at], aggregation="prompt",
                weights=weights[at, :w],
            )  # fmt: skip
            loss.backward()
        return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    whole, ones = gradient(len(prompts)), gradient(1)
    scale = max(g.abs().max().item() for g in whole) or 1.0
    return max((a - b).abs().max().item() for a, b in zip(ones, whole, strict=True)) / scale


# --------------------------------------------------------------------------- the check


class Report:
    """``OUT/gpu_check.json``: every figure, every check's verdict; rewritten after each part.

    ``given``: thresholds set by flags (None: the default, or the floor from ``peak``)."""

    def __init__(self, path: Path, given: dict[str, float | None], peak: float | None) -> None:
        self.path, self.given, self.peak = path, given, peak
        self.params: int | None = None  # the model's parameters, once built
        self.data: dict = {"checks": {}, "skipped": {}}

    def part(self, name: str, figures: dict) -> None:
        self.data[name] = figures
        self.save()

    def skip(self, name: str, why: str) -> None:
        self.data["skipped"][name] = why
        self.part(name, {"skipped": why})

    def check(self, name: str, value) -> None:
        c = BY_NAME[name]
        value = None if value is None else float(value)
        limit = threshold(c, self.given.get(name), self.peak, self.params)
        self.data["checks"][name] = {
            "value": value, c.kind: limit, "passed": judge(value, c, limit), "why": c.why,
        }  # fmt: skip
        self.save()

    def failed(self) -> list[str]:
        return [k for k, v in self.data["checks"].items() if v["passed"] is False]

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1))

    def table(self) -> str:
        lines = [f"{'check':36s} {'value':>12s} {'threshold':>14s}  verdict"]
        for name, v in sorted(self.data["checks"].items(), key=lambda kv: ORDER[kv[0]]):
            value = "-" if v["value"] is None else f"{v['value']:.4g}"
            limit = f"{'<=' if 'max' in v else '>='} {v.get('max', v.get('min')):.4g}"
            verdict = {True: "PASS", False: "FAIL", None: "skipped"}[v["passed"]]
            lines.append(f"{name:36s} {value:>12s} {limit:>14s}  {verdict}")
        for name, why in self.data["skipped"].items():
            lines.append(f"part {name} skipped: {why}")
        return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.gpu_check", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--out", required=True, help="folder for the runs and gpu_check.json")
    parser.add_argument("--quick", action="store_true", help="tiny model, few steps (CPU/CI)")
    parser.add_argument(
        "--require-vllm", action="store_true",
        help="a missing vLLM fails the check on CPU too (with CUDA it always does)",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=float, default=415.0, metavar="S",
        help="seconds for the whole check: a part is not started with less than its usual "
        "time left (default 415: scripts/gpu_check.sh's 8 minutes on one GPU)",
    )  # fmt: skip
    parser.add_argument(
        "--peak-tflops",
        type=float,
        metavar="T",
        help="the device's dense bf16 peak in TFLOP/s, for a GPU not in the table",
    )
    for c in CHECKS:
        floor = " or the floor from the peak" if c.peak_share else ""
        parser.add_argument(
            c.flag, type=float, default=None, dest=c.name, metavar="X",
            help=f"{c.why} ({'fail above' if c.kind == 'max' else 'fail below'}; "
            f"default {c.default:g}{floor})",
        )  # fmt: skip
    return parser


def run_part(report: Report, name: str, body: Callable[[], dict]) -> dict | None:
    """``body()``'s figures as part ``name``; an error is recorded (and fails ``<name>_ran``)."""
    start = time.perf_counter()
    try:
        figures = body()
    except Exception as err:
        report.part(name, {"error": repr(err)[:2000], "traceback": traceback.format_exc()[-4000:]})
        if f"{name}_ran" in BY_NAME:
            report.check(f"{name}_ran", 0)
        return None
    figures["seconds"] = time.perf_counter() - start
    report.part(name, figures)
    if f"{name}_ran" in BY_NAME:
        report.check(f"{name}_ran", 1)
    return figures


def torchrun(cfg: dict, out: Path, timeout: float) -> None:
    """``recipe.train`` with ``cfg`` under ``torchrun --nproc-per-node 2`` (raises on failure,
    with the end of its output)."""
    from recipe import config as C

    out.mkdir(parents=True, exist_ok=True)
    config = out.parent / f"{out.name}.yaml"
    config.write_text(C.to_yaml(C.from_dict(cfg)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "recipe.train", "--config", str(config), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=max(30.0, timeout),
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited with {proc.returncode}: {proc.stderr[-3000:]}")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Path(args.out)
    names = ["gpu_check.json", *(f"{name}/log.jsonl" for name in PARTS)]
    earlier = [name for name in names if (out / name).exists()]
    if earlier:  # a rerun would replace the report, and every part that trains would fail
        parser.error(
            f"argument --out: {out} holds an earlier check ({', '.join(earlier[:3])}): its "
            "report would be replaced and its runs' logs would fail every part that trains; "
            "choose a new --out, or remove that one"
        )
    from recipe import config as C
    from recipe import versions
    from recipe.run import setup
    from recipe.train import run

    start = time.perf_counter()
    cuda = torch.cuda.is_available()
    quick = args.quick or not cuda
    device = "cuda" if cuda else "cpu"
    gpus = torch.cuda.device_count() if cuda else 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    peak = peak_flops(args.peak_tflops)
    report = Report(out / "gpu_check.json", {c.name: getattr(args, c.name) for c in CHECKS}, peak)
    has_vllm = importlib.util.find_spec("vllm") is not None
    runs = plan(gpus, has_vllm, cuda)
    try:
        versions.check(vllm=has_vllm)  # torch, and vLLM's range and API when it is there
    except versions.VersionError as err:
        print(f"gpu_check: {err}")
        return 1
    report.part("machine", {
        "device": torch.cuda.get_device_name() if cuda else "cpu", "gpus": gpus,
        "torch": torch.__version__, "cuda": torch.version.cuda, "quick": quick,
        "peak_bf16_flops": peak, "vllm": has_vllm, "plan": runs, "budget_s": args.budget,
    })  # fmt: skip
    vllm_needed = cuda or args.require_vllm
    init = out / "model" / "init"

    def model() -> dict:
        cfg = C.from_dict({**base_config(quick, device, None), "generator": "torch"})
        torch.set_num_threads(cfg.threads)
        s = setup(cfg, out / "model")
        report.params = s.parameters
        return {"parameters": s.parameters}

    def device_figures() -> dict:
        model, tok, prompts, completions = sampled(init, torch.device(device))
        return {
            "head_logprob_mismatch": head_mismatch(model, tok, prompts, completions),
            "master_weights_moved": master_weights_moved(model, tok, prompts, completions),
            "microbatch_gradient_gap": microbatch_gradient_gap(model, tok, prompts, completions),
        }

    def in_process(name: str, cfg: dict) -> Callable[[], dict]:
        def body() -> dict:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            run(C.from_dict(cfg), out / name)
            return {**summarize(out / name, report.params, peak),
                    "peak_memory_gb": peak_memory_gb(cuda)}  # fmt: skip

        return body

    def fsdp() -> dict:
        cfg = fsdp_config(quick, device, str(init), gpus, has_vllm)
        torchrun(cfg, out / "fsdp_two_ranks", args.budget - (time.perf_counter() - start))
        return summarize(out / "fsdp_two_ranks", report.params, peak)

    bodies: dict[str, Callable[[], dict]] = {
        "model": model,
        "device": device_figures,
        "vllm_pipeline": in_process("vllm_pipeline", vllm_config(quick, device, str(init))),
        "vllm_two_gpus": in_process("vllm_two_gpus", two_gpu_config(quick, str(init))),
        "fsdp_two_ranks": fsdp,
        "vllm_two_engines": in_process("vllm_two_engines", two_engines_config(quick, str(init))),
        "torch_pipeline": in_process(
            "torch_pipeline", {**base_config(quick, device, str(init)), "generator": "torch"}
        ),
    }
    checks = {  # part -> (check, figure) pairs
        "device": [],
        "vllm_pipeline": [("vllm_updates", "updates"),
                          ("vllm_fresh_logprob_mismatch", "fresh_logprob_mismatch_max"),
                          ("vllm_tokens_per_s", "tokens_per_s"), ("vllm_mfu", "mfu_estimate"),
                          ("vllm_peak_memory_gb", "peak_memory_gb")],
        "vllm_two_gpus": [("two_gpu_updates", "updates"),
                          ("two_gpu_fresh_logprob_mismatch", "fresh_logprob_mismatch_max")],
        "fsdp_two_ranks": [("fsdp_updates", "updates"),
                           ("fsdp_fresh_logprob_mismatch", "fresh_logprob_mismatch_max")],
        "vllm_two_engines": [("two_engines_updates", "updates"),
                             ("two_engines_fresh_logprob_mismatch", "fresh_logprob_mismatch_max")],
        "torch_pipeline": [("torch_updates", "updates"), ("torch_tokens_per_s", "tokens_per_s"),
                           ("torch_fresh_logprob_mismatch", "fresh_logprob_mismatch_max"),
                           ("torch_lag_max", "lag_max"), ("torch_mfu", "mfu_estimate"),
                           ("torch_peak_memory_gb", "peak_memory_gb")],
    }  # fmt: skip
    for name, body in bodies.items():
        why = runs[name]
        if why is None and name != "model" and "model_ran" in report.data["checks"]:
            if not report.data["checks"]["model_ran"]["passed"]:
                why = "the model could not be built"
        left = args.budget - (time.perf_counter() - start)
        if why is None and left < PARTS[name][2]:
            why = f"not started: {left:.0f} s of the {args.budget:.0f} s budget left"
        if why is not None:
            report.skip(name, why)
            if f"{name}_ran" in BY_NAME:
                report.check(f"{name}_ran", 0 if skip_fails(why, vllm_needed) else None)
            continue
        figures = run_part(report, name, body)
        if figures is None:
            continue
        if name == "device":
            head = figures["head_logprob_mismatch"]
            report.check("head_mismatch_fp32", head["fp32_head"]["mean"])
            gain = head["bf16_head"]["mean"] / max(head["fp32_head"]["mean"], 1e-12)
            report.check("fp32_head_gain", gain)
            report.check("master_weights_moved", figures["master_weights_moved"])
            report.check("microbatch_gradient_gap", figures["microbatch_gradient_gap"])
        for check, figure in checks.get(name, []):
            report.check(check, figures.get(figure))
        if name == "torch_pipeline":
            busy = figures["gpu_hours"]
            report.check(
                "allocated_over_busy", figures["allocated_gpu_hours"] / busy if busy else None
            )
    for c in CHECKS:  # every check appears, with null where its part did not run
        if c.name not in report.data["checks"]:
            report.check(c.name, None)
    failed = report.failed()
    report.data["failed"] = failed
    report.data["elapsed_s"] = time.perf_counter() - start
    report.save()
    print(report.table())
    print(f"gpu_check: {len(CHECKS)} checks, {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else "") + f"; report: {report.path}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
