#!/usr/bin/env bash
# The paired-seed leave-one-out study of the reference trainer (issue 19): every cell of CELLS runs
# with every seed of SEEDS; the runs of one seed share its warm-up (built once, in OUT/init-sSEED),
# its prompt order and its sampler seed, so a cell differs from the baseline by its switch alone and
# seed-to-seed spread is measured, not assumed. Jobs run LANES at a time (one torch thread each).
# Compute is wall-clock hours x devices, so machine load stretches that axis: the study's table
# (scripts/study_table.py) fits on generated tokens, which load cannot move.
#
# STUDY=long (issue 30): PipelineRL-8 against PPO-off-policy-8, sync as the reference, on the
# addition chain (recipe/configs/study_long.yaml: 56-token completions, so that generating a batch
# costs more than training on it), with vLLM's CPU build as the generator (.venv-vllm).
# Seed by seed (ORDER=seed), the three runs of a seed side by side (LANES=3), so that they see
# the same machine load; every process of a run (trainer, vLLM engine) has one thread and none
# is pinned to a core (on a machine shared with other work a pinned core can be the busy one),
# so the scheduler gives every busy process the same share: a mode that keeps its trainer and
# its generator busy at once gets two shares, as it would hold two devices. With LANES=1 the
# cells' order rotates with the seed (each mode first, second and third once over three seeds).
# Usage: bash scripts/run_study.sh [OUT_DIR]     (STUDY, CONFIG, SEEDS, LANES, STEPS, ORDER, PY;
#        ONLY="cell ...": those cells only; WARMUP_ONLY=1: build the seeds' warm-ups and stop)
set -euo pipefail
STUDY="${STUDY:-lsb}"
if [ "$STUDY" = long ]; then
    OUT="${1:-runs/study_long}"
    CONFIG="${CONFIG:-recipe/configs/study_long.yaml}"
    LANES="${LANES:-3}"
    STEPS="${STEPS-}"  # the config's
    # one thread per process, no core binding (vLLM's default binds its worker to one core)
    export VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-nobind}"
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
    ORDER="${ORDER:-seed}"
    PY="${PY:-.venv-vllm/bin/python}"
else
    OUT="${1:-runs/study}"
    CONFIG="${CONFIG:-recipe/configs/study_lsb.yaml}"
    LANES="${LANES:-2}"
    STEPS="${STEPS-200}"
    ORDER="${ORDER:-cell}"
    PY="${PY:-.venv/bin/python}"
fi
SEEDS="${SEEDS:-0 1 2}"
# name:--set overrides (space separated); the first cell is the baseline of the others
# Off-policy pressure (issue 19): PPO-off-policy-4 generates 4 batches with frozen weights, so
# the importance ratio leaves 1 and CISPO's truncation / DAPO's clip act (in sync mode with one
# update per batch the two losses give the same gradient).
# The same pair at a third of the learning rate asks whether a difference is the loss's or the
# step size's.
LSB_CELLS=(
    "ppo4-cispo:mode=ppo-off-policy max_lag=4"
    "ppo4-dapo:mode=ppo-off-policy max_lag=4 loss=dapo"
    # (400 steps: at lr 1e-4 200 steps end before the plateau; pairs of cells of different
    # lengths are compared on their common compute range)
    "ppo4-cispo-lr1e-4:mode=ppo-off-policy max_lag=4 lr=1.0e-4 steps=400"
    "ppo4-dapo-lr1e-4:mode=ppo-off-policy max_lag=4 lr=1.0e-4 loss=dapo steps=400"
    # The paper's other two questions, on the stable DAPO baseline (ppo4-dapo): PipelineRL-4 (the
    # producer in its own process, so staleness is a mixture of 0..4 versions, not always 4)
    # against PPO-off-policy-4, and half the batch for twice the steps (the same generated tokens).
    "pipe4-dapo:mode=pipeline max_lag=4 loss=dapo"
    "ppo4-dapo-b16:mode=ppo-off-policy max_lag=4 loss=dapo prompts_per_step=16 steps=400"
    # and PipelineRL-4 with the ScaleRL loss at the stable rate (baseline ppo4-cispo-lr1e-4)
    "pipe4-cispo-lr1e-4:mode=pipeline max_lag=4 lr=1.0e-4 steps=400"
)
# Issue 30: the paper's headline pair where generation is the larger cost. Equal tokens (the
# same steps and batch), the same devices charged in every mode (study_long.yaml: devices 2).
LONG_CELLS=(
    "sync:mode=sync"
    "ppo8:mode=ppo-off-policy max_lag=8"
    "pipe8:mode=pipeline max_lag=8"
)
if [ "$STUDY" = long ]; then CELLS=("${LONG_CELLS[@]}"); else CELLS=("${LSB_CELLS[@]}"); fi
if [ -n "${ONLY:-}" ]; then  # ONLY="ppo8 pipe8": just these cells (in the order of CELLS)
    kept=()
    for spec in "${CELLS[@]}"; do [[ " $ONLY " == *" ${spec%%:*} "* ]] && kept+=("$spec"); done
    CELLS=("${kept[@]}")
