#!/usr/bin/env bash
# `cyb-llm run --timings` beside llama.cpp's llama-bench on the same GGUF (SmolLM2-135M
# Q4_1), same threads, in the same run, for BENCHMARKS.md. Not run by CI.
#
#   scripts/bench-run-vs-llamacpp.sh [THREADS] [REPS]      # default 2 threads, 3 repetitions
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-2}
R=${2:-3}
scripts/fetch-models.sh smollm2 >/dev/null
scripts/build-llamacpp.sh
cargo build --release --quiet
bin=target/release/cyb-llm
gguf=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
model=.cache/smollm2.model
[ -f "$model" ] || "$bin" import "$gguf" -o "$model"
# A raw prompt of known length: 128 tokens of prose, then 64 greedy tokens.
prompt=$(python3 -c 'print(("The history of the city begins with a small settlement on the river bank, where traders met every spring. " * 8).strip())')
n_prompt=$("$bin" run "$model" --backend cpu -t "$T" --no-chat --temp 0 -n 1 --json -p "$prompt" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["timings"]["prefill_tokens"])')
echo "cyb-llm run (cpu, $T threads): prompt $n_prompt tokens, 64 generated, best of $R" >&2
for _ in $(seq "$R"); do
  "$bin" run "$model" --backend cpu -t "$T" --no-chat --temp 0 -n 64 --json -p "$prompt" 2>/dev/null \
    | python3 -c 'import json,sys; t=json.load(sys.stdin)["timings"]; print("%.1f %.1f %d" % (t["prefill_tok_s"], t["decode_tok_s"], t["decode_tokens"]))'
done | sort -k2 -n -r | head -1 | awk '{print "cyb-llm  pp" '"$n_prompt"' " " $1 " tok/s   tg" $3 " " $2 " tok/s"}'
echo "llama-bench (same GGUF, $T threads, $R repetitions):" >&2
.cache/llama.cpp-build/cmake/bin/llama-bench -m "$gguf" -t "$T" -p "$n_prompt" -n 64 -r "$R" -o md
