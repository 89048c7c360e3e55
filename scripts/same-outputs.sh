#!/usr/bin/env bash
# Checks that two builds compute the same thing, byte for byte: for a refactor that must not
# change behaviour (issue 16's "one definition per family"). Each binary imports the same
# sources itself, then both are compared on
# - the generated graph section (`cyb-llm graph M`, value names renumbered) of every
#   LlamaStyle, BertStyle and WhisperStyle model below;
# - the logits `perplexity --kl-divergence-base` saves, the perplexity lines and a greedy `run`,
#   of each text model on both paths (curated, graph) and two backends (cpu, reference);
# - `embed` output of the encoders on both paths and backends, at batch 1 and 7;
# - `transcribe --format json` of jfk.wav on cpu and reference (word timestamps), with beam 5,
#   and on both paths with beam 2 and word timestamps.
#
#   scripts/same-outputs.sh OLD_BIN NEW_BIN      # e.g. a copy of target/release/cyb-llm from before
#
# Needs scripts/fetch-models.sh smollm2 minilm whisper. Prints one line per difference and
# exits 1 when there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
OLD=$(realpath "$1"); NEW=$(realpath "$2")
M=${CYB_MODELS_DIR:-.cache/models}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
head -c 6000 README.md > "$WORK/text.txt"
head -c 3000 README.md | tr '\n' ' ' | fold -w 120 > "$WORK/lines.txt"

text=(smollm2="$M/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" qwen2=tests/fixtures/hf/qwen2/model qwen3=tests/fixtures/hf/qwen3/model
      gemma3=tests/fixtures/hf/gemma3/model llama_spm=tests/fixtures/hf/llama_spm/model)
enc=(minilm="$M/minilm" distilbert=tests/fixtures/bert/distilbert_tiny)
speech=(whisper="$M/whisper/tiny.en-ct2")

run_all() { # BIN OUT
  local bin=$1 out=$2 name src
  mkdir -p "$out"
  for pair in "${text[@]}" "${enc[@]}" "${speech[@]}"; do
    name=${pair%%=*}; src=${pair#*=}
    "$bin" import "$src" -o "$out/$name.model" >/dev/null 2>&1
    # Value names (`label#N`) renumbered by first use: the same ops on the same values compare
    # equal whatever the writer called them.
    "$bin" graph "$out/$name.model" |
      perl -pe 's/"([^"]*#\d+)"/"\"" . ($v{$1} //= "v" . ++$n) . "\""/ge' > "$out/$name.graph"
  done
  for pair in "${text[@]}"; do
    name=${pair%%=*}
    for p in curated graph; do for be in cpu reference; do
      "$bin" perplexity "$out/$name.model" -f "$WORK/text.txt" -c 128 --chunks 2 -t 2 --backend $be \
        --path $p --kl-divergence-base "$out/$name.$p.$be.logits" 2>&1 | grep -v "tok/s" > "$out/$name.$p.$be.ppl"
    done; done
    "$bin" run "$out/$name.model" -p "The capital of France is" -n 24 --temp 0 --no-chat -t 2 \
      > "$out/$name.run" 2>/dev/null
  done
  for pair in "${enc[@]}"; do
    name=${pair%%=*}
    for p in curated graph; do for be in cpu reference; do for b in 1 7; do
      "$bin" embed "$out/$name.model" --file "$WORK/lines.txt" -b $b -t 2 --backend $be --path $p \
        > "$out/$name.$p.$be.$b.embed" 2>/dev/null
    done; done; done
  done
  for be in cpu reference; do
    "$bin" transcribe "$out/whisper.model" "$M/whisper/jfk.wav" -t 2 --backend $be --word-timestamps \
      --format json -o "$out/tr-$be" >/dev/null 2>&1
  done
  "$bin" transcribe "$out/whisper.model" "$M/whisper/jfk.wav" -t 2 --beam-size 5 --format json \
    -o "$out/tr-beam" >/dev/null 2>&1
  for p in curated graph; do
    "$bin" transcribe "$out/whisper.model" "$M/whisper/jfk.wav" -t 2 --path $p --word-timestamps \
      --beam-size 2 --format json -o "$out/tr-$p-beam2" >/dev/null 2>&1
  done
  rm -f "$out"/*.model
}

run_all "$OLD" "$WORK/old"
run_all "$NEW" "$WORK/new"
if diff -rq "$WORK/old" "$WORK/new"; then
  echo "same outputs: $(find "$WORK/new" -type f | wc -l) files compared"
else
  exit 1
fi
