#!/usr/bin/env bash
# The trainer's device check: every figure in OUT/gpu_check.json, a PASS/FAIL table on stdout,
# exit status 1 when any check fails. Within 8 minutes by design: the check itself gets 450 s,
# marking a timeout in the report 30 s (a check cut short fails, keeping what it measured).
#
#   bash scripts/gpu_check.sh [OUT] [THRESHOLD FLAGS...]     (default OUT: gpu_check)
#   bash scripts/gpu_check.sh gpu_check --max-head-mismatch-fp32 0.02 --require-vllm
#
# What runs (recipe/gpu_check.py; python -m recipe.gpu_check --help lists every threshold):
# a short PipelineRL-8 run with the torch sampler; on its model, on the device, the bf16/FP32-head
# log-prob error, the FP32 master weights' small updates and the micro-batch gradient gap; when
# vLLM is importable a PipelineRL-8 run with vLLM on the same GPU; with 2 GPUs the trainer on GPU 0
# and the engine on GPU 1 with NCCL weight pushes. Without CUDA the same parts run on CPU with a
# tiny model (what CI checks). Needs torch and transformers (and this package), nothing else.
# Environment: PY (python to use; default .venv-vllm/bin/python if present, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check}"
[[ $# -gt 0 ]] && shift
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv-vllm/bin/python ]]; then PY=.venv-vllm/bin/python; else PY=python3; fi
fi
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
timeout --kill-after 5 445 "$PY" -m recipe.gpu_check --out "$OUT" "$@"
rc=$?
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    timeout 30 "$PY" - "$OUT" <<'PYEOF'
import json, pathlib, sys
path = pathlib.Path(sys.argv[1]) / "gpu_check.json"
report = json.loads(path.read_text()) if path.exists() else {"checks": {}}
report["timed_out"] = True
report["failed"] = [k for k, v in report["checks"].items() if v["passed"] is False] + ["timeout"]
path.write_text(json.dumps(report, indent=1))
print(f"gpu_check: stopped after 450 s; the figures measured so far are in {path}")
PYEOF
    rc=1
fi
exit $rc
