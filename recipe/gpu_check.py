"""One device check of the trainer, written to one JSON file (``scripts/gpu_check.sh`` runs it).

    python -m recipe.gpu_check --out gpu_check/ [--quick]

On a GPU (``device: cuda``): a short PipelineRL-8 run with the torch generator and, when vLLM is
importable, with vLLM on the same GPU (``gpu_memory_utilization`` 0.3), both on a built
~86M-parameter Llama (the ``gpu_small.yaml`` shape) after a short warm-up; for each, tokens/s
(generated tokens over the steps' wall time), updates taken, the importance ratios and the
generator/trainer log-prob mismatch; an MFU estimate of the trainer; and the bf16-versus-FP32-head
log-prob mismatch of the trainer's forward against an FP32 forward. Without CUDA it runs the same
path on CPU with a tiny model (``--quick`` is implied): that is what CI checks.

On a machine with 2 GPUs (and vLLM) a third run, ``vllm_two_gpus``: the trainer on GPU 0 and one
vLLM engine on GPU 1 (``generator_devices: [1]``), weights pushed through vLLM's NCCL transfer
(:func:`two_gpu_config`); its report adds the devices that ``gpu_hours`` counted (2). Which runs
happen, and why one is skipped, is :func:`plan`.

MFU, an estimate stated as such: the trainer's useful FLOPs per step are taken as
``6 x parameters x trained tokens`` (forward + backward of the kept completions, prompt tokens
included) and the generator's as ``2 x parameters x generated tokens``; divided by the run's wall
time and the device's dense bf16 peak (H100/H200: 989 TFLOP/s; unknown devices: null).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import torch

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "B200": 2250e12}


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
        "warmup_sft_steps": 20 if quick else 400, "steps": 3 if quick else 40,
        "prompts_per_step": 4 if quick else 48, "generations": 4 if quick else 16,
        "eval_every": 1000, "checkpoint_every": 1000, "lr": 3e-4 if quick else 3e-5,
        "lr_warmup_steps": 1, "micro_batch_size": 8 if quick else 256, "threads": 1 if quick else 8,
        **model_shape(quick),
    }  # fmt: skip


def two_gpu_config(quick: bool, init: str | None) -> dict:
    """The 1-trainer + 1-engine variant: trainer on GPU 0, the engine alone on GPU 1 (vLLM's
    default memory share there), weights through vLLM's NCCL transfer, CUDA graphs on."""
    return {
        **base_config(quick, "cuda", init), "generator": "vllm", "weight_transfer": "nccl",
        "generator_devices": [1], "enforce_eager": False, "dtype": "bfloat16",
    }  # fmt: skip


def plan(cuda_devices: int, has_vllm: bool) -> dict[str, str | None]:
    """Each run of the check: None (it runs) or why it is skipped."""
    no_vllm = None if has_vllm else "vllm is not importable"
    two = no_vllm or (None if cuda_devices >= 2 else f"needs 2 GPUs (found {cuda_devices})")
    return {"torch_pipeline": None, "vllm_pipeline": no_vllm, "vllm_two_gpus": two}


def summarize(out: Path, n_params: int, peak: float | None, prompts_per_step: int) -> dict:
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    wall = train[-1]["wall_seconds"]
    tokens = sum(r["tokens"] for r in train)
    # trained tokens: the kept prompts' completions, with their prompts (~7 tokens each here)
    kept = sum(
        (r["tokens"] + 7 * r["samples"]) * (1 - r["prompts_filtered"] / prompts_per_step)
        for r in train
    )
    flops = 6 * n_params * kept + 2 * n_params * tokens
    fresh = [r["fresh_logprob_mismatch"] for r in train if r["fresh_logprob_mismatch"] is not None]
    rho = [r["rho_mean"] for r in train if r["rho_mean"] is not None]
    return {
        "steps": len(train),
        "updates": sum(bool(r.get("updated")) for r in train),
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
        "train_reward_first_last": [train[0]["train_reward"], train[-1]["train_reward"]],
    }


