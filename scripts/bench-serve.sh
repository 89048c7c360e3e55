#!/usr/bin/env bash
# cyb-llm serve against llama.cpp's llama-server on the same GGUF (SmolLM2-135M Q4_1),
# same threads, same run: single-stream decode through the server next to
# `cyb-llm run`, then aggregate tok/s and p50/p99 latency at concurrency 1, 4, 8
# (scripts/bench_serve.py, the official openai client). Needs the peers built:
# scripts/build-llamacpp.sh (llama-server) and the openai venv
# (scripts/fetch-models.sh openai).
#
#   scripts/bench-serve.sh [REQUESTS_PER_LEVEL]   # default 16; THREADS=2 MAX_TOKENS=64
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
N=${1:-16}
THREADS=${THREADS:-2}
MAX_TOKENS=${MAX_TOKENS:-64}
BIN=${CYB_LLM_BIN:-target/release/cyb-llm}
SERVER=${LLAMA_SERVER:-.cache/llama.cpp-build/cmake/bin/llama-server}
PY=${CYB_OPENAI_PYTHON:-.cache/openai-venv/bin/python}
GGUF=${GGUF:-.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=.cache/bench/serve
mkdir -p "$OUT"
[ -x "$SERVER" ] || { echo "bench-serve: $SERVER missing: run scripts/build-llamacpp.sh" >&2; exit 1; }
[ -x "$PY" ] || { echo "bench-serve: $PY missing: run scripts/fetch-models.sh openai" >&2; exit 1; }
[ -f "$GGUF" ] || scripts/fetch-models.sh smollm2
MODEL=$OUT/smollm2.model
[ -f "$MODEL" ] || checked import "$OUT/import.out" "$BIN" import "$GGUF" -o "$MODEL"

echo "# $(machine_line)"
echo "# cyb-llm $("$BIN" --version | cut -d' ' -f2) ($(git rev-parse --short HEAD)), llama-server from llama-cpp-python 0.3.36's llama.cpp, $THREADS threads, $MAX_TOKENS tokens per request, $N requests per level"

wait_ready() { # wait_ready URL LOG
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "bench-serve: the server at $1 did not become ready; its log:" >&2; tail -20 "$2" >&2; exit 1
}

stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null || true; }

checked run "$OUT/run.json" "$BIN" run "$MODEL" -p "Write a long story about the sea." --temp 0 \
  -n "$MAX_TOKENS" -t "$THREADS" --backend cpu --json
echo "cyb-llm run (single stream, decode): $(tail -1 "$OUT/run.json" | "$PY" -c 'import json,sys; print("%.1f tok/s" % json.load(sys.stdin)["timings"]["decode_tok_s"])')"

measure() { # measure NAME LEVEL PORT SERVER-CMD...: start it, load it, stop it
  local name=$1 level=$2 port=$3 pid
  shift 3
  "$@" --port "$port" >"$OUT/$name-$level.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port" "$OUT/$name-$level.log"
  checked "$name c=$level" "$OUT/$name-$level.json" "$PY" scripts/bench_serve.py \
    "http://127.0.0.1:$port" smollm2 "$level" "$N" "$MAX_TOKENS"
  stop $pid
}

for level in 1 4 8; do
  measure cyb $level 18180 "$BIN" serve "$MODEL" -t "$THREADS" --backend cpu --parallel $level -c 1024
  measure llama $level 18181 "$SERVER" -m "$GGUF" -t "$THREADS" -np $level -c $((1024 * level)) --no-webui
  "$PY" - "$level" "$OUT/cyb-$level.json" "$OUT/llama-$level.json" <<'PYEOF'
import json, sys
level, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
fmt = lambda r: "%6.1f tok/s (server decode %s), p50 %.2f s, p99 %.2f s, %d tokens" % (
    r["tok_s"], "%.1f" % r["server_decode_tok_s"] if r["server_decode_tok_s"] else "-", r["p50_s"], r["p99_s"], r["tokens"])
print(f"concurrency {level}: cyb-llm serve {fmt(a)} | llama-server {fmt(b)} | ratio {a['tok_s'] / b['tok_s']:.2f}x")
PYEOF
done
