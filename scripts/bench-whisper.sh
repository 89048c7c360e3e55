#!/usr/bin/env bash
# Speech-to-text speed, same weights, same audio, same run, 2 threads, greedy:
# cyb-llm transcribe (tiny.en imported from CTranslate2), whisper.cpp's whisper-cli
# (the same weights converted by scripts/whisper_ct2_to_ggml.py) and faster-whisper
# (CTranslate2, float32 compute, on the same folder). Prints a markdown table of
# wall time per file and real-time factor (wall / audio duration), best of N runs.
#
#   scripts/bench-whisper.sh [RUNS]      (default 3)
#   NO_FALLBACK=1 scripts/bench-whisper.sh   (temperature fallback off in all three:
#       --no-fallback, whisper-cli -nf, faster-whisper temperature=0 — the same greedy
#       decode everywhere, since the tools' fallback rules differ)
# `scripts/bench.sh whisper` does the set-up first: scripts/fetch-models.sh whisper, a
# release build, scripts/build-whispercpp.sh (whisper-cli from the pywhispercpp 1.5.1
# sdist) and faster-whisper in .cache/bench-venv (scripts/bench-requirements.txt).
# Any tool that fails stops the run with its stderr (RAW=DIR keeps every output).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
RAW=${RAW:-$(mktemp -d)}
mkdir -p "$RAW"
RUNS=${1:-3}
NO_FALLBACK=${NO_FALLBACK:-0}
OURS_NF=(); CLI_NF=(); FW_TEMP="(0.0, 0.2, 0.4, 0.6, 0.8, 1.0)"
if [ "$NO_FALLBACK" = 1 ]; then OURS_NF=(--no-fallback); CLI_NF=(-nf); FW_TEMP="0.0"; fi
W=${CYB_MODELS_DIR:-.cache/models}/whisper
PY=${PYTHON:-.cache/bench-venv/bin/python}
CLI=.cache/whispercpp/build/bin/whisper-cli
MODEL=.cache/whisper-tiny.en.model
GGML=$W/ggml-tiny.en-from-ct2.bin
[ -f "$MODEL" ] || target/release/cyb-llm import "$W/tiny.en-ct2" -o "$MODEL" >&2
[ -f "$GGML" ] || "$PY" scripts/whisper_ct2_to_ggml.py "$W/tiny.en-ct2" "$W/for-tests-ggml-tiny.en.bin" "$GGML"
# Two minutes of real speech: jfk.wav with 1 s of silence between copies, cut at 120 s
# (the samples scripts/make_whisper_fixtures.py writes; made here without touching fixtures).
[ -f "$W/long_2min.wav" ] || python3 - "$W/jfk.wav" "$W/long_2min.wav" <<'EOF'
import sys, wave
with wave.open(sys.argv[1]) as r:
    assert (r.getnchannels(), r.getsampwidth(), r.getframerate()) == (1, 2, 16000), "jfk.wav: 16 kHz mono s16 expected"
    jfk = r.readframes(r.getnframes())
gap, want = bytes(2 * 16000), 2 * 120 * 16000
out = b""
while len(out) < want:
    out += jfk + gap
with wave.open(sys.argv[2] + ".part", "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(out[:want])
import os; os.replace(sys.argv[2] + ".part", sys.argv[2])
EOF

now() { date +%s.%N; }
best() { # best NAME CMD... -> min wall seconds over RUNS; a failing run stops the script
  local name=$1 b=999999 t0 t1 d i
  shift
  for i in $(seq "$RUNS"); do
    t0=$(now); checked "$name" "$RAW/$name.$i.out" "$@"; t1=$(now)
    d=$(echo "$t1 - $t0" | bc -l); b=$(echo "if ($d < $b) $d else $b" | bc -l)
  done
  printf "%.2f" "$b"
}
# faster-whisper: model load + transcription, timed inside Python (the interpreter
# and package import are left out), best of RUNS.
FW='import sys, time
from faster_whisper import WhisperModel
best = 1e9
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    m = WhisperModel(sys.argv[1], device="cpu", compute_type="float32", cpu_threads=2)
    segs, _ = m.transcribe(sys.argv[2], beam_size=1, best_of=1, vad_filter=False,
                           temperature=eval(sys.argv[4]))
    "".join(s.text for s in segs)
    best = min(best, time.perf_counter() - t0)
print("%.2f" % best)'

echo "| audio | duration s | cyb-llm s (RTF) | whisper.cpp s (RTF) | faster-whisper s (RTF) |"
echo "|---|---|---|---|---|"
for f in jfk.wav long_2min.wav; do
  dur=$("$PY" -c "import wave,sys; w=wave.open(sys.argv[1]); print(w.getnframes()/w.getframerate())" "$W/$f")
  a=$(best "cyb-llm-$f" target/release/cyb-llm transcribe "$MODEL" "$W/$f" --backend cpu -t 2 "${OURS_NF[@]}")
  b=$(best "whisper-cli-$f" "$CLI" -m "$GGML" -f "$W/$f" -t 2 -bs 1 -bo 1 -np "${CLI_NF[@]}")
  checked "faster-whisper-$f" "$RAW/faster-whisper-$f.out" "$PY" -c "$FW" "$W/tiny.en-ct2" "$W/$f" "$RUNS" "$FW_TEMP"
  c=$(cat "$RAW/faster-whisper-$f.out")
  rtf() { printf "%.3f" "$(echo "$1 / $dur" | bc -l)"; }
  echo "| $f | $dur | $a ($(rtf "$a")) | $b ($(rtf "$b")) | $c ($(rtf "$c")) |"
done
