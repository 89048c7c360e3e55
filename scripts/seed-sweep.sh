#!/usr/bin/env bash
# Runs the seeded test binaries (random inputs from tests/backend_util) with many random
# seeds, to find inputs a tolerance does not cover before CI does. The default test run
# uses one fixed seed per test; this sweep prints every failing seed and what failed.
#   scripts/seed-sweep.sh [ROUNDS] [TEST ...]    (default 100 rounds of backend_ops, backend_dispatch, nox_ops)
# wgpu_kernels and wgpu_graph_ops need a Vulkan adapter (lavapipe: mesa-vulkan-drivers).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-100}
shift || true
tests=("${@:-backend_ops}")
[ $# -gt 0 ] || tests=(backend_ops backend_dispatch nox_ops)
logs=$(mktemp -d)
failures=0
for t in "${tests[@]}"; do
    bin=$(cargo test --release --test "$t" --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
    for _ in $(seq "$rounds"); do
        seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
        if ! CYB_TEST_SEED=$seed "$bin" >"$logs/$t-$seed.log" 2>&1; then
            failures=$((failures + 1))
            echo "$t seed $seed: $(grep -m1 -A1 'panicked at' "$logs/$t-$seed.log" | tail -1)"
        fi
    done
    echo "$t: $rounds seeds run"
done
echo "$failures failing runs (logs in $logs)"
[ "$failures" -eq 0 ]
