#!/usr/bin/env bash
# Builds llama.cpp's llama-bench with the Vulkan backend (-DGGML_VULKAN=ON) from the same
# source as scripts/build-llamacpp.sh (the llama-cpp-python==0.3.36 sdist), as one small
# static binary to carry to the H200 device machine (scripts/wgpu-h200.sh runs it next to
# `cyb-llm bench`, issue 5). Portable: GGML_NATIVE=OFF with AVX2/FMA/F16C (the device CPU
# differs from this one), ggml/llama linked statically, libstdc++/libgcc linked statically,
# OpenMP off (ggml's own thread pool); it needs only glibc, libm and libvulkan.so.1 (the
# device gets the loader from the .deb packages carried in .gl, scripts/h200-vulkan-env.sh).
#
# Shader compiler and headers: Debian 12's glslc (shaderc 2023.2, glslang 11.13) supports none
# of GL_KHR_cooperative_matrix, GL_NV_cooperative_matrix2, GL_EXT_integer_dot_product, and its
# Vulkan headers (1.3.239) predate VK_KHR_cooperative_matrix, so a build with them runs
# llama.cpp without tensor cores (prefill) and without the integer-dot mat-vec (quantized
# decode): a handicapped baseline. So this script takes glslc 2025.2 (glslang 15.1) with the
# Vulkan 1.4.309 and SPIR-V headers from Debian 13 (trixie) packages, fetched with apt-get
# into .cache/vulkan-trixie (private package lists, nothing installed system-wide), and runs
# that glslc with trixie's own libc/libstdc++ through trixie's ld.so (glslc runs only here at
# build time; the built binary needs none of it).
# Needs: cmake (ninja-build optional), apt-get, the libvulkan1 package (the loader to link).
# Cached: a second run with the binary present does nothing. Not run by CI.
#
#   scripts/build-llamacpp-vulkan.sh   # -> .devbin/llama-bench-vulkan (stripped)
#                                      #    and .devbin/llvk/llama-bench-vulkan.xz (to carry)
#
# scripts/wgpu-h200.sh runs it when .devbin/llvk is carried (see its header).
set -euo pipefail
cd "$(dirname "$0")/.."
SRCROOT=${CYB_LLAMACPP_BUILD:-.cache/llama.cpp-build}
BUILD=$SRCROOT/vulkan
OUT=.devbin/llama-bench-vulkan
XZ=.devbin/llvk/llama-bench-vulkan.xz

pack() { # the carried form: xz-compressed (SPIR-V shaders compress well), unpacked on the device
  mkdir -p "$(dirname "$XZ")"
  [ -f "$XZ" ] || { xz -9e -T2 -c "$OUT" >"$XZ.part" && mv "$XZ.part" "$XZ"; }
  ls -l "$OUT" "$XZ" >&2
}
if [ -x "$OUT" ]; then pack; echo "build-llamacpp-vulkan: cached in $OUT" >&2; exit 0; fi
command -v cmake >/dev/null || { echo "build-llamacpp-vulkan: needs cmake (apt-get install -y cmake ninja-build)" >&2; exit 1; }
T=$PWD/.cache/vulkan-trixie
R=$T/root
L=$R/usr/lib/x86_64-linux-gnu
if [ ! -x "$T/glslc" ]; then
  mkdir -p "$T/lists/partial" "$T/debs"
  echo "deb http://deb.debian.org/debian trixie main" >"$T/sources.list"
  o=(-oDir::State::Lists="$T/lists" -oDir::Etc::SourceList="$T/sources.list" -oDir::Etc::SourceParts=/dev/null
    -oDir::State::status=/dev/null -oAPT::Architecture=amd64 -oAPT::Architectures=amd64)
  apt-get "${o[@]}" update >&2
  (cd "$T/debs" && apt-get "${o[@]}" download glslc libshaderc1 libc6 libstdc++6 libgcc-s1 libvulkan-dev spirv-headers >&2)
  rm -rf "$R"; mkdir -p "$R"
  for f in "$T"/debs/*.deb; do dpkg -x "$f" "$R"; done
  printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$L/ld-linux-x86-64.so.2" "$L" "$R/usr/bin/glslc" >"$T/glslc.part"
  chmod +x "$T/glslc.part"; mv "$T/glslc.part" "$T/glslc"
fi
"$T/glslc" --version | sed -n 1,3p >&2
loader=$(ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1 2>/dev/null) || {
  echo "build-llamacpp-vulkan: needs the Vulkan loader to link (apt-get install -y libvulkan1)" >&2
  exit 1
}
# The source (fetched, SHA-256 checked and unpacked) is the CPU build's: that script makes it.
[ -f "$SRCROOT/src/CMakeLists.txt" ] || scripts/build-llamacpp.sh
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$SRCROOT/src" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_VULKAN=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_OPENMP=OFF \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DVulkan_GLSLC_EXECUTABLE="$T/glslc" -DVulkan_INCLUDE_DIR="$R/usr/include" -DVulkan_LIBRARY="$loader" \
  -DSPIRV-Headers_DIR="$R/usr/share/cmake/SPIRV-Headers"
cmake --build "$BUILD" --target llama-bench -j "${JOBS:-2}"
mkdir -p .devbin
strip -o "$OUT.part" "$BUILD/bin/llama-bench"
mv "$OUT.part" "$OUT"
rm -f "$XZ"
pack
ldd "$OUT" >&2 || true
echo "build-llamacpp-vulkan: built $OUT" >&2
