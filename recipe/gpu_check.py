"""The trainer's device check: figures, thresholds, one JSON file, exit 1 when a check fails.

    python -m recipe.gpu_check --out gpu_check/ [--quick] [--max-head-mismatch 0.05 ...]
    bash scripts/gpu_check.sh gpu_check      # the same, within 8 minutes by design

Needs torch and transformers only (plus this package: no pytest, no plotting). On a GPU
(``device: cuda``) every part runs there; without CUDA the same parts run on CPU with a tiny
model (``--quick`` is implied): that is what CI runs. The parts, cheapest first, each writing its
figures into ``OUT/gpu_check.json`` as soon as it ends (a timeout keeps what was measured):

1. ``torch_pipeline``: a short PipelineRL-8 run with the torch sampler in its own process, on a
   built Llama (``gpu_small.yaml``'s shape: ~86M parameters; tiny with ``--quick``) after a
   short warm-up: tokens/s, updates, the importance ratios, the generator/trainer log-prob
   mismatch, an MFU estimate, ``gpu_hours`` and ``allocated_gpu_hours``.
2. ``device``: on that model, on the device: the bf16-autocast forward's log-prob error against
   FP32 with the FP32 head and with a bf16 head; the share of FP32 master weights that 10 AdamW
   steps at lr 1e-6 move under bf16 autocast (bf16 weights lose most such updates); the largest
   gradient difference between micro-batches of one and the whole batch (FP32; the aggregation
   keeps global denominators, so only summation order differs).
3. ``vllm_pipeline``: PipelineRL-8 with vLLM on the same GPU (``gpu_memory_utilization`` 0.3).
4. ``vllm_two_gpus`` (2 GPUs and vLLM): the trainer on GPU 0, the engine on GPU 1, pushes
   through the one-group NCCL broadcast (recipe/weight_broadcast.py); the devices counted.

Every figure with a threshold is a check (:data:`CHECKS`; each has a command-line flag). A check
passes, fails, or is skipped (its part did not run: no vLLM, one GPU; ``--require-vllm`` makes
a missing vLLM a failure). A part that raises fails its ``<part>_ran`` check; the error is in the
JSON. The exit status is 1 when any check failed, else 0.

MFU, an estimate stated as such: the trainer's useful FLOPs per step are taken as
``6 x parameters x trained tokens`` (forward + backward of the kept completions, prompt tokens
included) and the generator's as ``2 x parameters x generated tokens``; divided by the run's wall
time and the device's dense bf16 peak (H100/H200: 989 TFLOP/s; unknown devices: null).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "B200": 2250e12}


@dataclass(frozen=True)
class Check:
    """One figure's threshold: ``kind`` "max" (value <= default passes) or "min" (>=)."""

    name: str
    kind: str
    default: float
    why: str

    @property
    def flag(self) -> str:
        return f"--{self.kind}-{self.name.replace('_', '-')}"


CHECKS = [
    Check("torch_pipeline_ran", "min", 1, "the torch PipelineRL run finished (1) or raised (0)"),
    Check("torch_updates", "min", 1, "optimizer updates taken in the torch run"),
    Check("torch_tokens_per_s", "min", 0.0, "generated tokens per second of the torch run"),
    Check(
        "torch_fresh_logprob_mismatch",
        "max",
        0.1,
        "max |log pi_train - log pi_gen| on the torch sampler's fresh completions",
    ),
    Check("torch_lag_max", "max", 8, "largest token lag in versions (the lag bound k = 8)"),
    Check(
        "allocated_over_busy",
        "min",
        1.0,
        "allocated_gpu_hours / gpu_hours at the torch run's end (the bill is never below the "
        "busy hours)",
    ),
    Check("mfu", "min", 0.0, "MFU estimate of the torch run (null: unknown device peak)"),
    Check("peak_memory_gb", "max", 1e9, "peak GPU memory of the torch run, GiB"),
    Check(
        "head_mismatch_fp32",
        "max",
        0.05,
        "mean |log pi| error of the bf16-autocast forward with the FP32 head, against FP32",
    ),
    Check(
        "fp32_head_gain",
        "min",
        1.0,
        "the bf16 head's mean error over the FP32 head's (the FP32 head must not be worse)",
    ),
    Check(
        "master_weights_moved",
        "min",
        0.9,
        "share of FP32 master weights moved by 10 AdamW steps at lr 1e-6 under bf16 autocast",
    ),
    Check(
        "microbatch_gradient_gap",
        "max",
        1e-4,
        "max |grad(micro-batches of 1) - grad(whole batch)| / max |grad| in FP32",
    ),
    Check("vllm_pipeline_ran", "min", 1, "the vLLM PipelineRL run on the trainer's GPU finished"),
    Check(
        "vllm_fresh_logprob_mismatch",
        "max",
        0.5,
        "max |log pi_train - log pi_gen| on vLLM's fresh completions (bf16 engine, FP32 head)",
    ),
    Check("vllm_tokens_per_s", "min", 0.0, "generated tokens per second of the vLLM run"),
    Check("vllm_two_gpus_ran", "min", 1, "the 2-GPU run with NCCL weight pushes finished"),
    Check(
        "two_gpu_fresh_logprob_mismatch",
        "max",
        0.5,
        "max |log pi_train - log pi_gen| on fresh completions after NCCL pushes",
    ),
    Check("two_gpu_updates", "min", 1, "optimizer updates (hence NCCL pushes) in the 2-GPU run"),
]
BY_NAME = {c.name: c for c in CHECKS}


