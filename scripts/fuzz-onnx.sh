#!/usr/bin/env bash
# Runs the ONNX importer fuzz target for a bounded time (default 600 s), seeded with the
# committed op-case models (tests/fixtures/onnx/ops/*/model.onnx). Needs cargo-fuzz
# (`cargo install cargo-fuzz`); the stable toolchain is used with RUSTC_BOOTSTRAP=1 for the
# sanitizer flags.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
mkdir -p fuzz/corpus/onnx_import
for m in tests/fixtures/onnx/ops/*/model.onnx; do
  cp "$m" "fuzz/corpus/onnx_import/$(basename "$(dirname "$m")").onnx"
done
RUSTC_BOOTSTRAP=1 cargo fuzz run onnx_import -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -n 25
