#!/usr/bin/env bash
# Graph path on the H200 machine (device tool), issue 6 item 6:
#  - the nox execution-trace hash of SmolLM2 (a real model) on the device's
#    CPU, 1 and 16 threads: it must equal the hash printed here by `pack`;
#  - graph vs curated greedy (16 tokens) on wgpu (the H200 through Vulkan):
#    identical text, and the graph run's dispatch summary.
#
# SmolLM2's GGUF (98 MB) plus the binary do not fit one 64 MiB carry, so the
# files go over in two calls while the machine stays warm (30 s):
#
#   here:     scripts/graph-h200.sh pack
#             (writes .devbin/graph1 = gzipped stripped binary + GGUF part 1,
#              .devbin/graph2 = GGUF part 2, and prints the local hashes)
#   device 1: run carry [".gl", ".devbin/graph1"]  command: scripts/graph-h200.sh stash
#   device 2: run carry [".gl", ".devbin/graph2"]  command: scripts/graph-h200.sh device
#
# `stash` copies the carried parts to /tmp/cyb-graph (kept while the machine
# is warm); `device` assembles them, checks the GGUF's sha256 and runs.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT="The capital of France is"
W=/tmp/cyb-graph

nox_trace() { # BIN MODEL THREADS
  "$1" run "$2" --backend nox --trace --temp 0 --no-chat -n 16 -c 256 -t "$3" -p "$PROMPT" 2>&1 |
    grep '^trace:'
}

greedy() { # BIN MODEL PATH (wgpu greedy text, 16 tokens)
  "$1" run "$2" --backend wgpu --path "$3" --temp 0 --no-chat -n 16 -c 256 -p "$PROMPT" --json --dispatch
}

case "${1:-}" in
pack)
  cargo build --release --bin cyb-llm
  rm -rf .devbin/graph1 .devbin/graph2
  mkdir -p .devbin/graph1 .devbin/graph2
  strip -o .devbin/graph1/cyb-llm target/release/cyb-llm
  gzip -9 .devbin/graph1/cyb-llm
  split -b 46M -d "$MODEL" .devbin/graph1/smollm2.gguf.part-
  mv .devbin/graph1/smollm2.gguf.part-0[1-9] .devbin/graph2/
  (cd "$(dirname "$MODEL")" && sha256sum "$(basename "$MODEL")") | sed 's/ .*/  smollm2.gguf/' \
    >.devbin/graph1/smollm2.gguf.sha256
  du -sh .devbin/graph1 .devbin/graph2
  T=$(mktemp -d)
  echo "local: target/release/cyb-llm import $MODEL -o $T/smollm2.model"
  target/release/cyb-llm import "$MODEL" -o "$T/smollm2.model"
  for t in 1 2; do
    echo "local: target/release/cyb-llm run $T/smollm2.model --backend nox --trace --temp 0 --no-chat -n 16 -c 256 -t $t -p \"$PROMPT\""
    nox_trace target/release/cyb-llm "$T/smollm2.model" "$t"
  done
  rm -rf "$T"
  ;;
stash)
  mkdir -p $W
  cp .devbin/graph1/* $W/
  ls -la $W
  ;;
device)
  . scripts/h200-vulkan-env.sh
  cp .devbin/graph2/* $W/
  cd $W
  cat smollm2.gguf.part-* >smollm2.gguf
  sha256sum -c smollm2.gguf.sha256
  gunzip -f cyb-llm.gz
  chmod +x cyb-llm
  B=$W/cyb-llm
  uname -m
  grep -m1 'model name' /proc/cpuinfo || true
  $B backends | grep -v '^  '
  $B import smollm2.gguf -o smollm2.model
  for t in 1 16; do
    echo "device: nox trace, $t threads"
    nox_trace "$B" smollm2.model "$t"
  done
  for p in curated graph; do
    echo "device: wgpu greedy, --path $p"
    greedy "$B" smollm2.model "$p" | tee "greedy-$p.json"
  done
  python3 - <<'EOF'
import json
c = json.load(open("greedy-curated.json"))["text"]
g = json.load(open("greedy-graph.json"))["text"]
print("wgpu graph == curated:", "identical" if c == g else f"DIFFER: {c!r} vs {g!r}")
EOF
  ;;
*)
  echo "usage: scripts/graph-h200.sh pack|stash|device" >&2
  exit 2
  ;;
esac