def judge(value, check: Check, threshold: float) -> bool | None:
    """True (passes), False (fails), None (no value: skipped)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return False
    return value <= threshold if check.kind == "max" else value >= threshold


def peak_flops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def model_shape(quick: bool) -> dict:
    if quick:
        return {"n_layer": 1, "hidden": 32, "heads": 2, "intermediate": 64}
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


def two_gpu_config(quick: bool, init: str | None) -> dict:
    """The 1-trainer + 1-engine variant: trainer on GPU 0, the engine alone on GPU 1 (vLLM's
    default memory share there), weights through the one-group NCCL broadcast, CUDA graphs on."""
    return {
        **base_config(quick, "cuda", init), "generator": "vllm", "weight_transfer": "nccl",
        "generator_devices": [1], "enforce_eager": False, "dtype": "bfloat16",
    }  # fmt: skip


def plan(cuda_devices: int, has_vllm: bool) -> dict[str, str | None]:
    """Each run of the check: None (it runs) or why it is skipped."""
    no_vllm = None if has_vllm else "vllm is not importable"
    two = no_vllm or (None if cuda_devices >= 2 else f"needs 2 GPUs (found {cuda_devices})")
    return {"torch_pipeline": None, "vllm_pipeline": no_vllm, "vllm_two_gpus": two}


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
        "generator_idle_fraction_mean": sum(r["generator_idle_fraction"] for r in train)
        / len(train),
        "trainer_idle_fraction_mean": sum(r["trainer_idle_fraction"] for r in train) / len(train),
        "train_reward_first_last": [train[0]["train_reward"], last["train_reward"]],
        "gpu_hours": last["gpu_hours"],
        "allocated_gpu_hours": last["allocated_gpu_hours"],
        "devices_counted": last["gpu_hours"] * 3600 / wall if wall else None,
    }


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
    """``OUT/gpu_check.json``: every figure, every check's verdict; rewritten after each part."""

    def __init__(self, path: Path, thresholds: dict[str, float]) -> None:
        self.path, self.thresholds = path, thresholds
        self.data: dict = {"checks": {}}

    def part(self, name: str, figures: dict) -> None:
        self.data[name] = figures
        self.save()

    def check(self, name: str, value) -> None:
        c = BY_NAME[name]
        value = None if value is None else float(value)
        self.data["checks"][name] = {
            "value": value, c.kind: self.thresholds[name],
            "passed": judge(value, c, self.thresholds[name]), "why": c.why,
        }  # fmt: skip
        self.save()

    def failed(self) -> list[str]:
        return [k for k, v in self.data["checks"].items() if v["passed"] is False]

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1))

    def table(self) -> str:
        lines = [f"{'check':34s} {'value':>12s} {'threshold':>14s}  verdict"]
        for name, v in self.data["checks"].items():
            value = "-" if v["value"] is None else f"{v['value']:.4g}"
            limit = f"{'<=' if 'max' in v else '>='} {v.get('max', v.get('min')):.4g}"
            verdict = {True: "PASS", False: "FAIL", None: "skipped"}[v["passed"]]
            lines.append(f"{name:34s} {value:>12s} {limit:>14s}  {verdict}")
        return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.gpu_check", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--out", required=True, help="folder for the runs and gpu_check.json")
    parser.add_argument("--quick", action="store_true", help="tiny model, few steps (CPU/CI)")
    parser.add_argument(
        "--require-vllm", action="store_true", help="a missing vLLM fails the check"
    )
    for c in CHECKS:
        parser.add_argument(
            c.flag, type=float, default=c.default, dest=c.name, metavar="X",
            help=f"{c.why} ({'fail above' if c.kind == 'max' else 'fail below'}; "
            f"default {c.default:g})",
        )  # fmt: skip
    return parser


