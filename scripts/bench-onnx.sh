#!/usr/bin/env bash
# Imported ONNX graphs: `cyb-llm eval` next to onnxruntime, both on the CPU of this machine,
# in the same run, on the same inputs: the terrain consistency UNet (adaptive-terrain-diffusion
# 0.4.2) at batch 1 and 8.
#
#   scripts/bench-onnx.sh                      # THREADS=2 REPS=3 BATCHES="1 8"
#   CYB_LLM_BIN=/tmp/cyb-llm scripts/bench-onnx.sh
#
# Needs scripts/fetch-models.sh terrain and a Python with onnxruntime ($PYTHON, default
# .cache/onnx-venv/bin/python, which `scripts/bench.sh onnx` makes from
# scripts/bench-onnx-requirements.txt). Each tool runs its graph REPS times after a warm-up
# (cyb-llm: `eval --repeat`, the first run included; onnxruntime: scripts/bench_onnx_ort.py,
# default graph optimizations); the fastest run counts. The outputs are compared (max |diff|).
# Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
PY=${PYTHON:-.cache/onnx-venv/bin/python}
MODELS=${CYB_MODELS_DIR:-.cache/models}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
BATCHES=${BATCHES:-"1 8"}
ONNX="$MODELS/terrain/terrain_consistency_unet_difficulty100.onnx"
[ -f "$ONNX" ] || { echo "bench-onnx: $ONNX missing: run scripts/fetch-models.sh terrain" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cyb_llm_into "$WORK"
checked "cyb-llm import" "$WORK/import.log" "$WORK/cyb-llm" import "$ONNX" -o "$WORK/unet.model"

echo "| model | batch | threads | cyb-llm eval | onnxruntime | ratio (ort / cyb) | max abs diff |"
echo "|---|---|---|---|---|---|---|"
for b in $BATCHES; do
  d="$WORK/b$b"
  mkdir -p "$d"
  "$PY" - "$b" "$d" <<'PYEOF'
import sys, numpy as np
b, d = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(b)
sigma = np.full(b, 80.0, np.float32)
np.save(f"{d}/noisy.npy", (rng.standard_normal((b, 1, 128, 128)) * 80).astype(np.float32))
np.save(f"{d}/sigma.npy", sigma)
np.save(f"{d}/difficulty.npy", rng.integers(1, 101, b).astype(np.float32))
PYEOF
  inputs=()
  for n in noisy sigma difficulty; do inputs+=("$n=$d/$n.npy"); done
  eval_args=()
  for i in "${inputs[@]}"; do eval_args+=(--input "$i"); done
  checked "cyb-llm eval" "$d/cyb.log" "$WORK/cyb-llm" eval "$WORK/unet.model" "${eval_args[@]}" \
    --output-dir "$d/out" --backend cpu -t "$THREADS" --repeat "$((REPS + 1))" --timings
  cyb_ms=$(grep -o 'run [0-9.]* ms' "$d/cyb.log.err" | awk '{print $2}')
  checked "onnxruntime" "$d/ort.log" "$PY" scripts/bench_onnx_ort.py "$ONNX" "$THREADS" "$REPS" "${inputs[@]}"
  ort_ms=$(awk '/^ort_ms/ {print $2}' "$d/ort.log")
  diff=$("$PY" - "$ONNX" "$d" <<'PYEOF'
import sys, numpy as np, onnxruntime as ort
model, d = sys.argv[1:3]
feeds = {n: np.load(f"{d}/{n}.npy") for n in ("noisy", "sigma", "difficulty")}
(want,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(["denoised"], feeds)
print(f"{np.abs(np.load(f'{d}/out/denoised.npy') - want).max():.1e}")
PYEOF
)
  awk -v b="$b" -v t="$THREADS" -v c="$cyb_ms" -v o="$ort_ms" -v d="$diff" 'BEGIN {
    printf "| terrain UNet 128x128 | %d | %d | %.0f ms (%.2f images/s) | %.0f ms (%.2f images/s) | %.2fx | %s |\n",
      b, t, c, b * 1000 / c, o, b * 1000 / o, o / c, d }'
done
