#!/usr/bin/env bash
# Run the 2-rank tests (tests/test_recipe_distributed.py, slow ones included) N times in a row
# beside K CPU-bound burner processes, and print how many runs passed. The gloo teardown abort of
# issue 25 ("terminate called without an active exception", SIGABRT on one rank) showed up in
# about one run in four of this file under load; its cure is in recipe/distributed.py
# (close, end_process).
#
#   bash scripts/stress_distributed.sh [N] [K]        (defaults: N=30, K=2)
#
# Stops at the first failure unless KEEP_GOING=1; each run's output is in $LOGS/run-<i>.txt
# (LOGS defaults to a fresh temporary folder). Environment: PY (default .venv/bin/python),
# PYTEST_ARGS (extra pytest arguments, e.g. "-k two_ranks").
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-30}"
K="${2:-2}"
PY="${PY:-.venv/bin/python}"
LOGS="${LOGS:-$(mktemp -d -t stress_distributed.XXXXXX)}"
mkdir -p "$LOGS"

burners=()
stop_burners() {
    for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT
for _ in $(seq 1 "$K"); do
    "$PY" -c 'while True: pass' &
    burners+=("$!")
done

passed=0
ran=0
start=$(date +%s)
for i in $(seq 1 "$N"); do
    t0=$(date +%s)
    set +e
    # shellcheck disable=SC2086
    timeout 3600 "$PY" -m pytest -q -p no:cacheprovider tests/test_recipe_distributed.py \
        ${PYTEST_ARGS:-} > "$LOGS/run-$i.txt" 2>&1
    rc=$?
    set -e
    ran=$i
    load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
    if [[ $rc -eq 0 ]]; then
        passed=$((passed + 1))
        echo "run $i/$N: passed in $(( $(date +%s) - t0 )) s (load $load)"
    else
        echo "run $i/$N: FAILED (rc $rc) in $(( $(date +%s) - t0 )) s (load $load); see $LOGS/run-$i.txt"
        grep -m3 -E "terminate called|SIGABRT|FAILED|Error" "$LOGS/run-$i.txt" || true
        [[ "${KEEP_GOING:-0}" == "1" ]] || break
    fi
done
echo "passed $passed of $ran runs ($K burners, $(( $(date +%s) - start )) s in all; logs in $LOGS)"
[[ $passed -eq $ran ]]
