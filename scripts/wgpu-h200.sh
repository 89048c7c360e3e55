#!/usr/bin/env bash
# wgpu backend on the H200 (device tool): adapter report, greedy parity wgpu vs
# cpu on a tiny random Llama, and `cyb-llm bench` on a Llama-3-8B-shaped Q4_0
# GGUF with seeded random weights generated there. Carry: .gl .devbin
# (.devbin = stripped release binary, vocab GGUF, gguf-py package).
set -x
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
B=.devbin/cyb-llm
M=/tmp/models; mkdir -p $M
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
$B backends
export PYTHONPATH=.devbin/py
python3 scripts/make_random_llama_gguf.py .devbin/vocab.gguf $M/tiny.gguf --shape tiny
$B import $M/tiny.gguf -o $M/tiny.model
for b in cpu wgpu; do $B run $M/tiny.model -p "The capital of France is" -n 16 --temp 0 --no-chat --backend $b --timings; done
time python3 scripts/make_random_llama_gguf.py .devbin/vocab.gguf $M/l8b.gguf --shape 8b
time $B import $M/l8b.gguf -o $M/l8b.model
rm -f $M/l8b.gguf
$B run $M/l8b.model -p "The capital of France is" -n 32 --temp 0 --no-chat --backend wgpu --timings
$B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 2
$B bench $M/l8b.model --backend cpu -p 0 -n 16 -r 1