def run_part(report: Report, name: str, body) -> dict | None:
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


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from recipe import config as C
    from recipe import versions
    from recipe.train import run

    start = time.perf_counter()
    cuda = torch.cuda.is_available()
    quick = args.quick or not cuda
    device = "cuda" if cuda else "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out / "gpu_check.json", {c.name: getattr(args, c.name) for c in CHECKS})
    peak = peak_flops()
    has_vllm = importlib.util.find_spec("vllm") is not None
    runs = plan(torch.cuda.device_count() if cuda else 0, has_vllm)
    try:
        versions.check()  # torch; vLLM's range is checked by its runs (a failure there)
    except versions.VersionError as err:
        print(f"gpu_check: {err}")
        return 1
    report.part("machine", {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "gpus": torch.cuda.device_count() if cuda else 0, "torch": torch.__version__,
        "cuda": torch.version.cuda, "quick": quick, "peak_bf16_flops": peak,
        "vllm": has_vllm, "plan": runs,
    })  # fmt: skip

    # 1. the torch sampler's PipelineRL run (it also builds and warms up the model)
    cfg = C.from_dict({**base_config(quick, device, None), "generator": "torch"})
    torch_dir, n_params = out / "torch_pipeline", 0

    def torch_pipeline() -> dict:
        nonlocal n_params
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        run(cfg, torch_dir)
        from recipe.model import load_policy

        n_params = sum(p.numel() for p in load_policy(torch_dir / "init")[0].parameters())
        figures = {"parameters": n_params, **summarize(torch_dir, n_params, peak)}
        if cuda:
            figures["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
        return figures

    t = run_part(report, "torch_pipeline", torch_pipeline)
    if t is not None:
        report.check("torch_updates", t["updates"])
        report.check("torch_tokens_per_s", t["tokens_per_s"])
        report.check("torch_fresh_logprob_mismatch", t["fresh_logprob_mismatch_max"])
        report.check("torch_lag_max", t["lag_max"])
        busy = t["gpu_hours"]
        report.check("allocated_over_busy", t["allocated_gpu_hours"] / busy if busy else None)
        report.check("mfu", t["mfu_estimate"])
        report.check("peak_memory_gb", t.get("peak_memory_gb"))
    init = torch_dir / "init"

    # 2. device figures on that model
    def device_figures() -> dict:
        model, tok, prompts, completions = sampled(init, torch.device(device))
        return {
            "head_logprob_mismatch": head_mismatch(model, tok, prompts, completions),
            "master_weights_moved": master_weights_moved(model, tok, prompts, completions),
            "microbatch_gradient_gap": microbatch_gradient_gap(model, tok, prompts, completions),
        }

    d = run_part(report, "device", device_figures) if t is not None else None
    if d is not None:
        head = d["head_logprob_mismatch"]
        report.check("head_mismatch_fp32", head["fp32_head"]["mean"])
        gain = head["bf16_head"]["mean"] / max(head["fp32_head"]["mean"], 1e-12)
        report.check("fp32_head_gain", gain)
        report.check("master_weights_moved", d["master_weights_moved"])
        report.check("microbatch_gradient_gap", d["microbatch_gradient_gap"])

    # 3. vLLM on the trainer's GPU; 4. vLLM on a GPU of its own with NCCL pushes
    def vllm_pipeline() -> dict:
        vcfg = C.from_dict({
            **base_config(quick, device, str(init)), "generator": "vllm",
            "gpu_memory_utilization": 0.3, "enforce_eager": not cuda,
            "dtype": "bfloat16" if cuda else "float32",
        })  # fmt: skip
        run(vcfg, out / "vllm_pipeline")
        return summarize(out / "vllm_pipeline", n_params, peak)

    def vllm_two_gpus() -> dict:
        run(C.from_dict(two_gpu_config(quick, str(init))), out / "vllm_two_gpus")
        return summarize(out / "vllm_two_gpus", n_params, peak)

    for name, body in (("vllm_pipeline", vllm_pipeline), ("vllm_two_gpus", vllm_two_gpus)):
        why = runs[name] if t is not None else "the torch run failed (no model)"
        if why is not None:
            report.part(name, {"skipped": why})
            missing = args.require_vllm and not has_vllm
            report.check(f"{name}_ran", 0 if missing else None)
            continue
        figures = run_part(report, name, body)
        if figures is None:
            continue
        if name == "vllm_pipeline":
            report.check("vllm_fresh_logprob_mismatch", figures["fresh_logprob_mismatch_max"])
            report.check("vllm_tokens_per_s", figures["tokens_per_s"])
        else:
            report.check("two_gpu_fresh_logprob_mismatch", figures["fresh_logprob_mismatch_max"])
            report.check("two_gpu_updates", figures["updates"])
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
