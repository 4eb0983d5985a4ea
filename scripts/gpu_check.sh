#!/usr/bin/env bash
# The trainer's device check: every figure in OUT/gpu_check.json, a PASS/FAIL table on stdout,
# exit status 1 when any check fails. Within 8 minutes on one GPU by design: the check itself
# gets 445 s (it starts no part with less than that part's usual time left: --budget 415),
# marking a timeout in the report 30 s (a check cut short fails, keeping what it measured).
# With 2+ GPUs the multi-GPU parts run too and the check gets 900 s (15.5 minutes in all).
#
#   bash scripts/gpu_check.sh [OUT] [THRESHOLD FLAGS...]     (default OUT: gpu_check, or the
#                                                          next free gpu_check.N; a named OUT
#                                                          must not hold an earlier check)
#   bash scripts/gpu_check.sh gpu_check --max-head-mismatch-fp32 0.02 --require-vllm
#
# What runs, most informative first (recipe/gpu_check.py; python -m recipe.gpu_check --help lists
# every threshold): the model's build and warm-up; on it, on the device, the bf16/FP32-head
# log-prob error, the FP32 master weights' small updates and the micro-batch gradient gap;
# PipelineRL-8 with vLLM on the same GPU (vLLM is required where CUDA is); with 2 GPUs the
# trainer on GPU 0 and the engine on GPU 1 with NCCL pushes, and 2 torchrun ranks (FSDP2)
# streaming their pushes into vLLM; with 3 GPUs one trainer GPU and two engine GPUs in one NCCL
# group; then PipelineRL-8 with the torch sampler. A part the machine cannot run is listed as
# skipped, with why. Without CUDA the parts that fit run on CPU with a tiny model (what CI
# checks). Needs torch and transformers (and this package; vLLM on GPU machines), nothing else.
# Environment: PY (python to use; default .venv-vllm/bin/python if present, else python3),
# GPU_CHECK_SECONDS (the check's own limit; default 445 with at most one GPU, 900 with more).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ $# -gt 0 ]]; then
    OUT="$1"
    shift
else  # the default folder, or the next free gpu_check.N: a rerun keeps the earlier report
    OUT=gpu_check
    n=1
    while [[ -n "$(ls -A "$OUT" 2>/dev/null)" ]]; do OUT="gpu_check.$n"; n=$((n + 1)); done
    echo "gpu_check: writing to $OUT/"
fi
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv-vllm/bin/python ]]; then PY=.venv-vllm/bin/python; else PY=python3; fi
fi
GPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ')
if [[ -z "${GPU_CHECK_SECONDS:-}" ]]; then
    if [[ $GPUS -ge 2 ]]; then GPU_CHECK_SECONDS=900; else GPU_CHECK_SECONDS=445; fi
fi
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
timeout --kill-after 5 "$GPU_CHECK_SECONDS" "$PY" -m recipe.gpu_check --out "$OUT" \
    --budget $((GPU_CHECK_SECONDS - 30)) "$@"
rc=$?
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    timeout 30 "$PY" - "$OUT" "$GPU_CHECK_SECONDS" <<'PYEOF'
import json, pathlib, sys
path = pathlib.Path(sys.argv[1]) / "gpu_check.json"
report = json.loads(path.read_text()) if path.exists() else {"checks": {}}
report["timed_out"] = True
report["failed"] = [k for k, v in report["checks"].items() if v["passed"] is False] + ["timeout"]
path.write_text(json.dumps(report, indent=1))
print(f"gpu_check: stopped after {sys.argv[2]} s; the figures measured so far are in {path}")
PYEOF
    rc=1
fi
exit $rc
