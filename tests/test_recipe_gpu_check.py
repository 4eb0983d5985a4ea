"""scripts/gpu_check.sh: a check that can fail. On CPU (no GPU here) the parts that fit run with a
tiny model: every default threshold passes, an impossible one fails the run with exit status 1,
and the one JSON holds every figure. Every check has a value that fails it (a broken setup's)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recipe.gpu_check import (
    BY_NAME,
    CHECKS,
    PARTS,
    build_parser,
    judge,
    plan,
    skip_fails,
    threshold,
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
H100, PARAMS = 989e12, 86_000_000  # the full check's model on an H100

# A value a broken setup gives for each check (the part's reason in the comment), and one a
# working H100 is expected to give. Every check has both: a check no value fails is a bug.
BROKEN = {
    "model_ran": 0,  # the warm-up raised
    "head_mismatch_fp32": 0.3,  # the FP32 head does not take bf16's error out (autocast off)
    "fp32_head_gain": 0.5,  # the "FP32" head is worse than bf16's: it is not the head used
    "master_weights_moved": 0.03,  # weights held in bf16 (2.4% move, measured on CPU)
    "microbatch_gradient_gap": 3e-3,  # TF32 matmuls or per-micro-batch denominators
    "vllm_pipeline_ran": 0,  # vLLM missing on a GPU machine, or its run raised
    "vllm_updates": 0,  # every batch filtered, or every loss NaN
    "vllm_fresh_logprob_mismatch": 2.0,  # the engine without the FP32 head, or stale weights
    "vllm_tokens_per_s": 40.0,  # the trainer on CPU: ~0.01% of the peak
    "vllm_mfu": 1e-4,  # ditto
    "vllm_peak_memory_gb": 20.0,  # a weight copy kept per push (20 pushes x 0.35 GB) and more
    "vllm_two_gpus_ran": 0,  # the NCCL group failed
    "two_gpu_updates": 0,
    "two_gpu_fresh_logprob_mismatch": 3.0,  # the pushes never reached the engine
    "fsdp_two_ranks_ran": 0,  # torchrun or FSDP2 failed
    "fsdp_updates": 0,
    "fsdp_fresh_logprob_mismatch": 3.0,  # a shard gathered wrongly or a stale push
    "vllm_two_engines_ran": 0,
    "two_engines_updates": 0,
    "two_engines_fresh_logprob_mismatch": 3.0,  # one engine missed a push
    "torch_pipeline_ran": 0,
    "torch_updates": 0,
    "torch_tokens_per_s": 40.0,
    "torch_fresh_logprob_mismatch": 0.5,  # the sampler's head differs from the trainer's
    "torch_lag_max": 9,  # a token older than the lag bound: admission broken
    "allocated_over_busy": 0.5,  # the bill below the busy hours: accounting broken
    "torch_mfu": 1e-4,
    "torch_peak_memory_gb": 20.0,
}
WORKING = {
    **{name: 1 for name in BY_NAME if name.endswith("_ran") or name.endswith("updates")},
    "head_mismatch_fp32": 0.004, "fp32_head_gain": 3.9, "master_weights_moved": 1.0,
    "microbatch_gradient_gap": 2e-7, "vllm_fresh_logprob_mismatch": 0.05,
    "vllm_tokens_per_s": 4000.0, "vllm_mfu": 5e-3, "vllm_peak_memory_gb": 2.5,
    "two_gpu_fresh_logprob_mismatch": 0.05, "fsdp_fresh_logprob_mismatch": 0.05,
    "two_engines_fresh_logprob_mismatch": 0.05, "torch_tokens_per_s": 4000.0,
    "torch_fresh_logprob_mismatch": 0.01, "torch_lag_max": 8, "allocated_over_busy": 1.3,
    "torch_mfu": 5e-3, "torch_peak_memory_gb": 2.5,
}  # fmt: skip


def test_gpu_check_script_parses_and_fits_8_minutes_on_one_gpu():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    # one GPU: the check's limit, its kill grace and the 30 s that mark a timeout
    one_gpu = int(re.search(r"else GPU_CHECK_SECONDS=(\d+)", text).group(1))
    grace = int(re.search(r"--kill-after (\d+)", text).group(1))
    marking = int(re.search(r"\btimeout (\d+) \"\$PY\" -", text).group(1))
    assert one_gpu + grace + marking <= 8 * 60
    assert "--budget $((GPU_CHECK_SECONDS - 30))" in text  # no part starts it cannot finish
    assert "pytest" not in text  # it needs neither pytest nor matplotlib
    assert "matplotlib" not in (ROOT / "recipe" / "gpu_check.py").read_text()


def test_every_check_has_a_threshold_flag_and_a_direction():
    args = build_parser().parse_args(["--out", "x", "--max-head-mismatch-fp32", "0.01"])
    assert args.head_mismatch_fp32 == 0.01
    for c in CHECKS:
        assert getattr(build_parser().parse_args(["--out", "x"]), c.name) is None  # default
        assert threshold(c, None, None, None) == c.default
        assert threshold(c, 7.0, H100, PARAMS) == 7.0  # a flag wins
    upper = next(c for c in CHECKS if c.kind == "max")
    lower = next(c for c in CHECKS if c.kind == "min")
    assert judge(1.0, upper, 1.0) and not judge(1.01, upper, 1.0)
    assert judge(1.0, lower, 1.0) and not judge(0.99, lower, 1.0)
    assert judge(None, upper, 1.0) is None  # its part did not run: skipped, not passed
    assert judge(float("nan"), upper, 1.0) is False


def test_throughput_floors_come_from_the_device_peak():
    check = BY_NAME["vllm_tokens_per_s"]
    # 5e-5 of an H100's 989 TFLOP/s at 2 x 86M FLOPs a token: ~290 tokens/s
    assert threshold(check, None, H100, PARAMS) == pytest.approx(5e-5 * H100 / (2 * PARAMS))
    assert threshold(check, None, 2 * H100, PARAMS) == 2 * threshold(check, None, H100, PARAMS)
    assert threshold(check, None, None, PARAMS) == check.default  # CPU: an absolute floor


def test_regression_every_check_fails_for_a_broken_setup_and_passes_a_working_one():
    """Four of the eighteen checks could not fail for any finite value (tokens/s >= 0, MFU >= 0,
    peak memory <= 1e9 GB); every check now has a threshold a broken setup fails."""
    assert set(BROKEN) == set(WORKING) == set(BY_NAME)
    for c in CHECKS:
        limit = threshold(c, None, H100, PARAMS)
        assert math_finite(limit), c.name
        assert judge(BROKEN[c.name], c, limit) is False, (c.name, BROKEN[c.name], limit)
        assert judge(WORKING[c.name], c, limit) is True, (c.name, WORKING[c.name], limit)
        if c.kind == "min":  # every "at least" figure is >= 0: a floor of 0 could never fail
            assert limit > 0, c.name


def math_finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def test_parts_run_where_the_gpus_suffice_and_say_why_not():
    assert plan(3, True) == {name: None for name in PARTS}
    two = plan(2, True)
    assert two["vllm_two_engines"] == "needs 3 GPUs (found 2)"
    assert two["vllm_two_gpus"] is two["fsdp_two_ranks"] is None
    one = plan(1, True)
    assert one["vllm_two_gpus"] == one["fsdp_two_ranks"] == "needs 2 GPUs (found 1)"
    assert one["vllm_pipeline"] is one["model"] is one["torch_pipeline"] is None
    assert plan(1, False)["vllm_pipeline"] == "vllm is not importable"
    # the order: the model first, the torch sampler's run (CI covers it on CPU) last
    assert list(PARTS)[:3] == ["model", "device", "vllm_pipeline"]
    assert list(PARTS)[-1] == "torch_pipeline"
    # one GPU: the parts that run fit the 415 s budget with room to spare
    assert sum(PARTS[n][2] for n, why in one.items() if why is None) <= 415 / 2


def test_a_missing_vllm_fails_where_cuda_is_and_too_few_gpus_is_a_plain_skip():
    assert skip_fails("vllm is not importable", vllm_required=True)  # CUDA or --require-vllm
    assert not skip_fails("vllm is not importable", vllm_required=False)  # CPU
    assert not skip_fails("needs 2 GPUs (found 1)", vllm_required=True)
    assert skip_fails("not started: 40 s of the 415 s budget left", vllm_required=False)


def test_the_configs_of_the_multi_gpu_parts():
    """The multi-GPU parts' runs (not run here: no GPU): their placement and their counts."""
    import torch

    from recipe import config as C
    from recipe import distributed
    from recipe.gpu_check import fsdp_config, two_engines_config, two_gpu_config
    from recipe.run import devices_in_use, engine_layout

    cuda = torch.device("cuda")
    cfg = C.from_dict(two_gpu_config(quick=False, init="some/model"))
    assert (cfg.generator, cfg.mode, cfg.weight_transfer) == ("vllm", "pipeline", "nccl")
    assert engine_layout(cfg, cuda) == [1]  # the engine alone on GPU 1
    assert devices_in_use(cfg, distributed.SINGLE, cuda) == 2
    cfg = C.from_dict(two_engines_config(quick=False, init="some/model"))
    assert (cfg.mode, cfg.generators, cfg.weight_transfer) == ("sync", 2, "nccl")
    assert engine_layout(cfg, cuda) == [1, 2]
    assert devices_in_use(cfg, distributed.SINGLE, cuda) == 3
    two = C.from_dict(fsdp_config(False, "cuda", "m", gpus=2, has_vllm=True))
    assert (two.mode, two.weight_transfer, two.gpu_memory_utilization) == ("sync", "rpc", 0.3)
    three = C.from_dict(fsdp_config(False, "cuda", "m", gpus=3, has_vllm=True))
    assert three.weight_transfer == "nccl"
    ranks = distributed.Ranks(0, 2, 0)
    os.environ["LOCAL_WORLD_SIZE"] = "2"
    try:
        assert engine_layout(three, cuda, ranks) == [2]  # after the two trainer ranks
    finally:
        del os.environ["LOCAL_WORLD_SIZE"]


