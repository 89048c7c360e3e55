#!/usr/bin/env bash
# Runs the cargo-fuzz targets for a bounded time each, one after the other, one job each:
#   scripts/fuzz.sh [TARGET|all] [SECONDS]      (default: all, 600 s each)
# Targets: load (the .model loader), onnx_import, gguf_import, hf_import, ct2_import,
# audio_decode, chat_template. Each corpus (fuzz/corpus/TARGET, not committed) starts from
# the committed seeds: fuzz/seeds/TARGET (scripts/make_fuzz_seeds.py), the ONNX op-case
# models, or for `load` a tiny .model written by the loader corpus test. Prints one line per
# target: executions, seconds, and the crash file if libFuzzer found one (it is left in
# fuzz/artifacts/TARGET/; turn it into a regression test in tests/). The full libFuzzer
# output is in fuzz/logs/TARGET.log. Inputs that take over 10 s or allocate over 2 GiB
# (6 GiB for audio) count as crashes. Not run in CI. Needs cargo-fuzz (`cargo install cargo-fuzz`); the
# stable toolchain is used with RUSTC_BOOTSTRAP=1 for the sanitizer flags.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(load onnx_import gguf_import hf_import ct2_import audio_decode chat_template)
target=${1:-all}
secs=${2:-600}
if [ "$target" = all ]; then targets=("${all[@]}"); else targets=("$target"); fi

seed() {
  local t=$1 c=fuzz/corpus/$1
  mkdir -p "$c"
  case $t in
    load)
      if [ -z "$(ls -A "$c")" ]; then
        CYB_WRITE_SEED_MODEL="$c/tiny.model" cargo test --release --quiet --test loader_corpus \
          valid_file_loads_twice_to_equivalent_models -- --exact >/dev/null
      fi ;;
    onnx_import)
      for m in tests/fixtures/onnx/ops/*/model.onnx; do
        cp "$m" "$c/$(basename "$(dirname "$m")").onnx"
      done ;;
    *) cp fuzz/seeds/"$t"/* "$c"/ ;;
  esac
}

dict() {
  case $1 in
    load) echo "-dict=fuzz/model.dict" ;;
    gguf_import | hf_import | ct2_import | audio_decode | chat_template) echo "-dict=fuzz/$1.dict" ;;
  esac
}

# Memory limit (MiB): audio may decode to cyb_llm::audio::MAX_SAMPLES (4 GiB of f32) by design.
rss() {
  case $1 in
    audio_decode) echo 6144 ;;
    *) echo 2048 ;;
  esac
}

mkdir -p fuzz/logs
if [ "$target" = all ]; then
  RUSTC_BOOTSTRAP=1 cargo fuzz build
else
  RUSTC_BOOTSTRAP=1 cargo fuzz build "$target"
fi
for t in "${targets[@]}"; do
  seed "$t"
  log=fuzz/logs/$t.log
  set +e
  # shellcheck disable=SC2046
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" \
    -timeout=10 -rss_limit_mb="$(rss "$t")" $(dict "$t") >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 || true)
  crash=$(grep -o 'Test unit written to [^ ]*' "$log" | tail -1 | cut -d' ' -f5 || true)
  echo "$t: ${runs:-stopped (exit $rc), see $log}${crash:+, CRASH: $crash}"
done
