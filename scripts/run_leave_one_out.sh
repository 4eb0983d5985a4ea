#!/usr/bin/env bash
# Regenerate the bundled leave-one-out runs of the reference trainer (CPU demo config): the ScaleRL
# recipe with one choice reverted per run, a batch-size pair, and the CPU demo's synchronous loop
# against PipelineRL-8 and PPO-off-policy-8 (both with max_lag=8). Two choices need their own
# baseline to mean anything: the FP32 head only differs from the body's dtype in a bfloat16 model
# (the demo is float32), and no-positive resampling only acts from the second epoch (600 steps x 32
# prompts is less than one pass over 20,000 prompts), hence the bf16 and 2,000-prompt pairs.
# Two lanes run side by side (the trainer uses one torch thread). Compute is wall-clock hours x 1 device, so machine load stretches
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
     "loo-zero-variance:zero_variance_filter=false" "batch-16:prompts_per_step=16" \
     "bf16:dtype=bfloat16" "bf16-no-fp32-head:dtype=bfloat16 fp32_head=false" &
lane "loo-aggregation:aggregation=sample" "loo-adv-norm:adv_norm=prompt" \
     "loo-no-positive:positive_threshold=null" "loo-ppo-off-policy:mode=ppo-off-policy" \
     "batch-64:prompts_per_step=64" "pipeline-rl:mode=pipeline" \
     "pool-2000:train_prompts=2000" \
     "pool-2000-no-positive:train_prompts=2000 positive_threshold=null" &
wait
