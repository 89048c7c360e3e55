#!/usr/bin/env bash
# cyb-llm vs llama.cpp on the CPU, same machine, same thread count, same run.
#
# For each GGUF file and its imported .model (imported next to it when missing),
# runs llama.cpp's llama-bench (A) and `cyb-llm bench --backend cpu` (B)
# interleaved, A B A B ... for ROUNDS rounds, each with REPS repetitions per test
# after a warm-up, and prints per test: both runtimes' tokens/s (llama.cpp: mean
# ± sd over all repetitions; cyb-llm: mean ± sd of the round means) and the
# ratio cyb-llm / llama.cpp.
# llama-bench is built by scripts/build-llamacpp.sh (llama-cpp-python sdist,
# cached in .cache/llama.cpp-build, outside the tracked tree).
#
#   scripts/bench-vs-llamacpp.sh [GGUF|qwen2-0.5b|llama-1b ...]
#   env: THREADS=2 P=512 N=128 REPS=3 ROUNDS=2 CYB=target/release/cyb-llm
#        RAW=DIR (keep every run's JSON there)
#        BENCH_MODELS=.cache/bench-models (where qwen2-0.5b / llama-1b are generated)
#        LLAMA_ARGS="--poll 0" (extra llama-bench flags; on a machine shared with other
#        work llama.cpp's spinning thread barriers stall, and its tg figures then vary 10x)
# Default GGUFs: the SmolLM2 Q4_1 and Gemma-3-270M Q4_K_M of scripts/fetch-models.sh, and
# seeded-random Q4_K_M files of Qwen2-0.5B's and Llama-3.2-1B's shapes and quantization mixes
# (the names qwen2-0.5b and llama-1b: scripts/make_bench_gguf.py writes them into
# BENCH_MODELS when missing, from the vocab GGUFs of `scripts/fetch-models.sh llamacpp`).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
THREADS=${THREADS:-2}
P=${P:-512}
N=${N:-128}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
CYB=${CYB:-target/release/cyb-llm}
LLAMA_ARGS=${LLAMA_ARGS:-}
LB=${CYB_LLAMACPP_BUILD:-.cache/llama.cpp-build}/cmake/bin/llama-bench
RAW=${RAW:-$(mktemp -d)}
BENCH_MODELS=${BENCH_MODELS:-.cache/bench-models}
VOCAB=.cache/models/llama-vocab
mkdir -p "$RAW"

[ -x "$LB" ] || scripts/build-llamacpp.sh
[ -x "$CYB" ] || cargo build --release --bin cyb-llm
if [ $# -eq 0 ]; then
  set -- .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .cache/models/gemma3/gemma-3-270m-q4_k_m.gguf \
    qwen2-0.5b llama-1b
fi
# A generated model's name -> its GGUF (written when missing).
gguf_of() {
  local vocab
  case $1 in
    qwen2-0.5b) vocab=$VOCAB/ggml-vocab-qwen2.gguf ;;
    llama-1b) vocab=$VOCAB/ggml-vocab-llama-bpe.gguf ;;
    *) echo "$1"; return ;;
  esac
  local f=$BENCH_MODELS/$1-q4_k_m.gguf
  [ -f "$f" ] || python3 scripts/make_bench_gguf.py "$1" "$vocab" "$f" >&2
  echo "$f"
}

echo "# $(machine_line)" >&2
echo "# threads $THREADS, pp$P, tg$N, $ROUNDS rounds x $REPS reps, interleaved llama.cpp / cyb-llm${LLAMA_ARGS:+ (llama-bench $LLAMA_ARGS)}" >&2
for name in "$@"; do
  gguf=$(gguf_of "$name")
  model=${gguf%.gguf}.model
  [ -f "$model" ] || "$CYB" import "$gguf" -o "$model" >&2
  stem=$(basename "${gguf%.gguf}")
  for r in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    checked llama-bench "$RAW/$stem.llamacpp.$r.json" \
      "$LB" -m "$gguf" -t "$THREADS" -p "$P" -n "$N" -r "$REPS" $LLAMA_ARGS -o json
    checked "cyb-llm bench" "$RAW/$stem.cyb.$r.json" \
      "$CYB" bench "$model" --backend cpu --path curated -t "$THREADS" -p "$P" -n "$N" -r "$REPS" \
      --output json
  done
  python3 - "$RAW" "$stem" "$ROUNDS" <<'EOF'
import json, statistics, sys
raw, stem, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
a, b = {}, {}
for r in range(1, rounds + 1):
    for row in json.load(open(f"{raw}/{stem}.llamacpp.{r}.json")):
        test = f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}"
        a.setdefault(test, []).extend(row["samples_ts"])
    for row in json.load(open(f"{raw}/{stem}.cyb.{r}.json")):
        # cyb-llm's JSON has each round's mean: its sd is across rounds.
        b.setdefault(row["test"], []).append(row["tokens_per_s"])
def ms(v):
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)
first = json.load(open(f"{raw}/{stem}.llamacpp.1.json"))[0]
build = first.get("build_commit", "unknown")
print(f"llama-bench: {'build ' + build + ', ' if build != 'unknown' else ''}"
      f"cpu {first.get('cpu_info', '?')}, backends {first.get('backends', '?')}", file=sys.stderr)
print(f"| model | test | llama.cpp t/s | cyb-llm t/s | ratio |")
print(f"| ----- | ---- | ------------: | ----------: | ----: |")
for test in a:
    (am, asd), (bm, bsd) = ms(a[test]), ms(b.get(test, [0.0]))
    print(f"| {stem} | {test} | {am:.2f} ± {asd:.2f} | {bm:.2f} ± {bsd:.2f} | {bm / am:.2f} |")
EOF
done
echo "# raw JSON in $RAW; load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
