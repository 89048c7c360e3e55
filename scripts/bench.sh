#!/usr/bin/env bash
# One command per benchmark topic of BENCHMARKS.md. Each topic fetches the models
# and builds its peers itself, at pinned versions, stops on the first tool that
# fails (with its stderr), and writes its tables together with the versions, the
# machine and the load average before and after to stdout and to
# .cache/bench/TOPIC-DATE.md. Tracked files are never written: the run checks that
# `git status --porcelain` is the same at its end as at its start.
#
#   scripts/bench.sh llm       # cyb-llm bench vs llama.cpp's llama-bench, CPU, SmolLM2-135M Q4_1
#                              # and Gemma-3-270M Q4_K_M (llama.cpp from the llama-cpp-python==0.3.36
#                              # sdist, scripts/build-llamacpp.sh); env as scripts/bench-vs-llamacpp.sh
#                              # (THREADS=2 P=512 N=128 REPS=3 ROUNDS=2 LLAMA_ARGS=...)
#   scripts/bench.sh whisper [RUNS]  # cyb-llm transcribe vs whisper.cpp's whisper-cli (1.8.5, from the
#                              # pywhispercpp==1.5.1 sdist, scripts/build-whispercpp.sh) and faster-whisper
#                              # (scripts/bench-requirements.txt in .cache/bench-venv), tiny.en, jfk.wav and
#                              # two minutes of speech; env NO_FALLBACK=1 as scripts/bench-whisper.sh
#   scripts/bench.sh perplexity  # cyb-llm perplexity vs llama.cpp's llama-perplexity, CPU, SmolLM2 and
#                              # Gemma-3-270M, -c 512 --chunks 4 (same llama.cpp build as `llm`); env as
#                              # scripts/bench-perplexity.sh (THREADS=2 CTX=512 CHUNKS=4 ROUNDS=2)
#   scripts/bench.sh serve       # cyb-llm serve vs llama.cpp's llama-server (same llama.cpp build as
#                              # `llm`), SmolLM2, the openai client at concurrency 1, 4, 8; env as
#                              # scripts/bench-serve.sh (THREADS=2 MAX_TOKENS=64), argument: requests per level
#   scripts/bench.sh embed       # cyb-llm embed vs sentence-transformers (torch, pinned in
#                              # scripts/bench-embed-requirements.txt, .cache/embed-venv), all-MiniLM-L6-v2,
#                              # 1000 sentences, batch 1 and 32; env as scripts/bench-embed.sh
#   scripts/bench.sh onnx        # cyb-llm eval vs onnxruntime (pinned in scripts/bench-onnx-requirements.txt,
#                              # .cache/onnx-venv), the terrain UNet at batch 1 and 8; env as
#                              # scripts/bench-onnx.sh (THREADS=2 REPS=3 BATCHES="1 8")
#   scripts/bench.sh diffuse     # cyb-llm diffuse vs onnxruntime running the terrain package's one-step
#                              # sampling (same venv as onnx), images/s at batch 1 and 8, load included
#                              # and excluded; env as scripts/bench-diffuse.sh (THREADS=2 BATCHES_PER_RUN=4)
#   scripts/bench.sh tts         # cyb-llm speak vs piper-tts (pinned in scripts/bench-tts-requirements.txt,
#                              # .cache/piper-venv), en_US-joe-medium, tests/fixtures/tts/sentences.txt,
#                              # real-time factor whole process and synthesis only; env as scripts/bench-tts.sh
#
# Each run also redraws .cache/bench/ratios.svg (scripts/bench_chart.py): cyb-llm's speed over
# each peer's, per task, from the newest report of each topic.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
topic=${1:-}
[ $# -gt 0 ] && shift
case $topic in
  llm | whisper | perplexity | serve | embed | onnx | diffuse | tts) ;;
  *) usage ;;
esac

tree_before=$(git status --porcelain)
mkdir -p .cache/bench
report=.cache/bench/$topic-$(date -u +%Y%m%dT%H%M%SZ).md
CYB=${CYB:-target/release/cyb-llm}
RAW=${report%.md}-raw    # every tool's output and stderr, kept beside the report
export CYB RAW

cyb_version() {
  local dirty=""
  git diff --quiet HEAD -- 2>/dev/null || dirty=" (with uncommitted changes)"
  echo "cyb-llm $(git rev-parse --short HEAD)$dirty, $(rustc --version)"
}

