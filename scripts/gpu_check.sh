#!/usr/bin/env bash
# The trainer's device check for one or two GPUs, at most ~8 minutes (~10 with 2 GPUs); writes
# OUT/gpu_check.json.
#
#   bash scripts/gpu_check.sh [OUT]        (default OUT: gpu_check)
#
# 1. the device tests (precision, micro-batching, tiny HF models) on whatever device torch sees;
# 2. python -m recipe.gpu_check: a short PipelineRL-8 run with the torch generator and, when vLLM
#    is importable, with vLLM on the same GPU; tokens/s, an MFU estimate, updates, ratios, and
#    the bf16-versus-FP32-head log-prob mismatch (see recipe/gpu_check.py); with 2 GPUs also
#    the 1-trainer + 1-engine variant (trainer on GPU 0, the vLLM engine on GPU 1, NCCL pushes).
# Without CUDA the same path runs on CPU with a tiny model (what CI checks).
# Environment: PY (python to use; default .venv-vllm/bin/python if present, else python3),
# GPU_CHECK_SKIP_TESTS=1 to skip step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check}"
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv-vllm/bin/python ]]; then PY=.venv-vllm/bin/python; else PY=python3; fi
fi
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
export MPLBACKEND=Agg
tests_rc=skipped
if [[ "${GPU_CHECK_SKIP_TESTS:-0}" != "1" ]]; then
    set +e
    timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_recipe_precision.py \
        tests/test_recipe_hf.py > "$OUT/device_tests.txt" 2>&1
    tests_rc=$?
    set -e
fi
timeout 540 "$PY" -m recipe.gpu_check --out "$OUT"
# the test outcome goes into the one JSON
"$PY" - "$OUT" "$tests_rc" <<'PYEOF'
import json, sys
path = f"{sys.argv[1]}/gpu_check.json"
report = json.load(open(path))
report["device_tests_rc"] = sys.argv[2]
json.dump(report, open(path, "w"), indent=1)
print(f"device tests: rc={sys.argv[2]}; report: {path}")
PYEOF
