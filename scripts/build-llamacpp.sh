#!/usr/bin/env bash
# Builds llama.cpp (CPU only, -DGGML_NATIVE=ON) from the source that the PyPI sdist
# llama-cpp-python==0.3.36 vendors, for the reference continuations of
# scripts/make_llm_fixtures.py and scripts/make_perplexity_fixtures.py, and for the benchmarks.
# Cached: a second run with the binaries present does nothing. Not run by CI.
#
#   scripts/build-llamacpp.sh          # -> .cache/llama.cpp-build/cmake/bin/{llama-completion,llama-bench,llama-simple,llama-perplexity,llama-server,llamacpp-greedy,llamacpp-chat}
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${CYB_DOWNLOAD_DIR:-.cache/dl}
BUILD=${CYB_LLAMACPP_BUILD:-.cache/llama.cpp-build}
SDIST=$DL/llama_cpp_python-0.3.36.tar.gz
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
TARGETS=(llama-completion llama-bench llama-simple llama-perplexity llama-server)
BIN=$BUILD/cmake/bin

done_already=1
for t in "${TARGETS[@]}" llamacpp-greedy llamacpp-chat; do [ -x "$BIN/$t" ] || done_already=0; done
if [ $done_already = 1 ]; then echo "build-llamacpp: cached in $BIN" >&2; exit 0; fi

source scripts/bench-lib.sh
ensure_cmake build-llamacpp
if [ ! -f "$SDIST" ]; then
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python -d "$DL" llama-cpp-python==0.3.36
fi
echo "$SHA  $SDIST" | sha256sum -c --quiet - || { echo "build-llamacpp: SHA-256 mismatch for $SDIST" >&2; exit 1; }

mkdir -p "$BUILD"
if [ ! -f "$BUILD/src/CMakeLists.txt" ]; then
  rm -rf "$BUILD/src.part"; mkdir -p "$BUILD/src.part"
  tar -xzf "$SDIST" -C "$BUILD/src.part" --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
  rm -rf "$BUILD/src"; mv "$BUILD/src.part" "$BUILD/src"
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# AMX off: on the Sapphire Rapids VMs these scripts run on, llama.cpp's AMX weight buffers
# (compiled in by -march=native) crash llama-bench at the first product (exit 139; with
# `--repack 0` it runs); without them ggml keeps its AVX-512 / VNNI kernels and CPU repack.
noamx=()
[ "$(uname -m)" = x86_64 ] && noamx=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
cmake -S "$BUILD/src" -B "$BUILD/cmake" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF "${noamx[@]}"
cmake --build "$BUILD/cmake" --target "${TARGETS[@]}" -j "${JOBS:-$(nproc)}"
for t in "${TARGETS[@]}"; do [ -x "$BIN/$t" ] || { echo "build-llamacpp: $t missing" >&2; exit 1; }; done
# The greedy-ids reference tool, linked against the same static libraries.
C="$BUILD/cmake"
${CXX:-g++} -O2 -std=c++17 -march=native -I "$BUILD/src/include" -I "$BUILD/src/ggml/include" \
  scripts/llamacpp_greedy.cpp "$C/src/libllama.a" "$C/ggml/src/libggml.a" "$C/ggml/src/libggml-cpu.a" \
  "$C/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -o "$BIN/llamacpp-greedy"
# llama.cpp's built-in chat templates, the reference for our chat presets.
${CXX:-g++} -O2 -std=c++17 -I "$BUILD/src/include" -I "$BUILD/src/ggml/include" \
  scripts/llamacpp_chat.cpp "$C/src/libllama.a" "$C/ggml/src/libggml.a" "$C/ggml/src/libggml-cpu.a" \
  "$C/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -o "$BIN/llamacpp-chat"
echo "build-llamacpp: built $BIN" >&2
