#!/usr/bin/env bash
# Regenerate the bundled leave-one-out runs of the reference trainer (CPU demo config): the ScaleRL
# recipe with one choice reverted per run, and a batch-size pair. Two lanes run side by side (the
# trainer uses one torch thread). Compute is wall-clock hours x 1 device, so machine load stretches
# the axis: run it on an otherwise idle machine.
# Usage: bash scripts/run_leave_one_out.sh [OUT_DIR] [STEPS]
set -euo pipefail
OUT="${1:-runs/loo}"
STEPS="${2:-600}"
PY="${PY:-.venv/bin/python}"
CONFIG=recipe/configs/cpu_demo.yaml
mkdir -p "$OUT"
lane() {
    for spec in "$@"; do
        name="${spec%%:*}"; sets="${spec#*:}"
        args=(--set "steps=$STEPS")
        for kv in $sets; do args+=(--set "$kv"); done
        [ -f "$OUT/$name/log.jsonl" ] && continue
        "$PY" -m recipe.train --config "$CONFIG" --out "$OUT/$name" "${args[@]}" > "$OUT/$name.out" 2>&1 \
            || echo "run $name failed (see $OUT/$name.out)"
    done
}
lane "scalerl:seed=0" "loo-dapo:loss=dapo" "loo-fp32-head:fp32_head=false" \
     "loo-zero-variance:zero_variance_filter=false" "batch-16:prompts_per_step=16" &
lane "loo-aggregation:aggregation=sample" "loo-adv-norm:adv_norm=prompt" \
     "loo-no-positive:positive_threshold=null" "loo-ppo-off-policy:mode=ppo-off-policy" \
     "batch-64:prompts_per_step=64" &
wait
