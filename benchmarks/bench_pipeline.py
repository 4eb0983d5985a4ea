"""PipelineRL-k against PPO-off-policy-k (and sync) on a short CPU run of the demo recipe.

Each mode trains from the same warmed-up model with the same config; the table shows throughput
(samples and tokens per second of training wall time, evaluation excluded), the idle fractions of
generator and trainer (means over steps), and the reward each produced. Per-step train reward
and the evaluation curve go to benchmarks/results/pipeline.json.

Run (vLLM generator; needs the vLLM venv):
    VLLM_LOGGING_LEVEL=ERROR .venv-vllm/bin/python -m benchmarks.bench_pipeline
or with the in-process torch sampler (any venv):
    python -m benchmarks.bench_pipeline --generator torch

Caveat for reading the numbers: on a 2-core CPU machine, generator and trainer compete for the
same cores, so overlapping them buys less than on separate GPUs; idle fractions still show who
waits for whom.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from ._common import save

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipe" / "configs" / "cpu_demo.yaml"


def train(out: Path, overrides: list[str]) -> list[dict]:
    """One ``python -m recipe.train`` run (own process: vLLM engines need a main module)."""
    args = [sys.executable, "-m", "recipe.train", "--config", str(DEMO), "--out", str(out)]
    for item in overrides:
        args += ["--set", item]
    env = {**os.environ, "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "ERROR")}
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"training run failed:\n{proc.stderr[-4000:]}")
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return sum(v) / len(v) if v else None


def _median(values) -> float | None:
    v = sorted(x for x in values if x is not None)
    return v[len(v) // 2] if v else None


def summarize(rows: list[dict]) -> dict:
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    last = train[-1]
    tail = train[-max(1, len(train) // 4) :]
    return {
        "steps": len(train),
        "wall_seconds": last["wall_seconds"],
        "samples_per_second": last["samples_total"] / last["wall_seconds"],
        "tokens_per_second": last["tokens_total"] / last["wall_seconds"],
        "generator_idle_fraction": sum(r["generator_idle_fraction"] for r in train) / len(train),
        "trainer_idle_fraction": sum(r["trainer_idle_fraction"] for r in train) / len(train),
        "lag_max": max(r["lag_max"] for r in train),
        "mixed_version_samples": sum(r["mixed_version_samples"] for r in train),
        "clip_fraction_mean": _mean(r["clip_fraction"] for r in train),
        "zero_grad_fraction_mean": _mean(r.get("zero_grad_fraction") for r in train),
        # batches per lag value: a mixture with the process (or vLLM) producer
        "lag_histogram": dict(sorted(collections.Counter(r["lag_max"] for r in train).items())),
        "rho_max_median": _median(r["rho_max"] for r in train),
        "train_reward_last_quarter": sum(r["train_reward"] for r in tail) / len(tail),
        "val_pass_rate_start": evals[0]["val_pass_rate"],
        "val_pass_rate_end": evals[-1]["val_pass_rate"],
        "train_reward_curve": [[r["step"], r["wall_seconds"], r["train_reward"]] for r in train],
        "val_curve": [[r["step"], r["wall_seconds"], r["val_pass_rate"]] for r in evals],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generator", choices=["vllm", "torch"], default="vllm")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--k", type=int, default=8, help="max_lag of both asynchronous modes")
    parser.add_argument("--modes", default="sync,ppo-off-policy,pipeline")
    args = parser.parse_args(argv)
    common = [
        f"generator={args.generator}", f"steps={args.steps}", f"max_lag={args.k}",
        f"eval_every={max(1, args.steps // 4)}", "val_prompts=200", "val_samples_per_prompt=2",
        f"checkpoint_every={args.steps}", "threads=1",
    ]  # fmt: skip
    modes = args.modes.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp) / modes[0] / "init"  # the first run's warm-up, shared by every mode
        for i, mode in enumerate(tqdm(modes, desc="modes")):
            start_from = [f"init={init}"] if i else []
            rows = train(Path(tmp) / mode, [*common, f"mode={mode}", *start_from])
            results[mode] = summarize(rows)

    header = (
        f"{'mode':16s} {'samples/s':>9s} {'tokens/s':>9s} {'gen idle':>8s} {'trn idle':>8s} "
        f"{'lag max':>7s} {'mixed':>6s} {'reward(last 1/4)':>16s} {'val start->end':>15s}"
    )
    print(f"generator={args.generator}, k={args.k}, {args.steps} steps, cpu_demo config")
    print(header)
    for mode, s in results.items():
        print(
            f"{mode:16s} {s['samples_per_second']:9.1f} {s['tokens_per_second']:9.1f} "
            f"{s['generator_idle_fraction']:8.2f} {s['trainer_idle_fraction']:8.2f} "
            f"{s['lag_max']:7d} {s['mixed_version_samples']:6d} "
            f"{s['train_reward_last_quarter']:16.3f} "
            f"{s['val_pass_rate_start']:7.3f}->{s['val_pass_rate_end']:.3f}"
        )
    for mode, s in results.items():
        curve = " ".join(f"{v:.2f}" for _, _, v in s["val_curve"])
        print(f"val curve {mode:16s} {curve}")
    path = save(
        "pipeline" if args.generator == "vllm" else "pipeline_torch",
        {"generator": args.generator, "k": args.k, "steps": args.steps, "results": results},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