def test_no_time_left_fails_instead_of_passing_an_empty_check(tmp_path):
    out = tmp_path / "gc"
    proc = subprocess.run(
        [sys.executable, "-m", "recipe.gpu_check", "--out", str(out), "--budget", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["failed"] == ["model_ran"]
    assert report["skipped"]["model"].startswith("not started: ")
    assert report["skipped"]["torch_pipeline"] == "the model could not be built"
    assert "part model skipped: not started" in proc.stdout


# 15 s idle, ~60-90 s under load: one quick run of every part that fits on CPU
def test_an_impossible_threshold_and_a_required_vllm_fail_the_check(tmp_path):
    out = tmp_path / "gc"
    env = {**os.environ, "PY": sys.executable}
    has_vllm = __import__("importlib").util.find_spec("vllm") is not None
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(out), "--min-torch-tokens-per-s", "1e12", "--require-vllm"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    # only the impossible one failed (and vLLM, required but missing in the main venv): every
    # default threshold holds on CPU
    expected = ["torch_tokens_per_s"] if has_vllm else ["vllm_pipeline_ran", "torch_tokens_per_s"]
    assert report["failed"] == expected, report["checks"]
    assert "torch_tokens_per_s" in proc.stdout and "FAIL" in proc.stdout
    checks = report["checks"]
    assert set(checks) == {c.name for c in CHECKS}  # every check, with its verdict
    assert checks["torch_tokens_per_s"]["value"] > 0 and checks["torch_tokens_per_s"]["min"] == 1e12
    for name in (
        "model_ran",
        "torch_pipeline_ran",
        "torch_updates",
        "torch_lag_max",
        "torch_peak_memory_gb",
        "head_mismatch_fp32",
        "fp32_head_gain",
        "master_weights_moved",
        "microbatch_gradient_gap",
        "allocated_over_busy",
    ):
        assert checks[name]["passed"] is True, (name, checks[name])
    # the parts CPU cannot run are skipped, not passed, and say why
    for part in ("vllm_two_gpus", "fsdp_two_ranks", "vllm_two_engines"):
        assert checks[f"{part}_ran"]["passed"] is None
        assert re.fullmatch(r"needs [23] GPUs \(found 0\)", report["skipped"][part])
        assert f"part {part} skipped: needs" in proc.stdout
    assert checks["torch_mfu"]["passed"] is None  # no known peak on CPU
    assert report["machine"]["device"] == "cpu" and report["machine"]["quick"] is True
    run = report["torch_pipeline"]
    assert run["steps"] == 3 and run["lag_max"] <= 8
    assert run["allocated_gpu_hours"] >= run["gpu_hours"] > 0
    head = report["device"]["head_logprob_mismatch"]
    # the FP32 head removes part of bf16's log-prob error (the body's share remains)
    assert 0 < head["fp32_head"]["mean"] < head["bf16_head"]["mean"]
    assert report["device"]["microbatch_gradient_gap"] < 1e-4


@pytest.mark.slow  # ~40-60 s: a 2-rank launch
def test_the_fsdp_part_runs_two_ranks_on_cpu(tmp_path, init_dir):
    """The 2-rank part's launch (torchrun, its config, the summary) on CPU with gloo: what a
    2-GPU machine runs with device cuda and vLLM."""
    from recipe.gpu_check import fsdp_config, summarize, torchrun
    from recipe.model import load_policy

    cfg = fsdp_config(True, "cpu", str(init_dir), gpus=0, has_vllm=False)
    # init_dir's model: 3-digit addition
    cfg.update(n_layer=3, hidden=128, heads=4, intermediate=512, digits=3, max_new_tokens=5)
    torchrun(cfg, tmp_path / "fsdp", timeout=300)
    params = sum(p.numel() for p in load_policy(init_dir)[0].parameters())
    figures = summarize(tmp_path / "fsdp", params, None)
    assert figures["steps"] == 3 and figures["updates"] >= 1
    assert figures["lag_max"] == 0  # sync
    assert figures["fresh_logprob_mismatch_max"] < 0.1


def test_regression_a_rerun_into_an_earlier_check_is_refused(tmp_path, capsys):
    """`python -m recipe.gpu_check --out gpu_check` a second time replaced the first report
    and failed every part that trains (their run folders' logs: "log.jsonl already exists;
    pass --resume"), a FAIL that was no device's: argparse refuses that --out now."""
    from recipe.gpu_check import main

    for earlier in ("gpu_check.json", "torch_pipeline/log.jsonl"):
        out = tmp_path / earlier.split("/")[0].replace(".json", "")
        (out / earlier).parent.mkdir(parents=True)
        (out / earlier).write_text("{}\n")
        with pytest.raises(SystemExit) as err:
            main(["--out", str(out), "--budget", "0"])
        assert err.value.code == 2
        assert f"holds an earlier check ({earlier})" in capsys.readouterr().err
        assert (out / earlier).read_text() == "{}\n"


def test_regression_the_scripts_default_folder_moves_on_when_an_earlier_check_is_there(tmp_path):
    # recipe.gpu_check refuses an --out that holds an earlier check, so a rerun of
    # `bash scripts/gpu_check.sh` with its default folder (a second try on a warm GPU machine)
    # would have been refused; the default now moves on to the next free gpu_check.N
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "gpu_check.sh"
    script.write_text(SCRIPT.read_text())
    fake = tmp_path / "fake_python"  # stands in for the check: writes its report into --out
    fake.write_text('#!/usr/bin/env bash\nwhile [[ $1 != --out ]]; do shift; done\n'
                    'echo "{}" > "$2/gpu_check.json"\n')  # fmt: skip
    fake.chmod(0o755)
    env = {**os.environ, "PY": str(fake), "GPU_CHECK_SECONDS": "60"}
    for expected in ("gpu_check", "gpu_check.1", "gpu_check.2"):
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert f"writing to {expected}/" in done.stdout
        assert (tmp_path / expected / "gpu_check.json").exists()
    named = subprocess.run(["bash", str(script), "mine"], env=env, capture_output=True, text=True)
    assert named.returncode == 0 and (tmp_path / "mine" / "gpu_check.json").exists()
