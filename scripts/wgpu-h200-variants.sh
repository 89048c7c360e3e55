#!/usr/bin/env bash
# Decode matvec variants on the H200 (device tool) without rebuilding: each
# folder of .wgvar/ holds replacement shaders that the binary reads through
# CYB_WGPU_SHADERS; every variant decodes the Llama-3-8B-shaped Q4_0 model
# (tg128, 2 repetitions) and runs a 32-token profile.
# Carry: .gl .wgbin .wgvar (see scripts/wgpu-h200.sh for .wgbin).
. scripts/h200-vulkan-env.sh
M=/tmp/cyb; mkdir -p $M
B=$PWD/.wgbin/cyb-llm
export PYTHONPATH=$PWD/.wgbin/py
python3 scripts/make_random_llama_gguf.py .wgbin/vocab.gguf $M/l8b.gguf --shape 8b
$B import $M/l8b.gguf -o $M/l8b.model >/dev/null && rm -f $M/l8b.gguf
for v in ${VARIANTS:-$(ls .wgvar)}; do
  echo "=== variant $v"
  CYB_WGPU_SHADERS=.wgvar/$v CYB_WGPU_PROFILE=1 $B run $M/l8b.model -p "Hi" -n 32 --temp 0 --no-chat --backend wgpu 2>&1 >/dev/null | grep -E 'matvec|host'
  CYB_WGPU_SHADERS=.wgvar/$v $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 2 | grep tg128
done