fi
mkdir -p "$OUT"
for seed in $SEEDS; do  # the shared warm-ups, one per seed (a few minutes each)
    [ -f "$OUT/init-s$seed/config.json" ] && continue
    "$PY" - "$CONFIG" "$seed" "$OUT/init-s$seed" <<'PYEOF'
import sys
from pathlib import Path

import torch

from recipe import config
from recipe.run import setup

path, seed, init = sys.argv[1:]
cfg = config.load(path, [f"seed={seed}"])
torch.set_num_threads(cfg.threads)
setup(cfg, Path(init).parent / f"warmup-s{seed}")  # warms up into warmup-sSEED/init
Path(init).parent.joinpath(f"warmup-s{seed}", "init").rename(init)
Path(init).parent.joinpath(f"warmup-s{seed}").rmdir()
PYEOF
done
[ -n "${WARMUP_ONLY:-}" ] && exit 0  # e.g. the seeds' warm-ups side by side, the runs later
jobs=()
if [ "$ORDER" = seed ]; then  # seed by seed, the cells' order rotated by one per seed
    turn=0
    for seed in $SEEDS; do
        n=${#CELLS[@]}
        for ((i = 0; i < n; i++)); do
            spec="${CELLS[$(((i + turn) % n))]}"
            jobs+=("${spec%%:*}|$seed|${spec#*:}")
        done
        turn=$((turn + 1))
    done
else
    for spec in "${CELLS[@]}"; do
        for seed in $SEEDS; do jobs+=("${spec%%:*}|$seed|${spec#*:}"); done
    done
fi
run_one() {
    IFS='|' read -r name seed sets <<<"$1"
    dir="$OUT/$name-s$seed"
    steps="$STEPS"
    for kv in $sets; do [[ $kv == steps=* ]] && steps="${kv#steps=}"; done
    # done when it has its final model and its log reached the cell's steps; a killed run, or a
    # finished one whose cell grew longer, continues where it stopped
    last=$(grep -o '"kind": "train", "step": [0-9]*' "$dir/log.jsonl" 2>/dev/null | tail -n 1 || true)
    [ -f "$dir/final/config.json" ] && { [ -z "$steps" ] || [ "${last##* }" = "$steps" ]; } && return 0
    args=(--set "seed=$seed" --set "init=$OUT/init-s$seed")
    [ -n "$STEPS" ] && args+=(--set "steps=$STEPS")
    for kv in $sets; do args+=(--set "$kv"); done
    resume=()
    [ -s "$dir/log.jsonl" ] && resume=(--resume)
    "$PY" -m recipe.train --config "$CONFIG" --out "$dir" "${args[@]}" "${resume[@]}" \
        > "$OUT/$name-s$seed.out" 2>&1 || echo "run $name-s$seed failed (see $OUT/$name-s$seed.out)"
}
export -f run_one
export OUT CONFIG STEPS PY
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
printf '%s\n' "${jobs[@]}" | xargs -P "$LANES" -I{} bash -c 'run_one "$@"' _ {}
