"""scripts/gpu_check.sh: a check that can fail. On CPU (no GPU here) its parts run with a tiny
model: every default threshold passes, an impossible one fails the run with exit status 1, and
the one JSON holds every figure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recipe.gpu_check import CHECKS, build_parser, judge, plan

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_gpu_check_script_parses_and_its_timeouts_fit_in_8_minutes():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    # every timeout the script sets (seconds), the kill grace included: 445 + 5 + 30
    found = re.findall(r"\btimeout (?:--kill-after (\d+) )?(\d+)", text)
    total = sum(int(grace or 0) + int(limit) for grace, limit in found)
    assert len(found) == 2 and total <= 8 * 60, found
    # it needs neither pytest nor matplotlib
    assert "pytest" not in text
    assert "matplotlib" not in (ROOT / "recipe" / "gpu_check.py").read_text()


def test_every_check_has_a_threshold_flag_and_a_direction():
    args = build_parser().parse_args(["--out", "x", "--max-head-mismatch-fp32", "0.01"])
    assert args.head_mismatch_fp32 == 0.01
    for c in CHECKS:
        assert getattr(build_parser().parse_args(["--out", "x"]), c.name) == c.default
    upper = next(c for c in CHECKS if c.kind == "max")
    lower = next(c for c in CHECKS if c.kind == "min")
    assert judge(1.0, upper, 1.0) and not judge(1.01, upper, 1.0)
    assert judge(1.0, lower, 1.0) and not judge(0.99, lower, 1.0)
    assert judge(None, upper, 1.0) is None  # its part did not run: skipped, not passed
    assert judge(float("nan"), upper, 1.0) is False


# 15 s idle, ~60 s under load: one quick run of every part on CPU
def test_an_impossible_threshold_fails_the_check_with_exit_status_1(tmp_path):
    out = tmp_path / "gc"
    env = {**os.environ, "PY": sys.executable}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(out), "--min-torch-tokens-per-s", "1e12"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    # only the impossible one failed: every default threshold holds on CPU
    assert report["failed"] == ["torch_tokens_per_s"], report["checks"]
    assert "torch_tokens_per_s" in proc.stdout and "FAIL" in proc.stdout
    checks = report["checks"]
    assert set(checks) == {c.name for c in CHECKS}  # every check, with its verdict
    assert checks["torch_tokens_per_s"]["value"] > 0 and checks["torch_tokens_per_s"]["min"] == 1e12
    for name in (
        "torch_pipeline_ran",
        "torch_updates",
        "head_mismatch_fp32",
        "fp32_head_gain",
        "master_weights_moved",
        "microbatch_gradient_gap",
        "allocated_over_busy",
    ):
        assert checks[name]["passed"] is True, (name, checks[name])
    # the parts CPU cannot run are skipped, not passed
    assert checks["vllm_two_gpus_ran"]["passed"] is None and checks["mfu"]["passed"] is None
    assert report["machine"]["device"] == "cpu" and report["machine"]["quick"] is True
    run = report["torch_pipeline"]
    assert run["steps"] == 3 and run["lag_max"] <= 8
    assert run["allocated_gpu_hours"] >= run["gpu_hours"] > 0
    head = report["device"]["head_logprob_mismatch"]
    # the FP32 head removes part of bf16's log-prob error (the body's share remains)
    assert 0 < head["fp32_head"]["mean"] < head["bf16_head"]["mean"]
    assert report["device"]["microbatch_gradient_gap"] < 1e-4


@pytest.mark.parametrize("require", [False, True])
def test_a_missing_vllm_is_skipped_unless_required(require):
    assert plan(0, False)["vllm_pipeline"] == "vllm is not importable"
    args = build_parser().parse_args(["--out", "x", *(["--require-vllm"] if require else [])])
    assert args.require_vllm is require


def test_the_two_gpu_variant_is_planned_and_configured():
    """The 1-trainer + 1-engine run needs 2 GPUs (not run here: no GPU); its config and plan."""
    import torch

    from recipe import config as C
    from recipe import distributed
    from recipe.gpu_check import two_gpu_config
    from recipe.run import devices_in_use, engine_layout

    assert plan(2, True) == {"torch_pipeline": None, "vllm_pipeline": None, "vllm_two_gpus": None}
    assert plan(1, True)["vllm_two_gpus"] == "needs 2 GPUs (found 1)"
    assert set(plan(0, False).values()) == {None, "vllm is not importable"}
    cfg = C.from_dict(two_gpu_config(quick=False, init="some/model"))
    assert (cfg.generator, cfg.mode, cfg.weight_transfer) == ("vllm", "pipeline", "nccl")
    cuda = torch.device("cuda")
    assert engine_layout(cfg, cuda) == [1]  # the engine alone on GPU 1
    assert devices_in_use(cfg, distributed.SINGLE, cuda) == 2
