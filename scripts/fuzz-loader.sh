#!/usr/bin/env bash
# Runs the loader fuzz target for a bounded time (default 300 s), seeded with
# valid and corrupted .model files written by the test suite's tiny model.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); the stable toolchain is used
# with RUSTC_BOOTSTRAP=1 for the sanitizer flags.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
mkdir -p fuzz/corpus/load
if [ -z "$(ls -A fuzz/corpus/load)" ]; then
  CYB_WRITE_SEED_MODEL=fuzz/corpus/load/tiny.model cargo test --quiet --test loader_corpus valid_file_loads_twice_to_equivalent_models -- --exact >/dev/null
fi
RUSTC_BOOTSTRAP=1 cargo fuzz run load -- -max_total_time="$secs" -rss_limit_mb=2048 -dict=fuzz/model.dict 2>&1 | tail -n 25