# A topic whose peer is llama.cpp: TITLE, the SCRIPT that prints its tables, the
# fetch-models.sh TARGETS (one word list); the rest goes to SCRIPT.
llamacpp_topic() {
  local title=$1 script=$2 targets=$3
  shift 3
  # shellcheck disable=SC2086 # TARGETS is a word list
  scripts/fetch-models.sh $targets >&2
  scripts/build-llamacpp.sh >&2
  [ "$CYB" != target/release/cyb-llm ] || cargo build --release --bin cyb-llm >&2
  echo "## $title"
  echo
  echo "- $(cyb_version)"
  echo "- llama.cpp: the tree vendored by llama-cpp-python==0.3.36 (sdist, SHA-256 checked by scripts/build-llamacpp.sh), $(cmake --version | head -1), $(${CXX:-c++} --version | head -1)"
  echo "- before: $(machine_line)"
  echo
  # The script's tables go to stdout, its notes (threads, llama.cpp build) to stderr: both into the report.
  "$script" "$@" 2>&1
  echo
  echo "- after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

llm() {
  llamacpp_topic "llm: CPU prefill / decode, cyb-llm bench vs llama-bench" \
    scripts/bench-vs-llamacpp.sh "smollm2 gemma3" "$@"
}

serve() {
  llamacpp_topic "serve: cyb-llm serve vs llama-server, aggregate tok/s and latency at concurrency 1, 4, 8" \
    scripts/bench-serve.sh "smollm2 openai" "$@"
}

perplexity() {
  llamacpp_topic "perplexity: cyb-llm perplexity vs llama-perplexity" \
    scripts/bench-perplexity.sh "smollm2 gemma3 ppltext" "$@"
}

# bench_venv REQUIREMENTS VENV: the pinned Python peers in a venv of their own (remade
# when the pins change).
bench_venv() {
  local req=$1 v=$2
  if ! cmp -s "$req" "$v/requirements.txt" 2>/dev/null; then
    rm -rf "$v"
    python3 -m venv "$v"
    "$v/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
    cp "$req" "$v/requirements.txt"
  fi
}

# A topic whose peers are Python packages: TITLE, REQUIREMENTS, VENV, the regex of the
# packages whose versions head the report, the SCRIPT that prints its tables (run with
# PYTHON=VENV/bin/python); the rest goes to SCRIPT. $PEER_LINE, when set, is one more
# version line (a peer built from source).
venv_topic() {
  local title=$1 req=$2 venv=$3 pins=$4 script=$5
  shift 5
  bench_venv "$req" "$venv"
  cargo build --release --bin cyb-llm >&2
  local versions
  versions=$("$venv/bin/python" -m pip freeze | grep -iE "^($pins)==" | paste -sd ' ' -)
  echo "## $title"
  echo
  echo "- $(cyb_version)"
  [ -z "${PEER_LINE:-}" ] || echo "- $PEER_LINE"
  echo "- $versions, $("$venv/bin/python" --version) (all pins: $req)"
  echo "- before: $(machine_line)"
  echo
  PYTHON=$venv/bin/python "$script" "$@"
  echo
  echo "- after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

embed() {
  scripts/fetch-models.sh minilm >&2
  venv_topic "embed: sentence embeddings, cyb-llm embed vs sentence-transformers" \
    scripts/bench-embed-requirements.txt .cache/embed-venv 'torch|sentence-transformers|transformers' \
    scripts/bench-embed.sh "$@"
}

whisper() {
  scripts/fetch-models.sh whisper >&2
  scripts/build-whispercpp.sh >&2
  PEER_LINE="whisper.cpp 1.8.5 (vendored by pywhispercpp==1.5.1, sdist SHA-256 checked by scripts/build-whispercpp.sh), $(${CXX:-c++} --version | head -1)" \
    venv_topic "whisper: speech to text, cyb-llm transcribe vs whisper.cpp and faster-whisper" \
    scripts/bench-requirements.txt .cache/bench-venv 'faster-whisper|ctranslate2|onnxruntime' \
    scripts/bench-whisper.sh "$@"
}

onnx() {
  scripts/fetch-models.sh terrain >&2
  venv_topic "onnx: imported ONNX graphs, cyb-llm eval vs onnxruntime" \
    scripts/bench-onnx-requirements.txt .cache/onnx-venv 'onnxruntime|onnx|numpy' \
    scripts/bench-onnx.sh "$@"
}

diffuse() {
  scripts/fetch-models.sh terrain >&2
  venv_topic "diffuse: image generation, cyb-llm diffuse vs onnxruntime" \
    scripts/bench-onnx-requirements.txt .cache/onnx-venv 'onnxruntime|onnx|numpy' \
    scripts/bench-diffuse.sh "$@"
}

tts() {
  scripts/fetch-models.sh piper >&2
  venv_topic "tts: text to speech, cyb-llm speak vs piper-tts" \
    scripts/bench-tts-requirements.txt .cache/piper-venv 'piper-tts|onnxruntime' \
    scripts/bench-tts.sh "$@"
}

"$topic" "$@" | tee "$report"
tree_after=$(git status --porcelain)
if [ "$tree_before" != "$tree_after" ]; then
  echo "bench: the run changed the tree (git status --porcelain before / after):" >&2
  diff <(echo "$tree_before") <(echo "$tree_after") >&2 || true
  exit 1
fi
python3 scripts/bench_chart.py .cache/bench .cache/bench/ratios.svg
echo "bench: written to $report; the chart of the newest reports is .cache/bench/ratios.svg" \
  "(copy it to benchmarks.svg beside BENCHMARKS.md to publish it)" >&2
