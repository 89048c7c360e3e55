#!/usr/bin/env bash
# Gemma-3-270M on the H200 machine (device tool): greedy 16 tokens on the cpu
# and reference backends of its host and on wgpu (the H200 through Vulkan),
# curated and graph paths, compared. The GGUF (253 MB) goes over in five
# carried parts while the machine stays warm (30 s between calls):
#
#   here:          scripts/gemma-h200.sh pack      (.devbin/gemma1 .. gemma5)
#   device 1..4:   carry [".devbin/gemmaN"]          command: scripts/gemma-h200.sh stash N
#   device 5:      carry [".gl", ".devbin/gemma5"]   command: scripts/gemma-h200.sh device
#
# With llama.cpp's Vulkan llama-bench (scripts/build-llamacpp-vulkan.sh) carried in one of
# the stash calls 2..4 (add ".devbin/llvk" to its carry), the device call also runs
# `cyb-llm bench --backend wgpu` and `llama-bench -ngl 99` on the same GGUF (issue 5).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=.cache/models/gemma3/gemma-3-270m-q4_k_m.gguf
PROMPT="The capital of France is"
W=/tmp/cyb-gemma

case "${1:-}" in
pack)
  cargo build --release --bin cyb-llm
  rm -rf .devbin/gemma[1-5]
  for n in 1 2 3 4 5; do mkdir -p .devbin/gemma$n; done
  strip -o .devbin/gemma1/cyb-llm target/release/cyb-llm
  gzip -9 .devbin/gemma1/cyb-llm
  split -n 5 -d "$MODEL" .devbin/gemma.part-
  for n in 1 2 3 4 5; do mv .devbin/gemma.part-0$((n - 1)) .devbin/gemma$n/; done
  (cd "$(dirname "$MODEL")" && sha256sum "$(basename "$MODEL")") | sed 's/ .*/  gemma.gguf/' \
    >.devbin/gemma1/gemma.gguf.sha256
  du -sh .devbin/gemma[1-5]
  ;;
stash)
  mkdir -p $W
  cp .devbin/gemma"$2"/* $W/
  if [ -f .devbin/llvk/llama-bench-vulkan.xz ]; then
    python3 -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      .devbin/llvk/llama-bench-vulkan.xz $W/llama-bench-vulkan
    chmod +x $W/llama-bench-vulkan
  fi
  ls $W
  ;;
device)
  . scripts/h200-vulkan-env.sh
  cp .devbin/gemma5/* $W/
  cd $W
  cat gemma.part-0* >gemma.gguf
  sha256sum -c gemma.gguf.sha256
  gunzip -f cyb-llm.gz
  chmod +x cyb-llm
  ./cyb-llm import gemma.gguf -o gemma.model
  for run in "cpu curated" "reference curated" "wgpu curated" "wgpu graph"; do
    set -- $run
    ./cyb-llm run gemma.model --backend "$1" --path "$2" --temp 0 --no-chat -n 16 -c 256 \
      -p "$PROMPT" --json --dispatch >"greedy-$1-$2.json"
    echo "$1 $2: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(repr(d["text"]), d["timings"]["decode_tok_s"])' "greedy-$1-$2.json")"
  done
  if [ -x llama-bench-vulkan ]; then
    ./cyb-llm bench gemma.model --backend wgpu -p 512 -n 128 -r 3
    ./llama-bench-vulkan -m gemma.gguf -p 512 -n 128 -ngl 99 -r 3
  fi
  ;;
*)
  echo "usage: scripts/gemma-h200.sh pack|stash N|device" >&2
  exit 2
  ;;
esac
