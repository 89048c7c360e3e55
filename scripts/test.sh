#!/usr/bin/env bash
# The project's test command: fetch the registry models the tests use (cached),
# then build once in release mode and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo test --release --all-targets --no-fail-fast "$@"
