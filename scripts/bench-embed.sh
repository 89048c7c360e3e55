#!/usr/bin/env bash
# Sentence-embedding throughput: `cyb-llm embed` next to sentence-transformers, both on the
# CPU of this machine, in the same run, on the same 1000 sentences and all-MiniLM-L6-v2 weights.
#
#   scripts/bench-embed.sh                 # batch sizes 1 and 32, physical cores
#   N=200 BATCHES="8 64" THREADS=1 scripts/bench-embed.sh
#   CYB_LLM_BIN=/tmp/cyb-llm scripts/bench-embed.sh   # an already built binary
#
# Needs scripts/fetch-models.sh minilm, and a Python with torch + sentence-transformers
# ($PYTHON, default .cache/embed-venv/bin/python, which `scripts/bench.sh embed` makes from
# scripts/bench-embed-requirements.txt). A failing tool stops the run with its stderr. For each batch size it runs cyb-llm, then
# sentence-transformers (after a warm-up, same thread count), alternating so that background
# load hits both alike; time covers tokenization + forward + pooling, not model loading. It
# also checks that both produce the same vectors (minimum cosine over all sentences).
# Prints a Markdown table for BENCHMARKS.md, then `cyb-llm gemm`'s lines: this machine's cache
# sizes, its measured FMA peak and the float GEMM's GFLOP/s at the encoder's shapes (a batch
# of 32 sentences of 32 tokens) as a fraction of that peak.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
PY=${PYTHON:-.cache/embed-venv/bin/python}
MODELS=${CYB_MODELS_DIR:-.cache/models}
N=${N:-1000}
BATCHES=${BATCHES:-"1 32"}
THREADS=${THREADS:-$(lscpu -p=CORE,SOCKET | grep -v '^#' | sort -u | wc -l)}
SRC="$MODELS/minilm"
[ -f "$SRC/model.safetensors" ] || { echo "bench-embed: $SRC missing: run scripts/fetch-models.sh minilm" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# A private copy: other builds sharing target/ cannot swap the binary mid-run.
# CYB_LLM_BIN=path benchmarks that binary instead of building target/release/cyb-llm.
cyb_llm_into "$WORK"
"$WORK/cyb-llm" import "$SRC" -o "$WORK/minilm.model" >/dev/null 2>&1

"$PY" - "$N" "$WORK/texts.txt" <<'PYEOF'
import random, sys
n, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(8)
words = ("the a man woman dog cat city river mountain quickly slowly eats runs builds reads "
         "writes beautiful old new small large red green blue under over near far music science "
         "history computer language model data network system people children morning evening "
         "table window garden").split()
with open(out, "w") as f:
    for _ in range(n):
        f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 40))).capitalize() + ".\n")
PYEOF

cat > "$WORK/st.py" <<'PYEOF'
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from sentence_transformers import SentenceTransformer
src, texts_path, threads, batch, ours_path = sys.argv[1:6]
torch.set_num_threads(int(threads))
texts = [l.rstrip("\n") for l in open(texts_path, encoding="utf-8")]
model = SentenceTransformer(src, device="cpu")
model.encode(texts[:64], batch_size=int(batch))
t = time.perf_counter()
emb = model.encode(texts, batch_size=int(batch), convert_to_numpy=True)
dt = time.perf_counter() - t
ours = np.array([json.loads(l)["embedding"] for l in open(ours_path)], dtype=np.float64)
cos = (ours * emb).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(emb, axis=1))
print(f"{len(texts) / dt:.1f} {cos.min():.6f}")
PYEOF

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sentences: $N ($(wc -w < "$WORK/texts.txt") words), all-MiniLM-L6-v2 f32, torch $("$PY" -c 'import torch; print(torch.__version__)'), sentence-transformers $("$PY" -c 'import sentence_transformers as s; print(s.__version__)')"
echo
echo "| batch | cyb-llm sentences/s | sentence-transformers sentences/s | ratio | min cosine |"
echo "|---:|---:|---:|---:|---:|"
# A pause before every measured run: a run that starts right after torch's exits measured up
# to 25 % slower (both engines get the same pause).
for b in $BATCHES; do
  sleep "${PAUSE:-5}"
  checked "cyb-llm embed -b $b" "$WORK/ours.jsonl" "$WORK/cyb-llm" embed "$WORK/minilm.model" \
    --file "$WORK/texts.txt" -b "$b" -t "$THREADS" --backend cpu --timings
  ours=$(sed -n 's/.* \([0-9.]*\) texts\/s.*/\1/p' "$WORK/ours.jsonl.err")
  sleep "${PAUSE:-5}"
  checked "sentence-transformers batch $b" "$WORK/st.out" \
    "$PY" "$WORK/st.py" "$SRC" "$WORK/texts.txt" "$THREADS" "$b" "$WORK/ours.jsonl"
  read -r st cos <"$WORK/st.out"
  ratio=$(awk -v a="$ours" -v b="$st" 'BEGIN { printf "%.2f", a / b }')
  echo "| $b | $ours | $st | ${ratio}x | $cos |"
done
echo
sleep "${PAUSE:-5}"
# The GEMM against the FMA peak, on the same threads (a binary older than `cyb-llm gemm` says so).
"$WORK/cyb-llm" gemm -t "$THREADS" 2>&1 || echo "gemm: this cyb-llm binary has no \`gemm\` command"