def head_mismatch(init: Path, device: torch.device) -> dict:
    """|log pi| error of bf16-autocast forwards, with and without the FP32 head, against FP32."""
    from recipe.forward import completion_logprobs
    from recipe.generate import TorchGenerator
    from recipe.model import load_policy, stop_token_ids
    from recipe.task import split_problems

    model, tok = load_policy(init, device)
    stops = stop_token_ids(tok, init)
    probs, _ = split_problems(2, 64, 1, seed=5)
    prompts = [tok(p.prompt)["input_ids"] for p in probs]
    gen = TorchGenerator(model, eos_ids=stops, pad_id=tok.pad_token_id, fp32_head=True, seed=0,
                         copy=False)  # fmt: skip
    flat = [c for g in gen.generate(prompts, 4, max_new_tokens=4) for c in g]
    rows = [p for p in prompts for _ in range(4)]
    out = {}
    with torch.no_grad():
        kw = {"temperature": 1.0, "pad_id": tok.pad_token_id}
        ref, mask = completion_logprobs(model, rows, [c.tokens for c in flat], fp32_head=True,
                                        dtype="float32", **kw)  # fmt: skip
        for head in (True, False):
            lp, _ = completion_logprobs(model, rows, [c.tokens for c in flat], fp32_head=head,
                                        dtype="bfloat16", **kw)  # fmt: skip
            gap = (lp - ref).abs()[mask > 0]
            name = "fp32_head" if head else "bf16_head"
            out[name] = {"max": gap.max().item(), "mean": gap.mean().item()}
    out["tokens"] = int(mask.sum())
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m recipe.gpu_check", description=__doc__)
    parser.add_argument("--out", required=True, help="folder for the runs and gpu_check.json")
    parser.add_argument("--quick", action="store_true", help="tiny model, few steps (CPU/CI)")
    args = parser.parse_args(argv)
    from recipe import config as C
    from recipe.train import run

    start = time.perf_counter()
    cuda = torch.cuda.is_available()
    quick = args.quick or not cuda
    device = "cuda" if cuda else "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__, "quick": quick, "peak_bf16_flops": peak_flops(),
    }  # fmt: skip
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    cfg = C.from_dict({**base_config(quick, device, None), "generator": "torch"})
    run(cfg, out / "torch_pipeline")
    init = out / "torch_pipeline" / "init"
    n_params = sum(p.numel() for p in torch.load(
        out / "torch_pipeline" / "checkpoint.pt", weights_only=True)["model"].values())  # fmt: skip
    report["parameters"] = n_params
    report["torch_pipeline"] = summarize(
        out / "torch_pipeline", n_params, report["peak_bf16_flops"], cfg.prompts_per_step
    )
    if cuda:
        report["torch_pipeline"]["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
    report["head_logprob_mismatch"] = head_mismatch(init, torch.device(device))
    runs = plan(
        torch.cuda.device_count() if cuda else 0, importlib.util.find_spec("vllm") is not None
    )
    if runs["vllm_pipeline"] is not None:
        report["vllm_pipeline"] = {"skipped": runs["vllm_pipeline"]}
    else:
        try:
            vcfg = C.from_dict({
                **base_config(quick, device, str(init)), "generator": "vllm",
                "gpu_memory_utilization": 0.3, "enforce_eager": not cuda,
                "dtype": "bfloat16" if cuda else "float32",
            })  # fmt: skip
            run(vcfg, out / "vllm_pipeline")
            report["vllm_pipeline"] = summarize(
                out / "vllm_pipeline", n_params, report["peak_bf16_flops"], cfg.prompts_per_step
            )
        except Exception as err:  # reported, not raised: the torch half of the check stands
            report["vllm_pipeline"] = {"error": repr(err)[:2000]}
    if runs["vllm_two_gpus"] is not None:
        report["vllm_two_gpus"] = {"skipped": runs["vllm_two_gpus"]}
    else:
        try:
            run(C.from_dict(two_gpu_config(quick, str(init))), out / "vllm_two_gpus")
            two = summarize(
                out / "vllm_two_gpus", n_params, report["peak_bf16_flops"], cfg.prompts_per_step
            )
            last = [json.loads(x) for x in (out / "vllm_two_gpus" / "log.jsonl").read_text()
                    .splitlines()][-1]  # fmt: skip
            two["devices_counted"] = last["gpu_hours"] * 3600 / last["wall_seconds"]
            report["vllm_two_gpus"] = two
        except Exception as err:  # reported, not raised
            report["vllm_two_gpus"] = {"error": repr(err)[:2000]}
    report["elapsed_s"] = time.perf_counter() - start
    path = out / "gpu_check.json"
    path.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
