#!/usr/bin/env bash
# The cpu kernels' unit tests built for aarch64 and run under qemu user-mode emulation, so the
# NEON kernels are checked against the reference (and the portable path) on an x86-64 machine:
# once on an emulated CPU with `sdot` (FEAT_DotProd, qemu's "max") and once on one without
# (Cortex-A72), each time asserting what the kernels detected. Installs the cross toolchain and
# qemu if missing (apt, as root or through sudo -n) and the rustup target. Only the library's
# kernel tests, in release mode, to keep the build short. On an aarch64 machine the main test
# run already runs these kernels natively; this script then only says so.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -m)" = aarch64 ]; then
  echo "test-aarch64: native aarch64; scripts/test.sh's cargo test runs the NEON kernels"
  exit 0
fi
target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
need=()
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
# tokenizers builds C++ (esaxx) for the target.
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
[ -e "$sysroot/lib/libc.so" ] || need+=(libc6-dev-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
  as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo -n"
  echo "test-aarch64: installing ${need[*]}"
  $as_root apt-get update -qq
  $as_root apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# Built once; the test binary then runs on both emulated CPUs.
bin=$(cargo test --release --target "$target" --lib --no-run --message-format=json-render-diagnostics |
  grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
[ -n "$bin" ] || { echo "test-aarch64: no test binary built" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for cpu in max:1 cortex-a72:0; do
  echo "test-aarch64: QEMU_CPU=${cpu%:*} (sdot expected: ${cpu#*:})"
  QEMU_CPU=${cpu%:*} CYB_LLM_EXPECT_DOTPROD=${cpu#*:} \
    qemu-aarch64 -L "$sysroot" "$bin" backend::cpu::kernels::tests:: backend::cpu::kernels::gemm:: |
    tee "$log"
  # The filters name modules: a rename would leave them matching nothing, and libtest
  # passes a run of 0 tests. Its summary line is "test result: ok. N passed; ...".
  passed=$(sed -n 's/^test result: ok\. \([0-9][0-9]*\) passed;.*/\1/p' "$log" | tail -n 1)
  if [ "${passed:-0}" -eq 0 ]; then
    echo "test-aarch64: QEMU_CPU=${cpu%:*} ran no tests (filters match nothing?)" >&2
    exit 1
  fi
  echo "test-aarch64: QEMU_CPU=${cpu%:*}: $passed tests passed"
done
