#!/usr/bin/env bash
# `cyb-llm perplexity` vs llama.cpp's `llama-perplexity`: same GGUF (cyb-llm on
# its imported .model), same text, same -c / --chunks / threads, interleaved
# A B A B ... for ROUNDS rounds. Prints per model both perplexities and both
# tokens/s (tokens evaluated = chunks x ctx over the evaluation's time:
# llama.cpp's "seconds per pass" x passes, cyb-llm's `seconds`), and the ratio.
# Either tool failing stops the run with its output.
# llama-perplexity is built by scripts/build-llamacpp.sh (cached in .cache/).
#
#   scripts/bench-perplexity.sh [GGUF...]
#   env: THREADS=2 CTX=512 CHUNKS=4 ROUNDS=2 CYB=target/release/cyb-llm
# Default GGUFs: the SmolLM2 Q4_1 and Gemma-3-270M Q4_K_M of scripts/fetch-models.sh;
# the text is scripts/fetch-models.sh's `ppltext`.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
CTX=${CTX:-512}
CHUNKS=${CHUNKS:-4}
ROUNDS=${ROUNDS:-2}
CYB=${CYB:-target/release/cyb-llm}
LP=${CYB_LLAMACPP_BUILD:-.cache/llama.cpp-build}/cmake/bin/llama-perplexity
TEXT=${CYB_MODELS_DIR:-.cache/models}/texts/llama-perplexity-README.md

[ -x "$LP" ] || scripts/build-llamacpp.sh
[ -x "$CYB" ] || cargo build --release --bin cyb-llm
[ -f "$TEXT" ] || scripts/fetch-models.sh ppltext
if [ $# -eq 0 ]; then
  set -- .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .cache/models/gemma3/gemma-3-270m-q4_k_m.gguf
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $THREADS, -c $CTX, --chunks $CHUNKS, $ROUNDS rounds interleaved; $("$LP" --version 2>&1 | head -1); $("$CYB" --version)"
echo
echo "| model | round | llama.cpp PPL | cyb-llm PPL | llama.cpp tok/s | cyb-llm tok/s | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for gguf in "$@"; do
  model=${gguf%.gguf}.model
  [ -f "$model" ] || "$CYB" import "$gguf" -o "$model" >&2
  for r in $(seq "$ROUNDS"); do
    if ! "$LP" -m "$gguf" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" >"$log" 2>&1; then
      echo "bench-perplexity: llama-perplexity failed on $gguf:" >&2; cat "$log" >&2; exit 1
    fi
    read -r a_ppl a_tps < <(python3 - "$log" "$CTX" "$CHUNKS" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
ppl = re.search(r"Final estimate: PPL = ([0-9.]+)", log).group(1)
# llama-perplexity times its first pass (n_seq chunks in one batch) and estimates the
# rest from it; its total is pass time x passes.
ctx, chunks = int(sys.argv[2]), int(sys.argv[3])
n_seq = int(re.search(r"n_seq=(\d+)", log).group(1))
per_pass = float(re.search(r"([0-9.]+) seconds per pass", log).group(1))
passes = -(-chunks // n_seq)
print(ppl, f"{ctx * chunks / (per_pass * passes):.1f}")
PY
)
    if ! "$CYB" perplexity "$model" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" --backend cpu --json >"$log" 2>/dev/null; then
      echo "bench-perplexity: cyb-llm perplexity failed on $model:" >&2
      "$CYB" perplexity "$model" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" --backend cpu >&2 || true
      exit 1
    fi
    read -r b_ppl b_tps < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.4f %.1f" % (d["perplexity"], d["tokens_per_second"]))' "$log")
    ratio=$(python3 -c "print(f'{$b_tps / $a_tps:.2f}x')")
    echo "| $(basename "$gguf") | $r | $a_ppl | $b_ppl | $a_tps | $b_tps | $ratio |"
  done
done
