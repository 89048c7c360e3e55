#!/usr/bin/env bash
# Image generation: `cyb-llm diffuse` next to onnxruntime running the terrain package's
# one-step sampling, both on the CPU of this machine, in the same run: the terrain
# consistency UNet (adaptive-terrain-diffusion 0.4.2), batches of 1 and 8.
#
#   scripts/bench-diffuse.sh                     # THREADS=2 BATCHES_PER_RUN=4 BATCHES="1 8"
#   CYB_LLM_BIN=/tmp/cyb-llm BACKEND=wgpu scripts/bench-diffuse.sh
#
# Each tool makes BATCHES_PER_RUN batches in one process. "load included": model load plus
# the first (cold) batch; "load excluded": the fastest later batch. Needs
# scripts/fetch-models.sh terrain and a Python with onnxruntime ($PYTHON, default
# .cache/onnx-venv/bin/python, made by `scripts/bench.sh diffuse` from
# scripts/bench-onnx-requirements.txt). Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
PY=${PYTHON:-.cache/onnx-venv/bin/python}
MODELS=${CYB_MODELS_DIR:-.cache/models}
THREADS=${THREADS:-2}
RUNS=${BATCHES_PER_RUN:-4}
BATCHES=${BATCHES:-"1 8"}
BACKEND=${BACKEND:-cpu}
ONNX="$MODELS/terrain/terrain_consistency_unet_difficulty100.onnx"
[ -f "$ONNX" ] || { echo "bench-diffuse: $ONNX missing: run scripts/fetch-models.sh terrain" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cyb_llm_into "$WORK"
checked "cyb-llm import" "$WORK/import.log" "$WORK/cyb-llm" import "$ONNX" -o "$WORK/terrain.model" \
  --sampler consistency --sigma-min 0.002 --sigma-max 80 --sigma-data 0.5 --labels 1..100

echo "| batch | threads | backend | cyb-llm load incl. | onnxruntime load incl. | ratio | cyb-llm load excl. | onnxruntime load excl. | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for b in $BATCHES; do
  checked "cyb-llm diffuse" "$WORK/cyb$b.json" "$WORK/cyb-llm" diffuse "$WORK/terrain.model" \
    -n "$((b * RUNS))" --batch "$b" --seed 1 -t "$THREADS" --backend "$BACKEND" -o "$WORK/png$b" --json
  read -r c_load c_first c_best < <("$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
ms = j["batch_ms"]
print(j["load_ms"], ms[0], min(ms[1:] or ms))' "$WORK/cyb$b.json")
  checked "onnxruntime" "$WORK/ort$b.log" "$PY" scripts/bench_diffuse_ort.py "$ONNX" "$THREADS" "$b" "$RUNS"
  o_load=$(awk '/^load_ms/ {print $2}' "$WORK/ort$b.log")
  o_first=$(awk '/^first_ms/ {print $2}' "$WORK/ort$b.log")
  o_best=$(awk '/^best_ms/ {print $2}' "$WORK/ort$b.log")
  awk -v b="$b" -v t="$THREADS" -v be="$BACKEND" -v cl="$c_load" -v cf="$c_first" -v cb="$c_best" \
    -v ol="$o_load" -v of="$o_first" -v ob="$o_best" 'BEGIN {
    ci = b * 1000 / (cl + cf); oi = b * 1000 / (ol + of); ce = b * 1000 / cb; oe = b * 1000 / ob
    printf "| %d | %d | %s | %.2f images/s | %.2f images/s | %.2fx | %.2f images/s | %.2f images/s | %.2fx |\n",
      b, t, be, ci, oi, ci / oi, ce, oe, ce / oe }'
done
