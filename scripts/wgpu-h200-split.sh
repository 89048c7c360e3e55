#!/usr/bin/env bash
# Prepares the carried folders of scripts/wgpu-h200.sh: .wgbin (stripped
# release binary, llama-bpe vocab GGUF, gguf-py) and .xfer1/.xfer2 (SmolLM2's
# GGUF xz-compressed, split in two: 64 MiB travel per device call).
# usage: scripts/wgpu-h200-split.sh SMOLLM2.gguf VOCAB.gguf GGUF_PY_DIR
set -euo pipefail
smol=${1:?SmolLM2 GGUF}; vocab=${2:?vocab GGUF}; py=${3:?gguf-py package dir}
for d in .wgbin .xfer1 .xfer2; do grep -qx "/$d/" .git/info/exclude || echo "/$d/" >> .git/info/exclude; done
rm -rf .wgbin .xfer1 .xfer2; mkdir -p .wgbin/py .xfer1 .xfer2
strip -o .wgbin/cyb-llm target/release/cyb-llm
cp "$vocab" .wgbin/vocab.gguf
cp -r "$py" .wgbin/py/
xz -9e -T2 -c "$smol" > /tmp/smol.xz
head -c 32000000 /tmp/smol.xz > .xfer1/smol.xz.a
tail -c +32000001 /tmp/smol.xz > .xfer2/smol.xz.b
sha256sum "$smol"
du -sh .wgbin .xfer1 .xfer2
