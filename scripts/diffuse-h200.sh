#!/usr/bin/env bash
# Image generation on the H200 machine (device tool), issue 19's "on the H200, `--backend wgpu`
# images/s at batch 8": the terrain UNet imported there, then `diffuse` on wgpu (the H200
# through Vulkan) at batch 1 and 8, the same on the host's CPU (16 threads) for scale, and the
# wgpu samples compared with the CPU's (same seed: max |diff|).
#
# The tree, the binary and the 45 MB ONNX do not fit one 64 MiB carry, so the files go over
# in two calls while the machine stays warm (30 s):
#
#   here:     scripts/diffuse-h200.sh pack
#             (.devbin/diffuse1 = gzipped stripped binary + ONNX part 1, .devbin/diffuse2 = part 2)
#   device 1: run carry [".gl", ".devbin/diffuse1"]  command: scripts/diffuse-h200.sh stash
#   device 2: run carry [".gl", ".devbin/diffuse2"]  command: scripts/diffuse-h200.sh device
set -euo pipefail
cd "$(dirname "$0")/.."
ONNX=.cache/models/terrain/terrain_consistency_unet_difficulty100.onnx
D=/tmp/cyb-diffuse

case "${1:-}" in
pack)
  [ -f "$ONNX" ] || { echo "diffuse-h200: $ONNX missing: run scripts/fetch-models.sh terrain" >&2; exit 1; }
  cargo build --release --bin cyb-llm
  rm -rf .devbin/diffuse .devbin/diffuse1 .devbin/diffuse2
  mkdir -p .devbin/diffuse1 .devbin/diffuse2
  strip -o .devbin/diffuse1/cyb-llm target/release/cyb-llm
  gzip -9 .devbin/diffuse1/cyb-llm
  split -b 28M -d "$ONNX" .devbin/diffuse1/terrain.onnx.part-
  mv .devbin/diffuse1/terrain.onnx.part-0[1-9] .devbin/diffuse2/
  (cd "$(dirname "$ONNX")" && sha256sum "$(basename "$ONNX")") | sed 's/ .*/  terrain.onnx/' \
    >.devbin/diffuse1/terrain.onnx.sha256
  du -sh .devbin/diffuse1 .devbin/diffuse2
  ;;
stash)
  mkdir -p $D
  cp .devbin/diffuse1/* $D/
  ls -la $D
  ;;
device)
  . scripts/h200-vulkan-env.sh
  cp .devbin/diffuse2/* $D/
  cd $D
  cat terrain.onnx.part-* >terrain.onnx
  sha256sum -c terrain.onnx.sha256
  gunzip -f cyb-llm.gz && chmod +x cyb-llm
  B=$D/cyb-llm W=$D
  grep -m1 'model name' /proc/cpuinfo || true
  $B backends | grep -v '^  '
  $B import terrain.onnx -o "$W/terrain.model" --sampler consistency --sigma-min 0.002 \
    --sigma-max 80 --sigma-data 0.5 --labels 1..100 >/dev/null
  run() { # BACKEND THREADS BATCH COUNT
    echo "device: diffuse --backend $1 -t $2 --batch $3 -n $4 --seed 1"
    $B diffuse "$W/terrain.model" --backend "$1" -t "$2" --batch "$3" -n "$4" --seed 1 \
      -o "$W/png-$1-$3" --raw "$W/raw-$1-$3.npy" --json >"$W/out.json"
    command -v python3 >/dev/null || { tr -d '\n' <"$W/out.json" | grep -oE '"(load_ms|batch_ms)": ?(\[[^]]*\]|[0-9.]+)'; return; }
    python3 -c 'import json,sys; j=json.load(sys.stdin); ms=j["batch_ms"]; b=int(sys.argv[1])
print("load_ms %.0f first_batch_ms %.1f best_batch_ms %.1f images/s (best batch) %.2f" % (j["load_ms"], ms[0], min(ms[1:] or ms), b*1000/min(ms[1:] or ms)))' "$3" <"$W/out.json"
  }
  run wgpu 16 1 6
  run wgpu 16 8 32
  run cpu 16 1 6
  run cpu 16 8 32
  command -v python3 >/dev/null || exit 0
  python3 - "$W/raw-wgpu-8.npy" "$W/raw-cpu-8.npy" <<'PY'
import struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    data = b[10 + n:]
    return struct.unpack("<%df" % (len(data) // 4), data)
a, c = load(sys.argv[1]), load(sys.argv[2])
print("wgpu vs cpu, batch 8, same seed: %d values, max |diff| %.3g" % (len(a), max(abs(x - y) for x, y in zip(a, c))))
PY
  ;;
*)
  sed -n 2,13p "$0" >&2
  exit 2
  ;;
esac
