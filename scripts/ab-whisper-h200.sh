#!/usr/bin/env bash
# Two builds' `transcribe` speed, interleaved on the H200 machine's quiet CPU (device tool):
# for a change that must not slow Whisper down (a before/after on this shared 2-core VM
# drowns in the other jobs' load). Each round runs OLD then NEW on jfk.wav and on two minutes
# of speech (jfk.wav repeated with 1 s gaps, as scripts/bench-whisper.sh makes it), both
# paths, 2 threads, default rules; the stage times (`stages:` line) are printed per run.
#
# The tree, two binaries and the 75 MB model do not fit one 64 MiB carry: three calls while
# the machine stays warm (30 s):
#
#   here:     scripts/ab-whisper-h200.sh pack OLD_BIN NEW_BIN
#   device 1: run carry [".gl", ".devbin/ab1"]  command: scripts/ab-whisper-h200.sh stash ab1
#   device 2: run carry [".gl", ".devbin/ab2"]  command: scripts/ab-whisper-h200.sh stash ab2
#   device 3: run carry [".gl", ".devbin/ab3"]  command: scripts/ab-whisper-h200.sh device
set -euo pipefail
cd "$(dirname "$0")/.."
M=.cache/models/whisper
D=/tmp/cyb-ab
ROUNDS=${ROUNDS:-5}

case "${1:-}" in
pack)
  [ $# -eq 3 ] || { sed -n 2,14p "$0" >&2; exit 2; }
  rm -rf .devbin/ab1 .devbin/ab2 .devbin/ab3
  mkdir -p .devbin/ab1 .devbin/ab2 .devbin/ab3
  strip -o .devbin/ab1/old "$2" && strip -o .devbin/ab1/new "$3"
  gzip -9 .devbin/ab1/old .devbin/ab1/new
  T=$(mktemp -d)
  "$3" import "$M/tiny.en-ct2" -o "$T/whisper.model" >/dev/null
  split -b 36M -d "$T/whisper.model" "$T/whisper.model.part-"
  mv "$T/whisper.model.part-00" .devbin/ab2/ && mv "$T"/whisper.model.part-0[1-9] .devbin/ab3/
  (cd "$T" && sha256sum whisper.model) >.devbin/ab3/whisper.model.sha256
  python3 - "$M/jfk.wav" .devbin/ab1/long_2min.wav <<'PY'
import sys, wave
with wave.open(sys.argv[1]) as r:
    jfk = r.readframes(r.getnframes())
gap, want = bytes(2 * 16000), 2 * 120 * 16000
out = b""
while len(out) < want:
    out += jfk + gap
with wave.open(sys.argv[2], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(out[:want])
PY
  cp "$M/jfk.wav" .devbin/ab1/
  rm -rf "$T"
  du -sh .devbin/ab1 .devbin/ab2 .devbin/ab3
  ;;
stash)
  mkdir -p $D
  cp ".devbin/$2"/* $D/
  ls $D
  ;;
device)
  cp .devbin/ab3/* $D/
  cd $D
  cat whisper.model.part-* >whisper.model
  sha256sum -c whisper.model.sha256
  gunzip -f old.gz new.gz && chmod +x old new
  grep -m1 'model name' /proc/cpuinfo || true
  for r in $(seq "$ROUNDS"); do
    for b in old new; do
      for f in jfk.wav long_2min.wav; do
        for p in curated graph; do
          [ "$f/$p" = long_2min.wav/graph ] && continue
          s=$(./$b transcribe whisper.model "$f" -t 2 --path $p -o "out-$b" 2>&1 | grep '^stages:')
          echo "round $r $b $f $p $s"
        done
      done
    done
  done
  for f in jfk long_2min; do cmp "out-old/$f.txt" "out-new/$f.txt" && echo "$f: same transcript"; done
  ;;
*)
  sed -n 2,14p "$0" >&2
  exit 2
  ;;
esac
