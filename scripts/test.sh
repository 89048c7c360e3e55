#!/usr/bin/env bash
# The project's test command: fetch the registry models the tests use (cached),
# then build once in release mode and run every test; then the cpu kernels for aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo test --release --all-targets --no-fail-fast "$@"
# The NEON kernels, built for aarch64 and run under qemu (native run above on aarch64).
scripts/test-aarch64.sh
