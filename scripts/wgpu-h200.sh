#!/usr/bin/env bash
# wgpu backend on the H200 (device tool), in two back-to-back calls (the
# machine stays warm in between, so /tmp/cyb survives):
#
#   scripts/wgpu-h200.sh bench   carry .gl .wgbin .xfer1
#   scripts/wgpu-h200.sh smol    carry .xfer2
#
# (the first copies the binary to /tmp/cyb: the second call's 64 MiB go to
# the second half of SmolLM2).
# .wgbin = stripped release binary, ggml-vocab-llama-bpe.gguf (vocab.gguf),
# the gguf-py package (py/); .xfer1/.xfer2 = the two halves of SmolLM2-135M's
# Q4_1 GGUF, xz-compressed (scripts/wgpu-h200-split.sh makes them: the file
# is larger than one call may carry).
#
# bench: adapter report; greedy parity cpu vs wgpu on a tiny random Llama;
#   a Llama-3-8B-shaped Q4_0 GGUF with seeded random weights generated there:
#   per-kernel GPU profile (CYB_WGPU_PROFILE=1), `cyb-llm bench` pp512/tg128.
# decodequick: (carry .gl .wgbin .devbin/llvk) decodeab's first figures only.
# decodeab: (carry .gl .wgbin .devbin/llvk .devbin/heads) the 8B shape's decode:
#   the kernel tests, tg128 and tg128 at depth 512 against other builds'
#   (.wgbin/ab-NAME.gz) and shader variants' (shaders/variants/NAME/, never
#   committed), in turns, pp512, tg128 --sync-tokens, llama.cpp-Vulkan's pp512
#   and tg128 at depths 0 and 512, GPU time per kernel at depths 0 and 512,
#   `run` with short and 511-token prompts, the small models' benches next to
#   llama.cpp's.
# attnab: (carry .gl .wgbin .devbin/llvk) decode attention over long contexts:
#   the attention kernel tests, tg128 at depths 512 and 2048 against the
#   .wgbin/ab-NAME.gz builds in turns, llama.cpp-Vulkan's at the same depths,
#   the last ab build's GPU time per kernel at depth 512.
# coop: (carry .gl .wgbin [.devbin/llvk]) prefill on the matrix units (issue 23):
#   the kernel tests (.wgbin/wgpu_kernels) with the matrix units on and off,
#   the 8B shape's prefill profile, pp512 with them off, the full bench, the
#   greedy text with them on and off, then llama.cpp-Vulkan.
# smol: SmolLM2 joined, imported; greedy 16 tokens cpu vs wgpu (twice, for
#   the attention race); `cyb-llm bench` pp512/tg128 on wgpu and cpu.
# smol1: (carry .wgbin .xfer1) the binary and the first half of SmolLM2 to
#   /tmp/cyb, for a smol call right after (instead of the whole bench phase).
# l8b: (carry .gl .wgbin .devbin/llvk) the bench phase's 8B part alone, for
#   kernel work: tiny parity, host times (CYB_WGPU_PROFILE=host) and the
#   per-kernel profile, tg128 of the default kernels, of each shader variant
#   folder under shaders/variants/ (CYB_WGPU_SHADERS, untracked work in
#   progress) and with naga's loop and division guards (CYB_WGPU_CHECKED=1),
#   then llama.cpp-Vulkan on the same GGUF.
#
# llama.cpp's Vulkan backend on the same GGUFs, in the same calls (issue 5):
# scripts/build-llamacpp-vulkan.sh makes .devbin/llvk/llama-bench-vulkan.xz;
# add ".devbin/llvk" to the bench call's carry (the binary is unpacked to
# /tmp/cyb and kept there for the smol call). Each phase then runs
# `llama-bench -p 512 -n 128 -ngl 99 -r 3` on its GGUF after `cyb-llm bench`;
# without the binary it says so and the rest runs as before. The bench call
# is near the 64 MiB carry limit: `gzip -9 .wgbin/cyb-llm` makes room (the
# .gz, used when .wgbin/cyb-llm is absent, is unpacked here).
phase=${1:?bench or smol}
. scripts/h200-vulkan-env.sh
M=/tmp/cyb; mkdir -p $M
B=$M/cyb-llm
# The small models small_models puts in $M (GGUF and .model names).
SMALL="SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m"
say() { echo "=== $*"; }
greedy() { # model backend
  $B run "$1" -p "The capital of France is" -n 16 --temp 0 --no-chat --backend "$2" --json \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])'
}
for z in .wgbin/vocab.gguf.gz .wgbin/wgpu_kernels.gz; do # carried compressed (the 64 MiB carry limit)
  [ -f "$z" ] && gunzip -c "$z" >"${z%.gz}" && chmod +x "${z%.gz}"
done
LLVK=$M/llama-bench-vulkan
if [ -f .devbin/llvk/llama-bench-vulkan.xz ]; then
  python3 -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .devbin/llvk/llama-bench-vulkan.xz $LLVK
  chmod +x $LLVK
fi
llvk() { # gguf label: llama.cpp's Vulkan backend on the same GGUF
  if [ -x $LLVK ]; then
    say "$2 llama.cpp-Vulkan bench (llama-bench from scripts/build-llamacpp-vulkan.sh)"
    $LLVK -m "$1" -p 512 -n 128 -ngl 99 -r 3
  else
    say "$2 llama.cpp-Vulkan bench skipped: .devbin/llvk/llama-bench-vulkan.xz not carried"
  fi
}
parity() { # model label: wgpu (twice) against the reference backend (the arbiter)
  local c r w w2
  c=$(greedy "$1" cpu); r=$(greedy "$1" reference); w=$(greedy "$1" wgpu); w2=$(greedy "$1" wgpu)
  say "$2 cpu      : $c"; say "$2 reference: $r"; say "$2 wgpu     : $w"; say "$2 wgpu again: $w2"
  [ "$r" = "$w" ] && [ "$w" = "$w2" ] && say "$2 PARITY wgpu = reference OK" || say "$2 PARITY FAIL"
}
install_bin() { # the carried binary to $B
  if [ -f .wgbin/cyb-llm ]; then cp .wgbin/cyb-llm $B; else gunzip -c .wgbin/cyb-llm.gz >$B; fi
  chmod +x $B
}
models_8b() { # adapter report, tiny parity, the 8B-shaped GGUF and its .model in $M
  nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm,clocks.mem --format=csv
  $B backends
  export PYTHONPATH=$PWD/.wgbin/py
  python3 scripts/make_random_llama_gguf.py .wgbin/vocab.gguf $M/tiny.gguf --shape tiny
  $B import $M/tiny.gguf -o $M/tiny.model >/dev/null
  CYB_WGPU_ACTIVATIONS=f32 parity $M/tiny.model "tiny (f32 activations)"
  time python3 scripts/make_random_llama_gguf.py .wgbin/vocab.gguf $M/l8b.gguf --shape 8b
  time $B import $M/l8b.gguf -o $M/l8b.model >/dev/null
}
prompt512() { # $M/p512.txt: a prompt of 511 tokens in the llama-bpe vocabulary (BOS included)
  python3 -c "print(('The quick brown fox jumps over the lazy dog while the river runs to the sea. ' * 30).strip())" > $M/p512.txt
}
run_prompts() { # `run` on the 8B shape twice with a short and the 512-token prompt (--timings)
  prompt512
  for i in 1 2; do
    say "8b run, short prompt ($i)"
    $B run $M/l8b.model -p "Hello" -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null
    say "8b run, 512-token prompt ($i)"
    $B run $M/l8b.model -f $M/p512.txt -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  done
}
variant() { # label dir: tg128 of the 8B model with the shaders in dir
  say "8b tg128, $1"
  CYB_WGPU_SHADERS=$2 $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3
}
kernel_tests() { # the carried kernel-test binary (.wgbin/wgpu_kernels) on this GPU, when present
  if [ -x .wgbin/wgpu_kernels ]; then
    say "kernel tests on this GPU"
    .wgbin/wgpu_kernels 2>&1 | grep -E "test result|FAILED|panicked|relative error|differ" || true
  fi
}
bench_8b() { # the binary, the 8B shape, the kernel tests, then its bench next to llama.cpp-Vulkan
  install_bin
  models_8b
  kernel_tests
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  llvk $M/l8b.gguf 8b
}
profile_8b() { # the 8B shape's decode time per kernel
  say "8b tg32 GPU time per kernel (CYB_WGPU_PROFILE=1)"
  CYB_WGPU_PROFILE=1 $B bench $M/l8b.model --backend wgpu -p 0 -n 32 -r 1
}
small_models() { # SmolLM2 and Gemma-3-270M GGUFs in $M, each imported beside it (.model): the
  # real files stashed by earlier calls (scripts/h200-stash.sh), else clones of their shapes
  # (scripts/gguf_shape_clone.py: the real headers carried in .devbin/heads, seeded random
  # weights of the same dtypes)
  if [ -f $M/stash/parts ]; then
    say "SmolLM2 and Gemma: the real GGUFs (stashed)"
    (cd $M && cat stash/stash.part-* >stash.tar && sha256sum -c stash/stash.tar.sha256 && tar xf stash.tar && rm stash.tar)
  elif [ -d .devbin/heads ]; then
    say "SmolLM2 and Gemma: SHAPE CLONES (real headers, tokenizers, names, shapes and dtypes; seeded random weights)"
    for h in .devbin/heads/*.head.gz; do
      python3 scripts/gguf_shape_clone.py fill "$h" $M/"$(basename "$h" .head.gz)".gguf
    done
  else
    say "SmolLM2 and Gemma skipped: nothing stashed (scripts/h200-stash.sh) and no .devbin/heads"
  fi
  for g in $SMALL; do
    [ -f $M/$g.gguf ] && $B import $M/$g.gguf -o $M/$g.model >/dev/null
  done
  return 0
}
small_benches() { # the small models (small_models), each's bench next to llama.cpp-Vulkan's
  small_models
  for g in $SMALL; do
    [ -f $M/$g.model ] || continue
    say "$g bench"
    $B bench $M/$g.model --backend wgpu -p 512 -n 128 -r 3 | tail -2
    llvk $M/$g.gguf $g
  done
}
variant_prefills() { # per shaders/variants/ folder: its product and attention kernel tests, then the 8B's pp512
  for v in shaders/variants/*/; do
    [ -d "$v" ] || continue
    say "shader variant $(basename $v): kernel tests, 8b pp512"
    CYB_WGPU_SHADERS=$v .wgbin/wgpu_kernels --test-threads 1 matmul fused attention 2>&1 | grep -E "test result|FAILED|panicked"
    CYB_WGPU_SHADERS=$v $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 3 | tail -1
  done
}
variants() { # tg128 of the 8B model with each shaders/variants/ folder
  for v in shaders/variants/*/; do
    [ -d "$v" ] && variant "shader variant $(basename $v)" $v
  done
}
case $phase in
decodequick)
  # issue 23: the 8B's tg128 and tg128 at depth 512 next to llama.cpp-Vulkan's tg128, `run`
  # on a short prompt, then the first earlier build's tg128 (.wgbin/ab-NAME.gz): decodeab
  # for a call of about 90 s.
  # carry .gl .wgbin .devbin/llvk
  install_bin
  models_8b
  say "8b tg128 and tg128 at depth 512, this build"
  $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 | tail -1
  $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -d 512 -r 3 | tail -1
  [ -x $LLVK ] && $LLVK -m $M/l8b.gguf -p 0 -n 128 -ngl 99 -r 3 | grep tg128
  say "8b run, short prompt"
  $B run $M/l8b.model -p "Hello" -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  for a in .wgbin/ab-*.gz; do
    gunzip -c "$a" >$M/ab && chmod +x $M/ab
    say "8b tg128, the build $(basename $a .gz)"
    $M/ab bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 | tail -1
    break
  done
  ;;
decodeab)
  # issue 23: the 8B shape's decode against earlier builds, and after a 512-token prompt.
  # carry .gl .wgbin .devbin/llvk .devbin/heads
  install_bin
  models_8b
  kernel_tests
  for i in 1 2; do # A/B against other builds carried as .wgbin/ab-NAME.gz, in turns, at depths 0 and 512
    say "8b tg128 and at depth 512, this build ($i)"
    $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 | tail -1
    $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -d 512 -r 3 | tail -1
    for a in .wgbin/ab-*.gz; do
      [ -f "$a" ] || continue
      gunzip -c "$a" >$M/ab && chmod +x $M/ab
      say "8b tg128 and at depth 512, the build $(basename $a .gz) ($i)"
      $M/ab bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 | tail -1
      $M/ab bench $M/l8b.model --backend wgpu -p 0 -n 128 -d 512 -r 3 | tail -1
    done
    for v in shaders/variants/*/; do # shader variants (CYB_WGPU_SHADERS), never committed
      [ -d "$v" ] || continue
      say "8b tg128 and at depth 512, shader variant $(basename $v) ($i)"
      CYB_WGPU_SHADERS=$v $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 | tail -1
      CYB_WGPU_SHADERS=$v $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -d 512 -r 3 | tail -1
    done
  done
  for v in shaders/variants/*/; do
    [ -d "$v" ] || continue
    say "shader variant $(basename $v): kernel tests"
    CYB_WGPU_SHADERS=$v .wgbin/wgpu_kernels 2>&1 | grep -E "test result|FAILED|panicked|relative error" || true
  done
  say "8b pp512, tg128 --sync-tokens"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 3 | tail -1
  $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 --sync-tokens | tail -1
  if [ -x $LLVK ]; then
    say "8b llama.cpp-Vulkan pp512 and tg128 at depths 0 and 512"
    $LLVK -m $M/l8b.gguf -p 512 -n 128 -d 0,512 -ngl 99 -r 3
  fi
  profile_8b
  say "8b tg32 at depth 512, GPU time per kernel (CYB_WGPU_PROFILE=1)"
  CYB_WGPU_PROFILE=1 $B bench $M/l8b.model --backend wgpu -p 0 -n 32 -d 512 -r 1
  if [ -x $M/ab ]; then
    say "8b tg32 at depth 512, GPU time per kernel, the last ab build"
    CYB_WGPU_PROFILE=1 $M/ab bench $M/l8b.model --backend wgpu -p 0 -n 32 -d 512 -r 1
  fi
  run_prompts
  small_benches
  ;;
attnab)
  # issue 23: decode attention over long contexts, this build against the
  # .wgbin/ab-NAME.gz builds in turns at depths 512 and 2048, llama.cpp's at
  # the same depths, GPU time per kernel of the last ab build at depth 512.
  # carry .gl .wgbin .devbin/llvk
  install_bin
  models_8b
  if [ -x .wgbin/wgpu_kernels ]; then
    say "attention kernel tests on this GPU"
    .wgbin/wgpu_kernels attention 2>&1 | grep -E "test result|FAILED|panicked|relative error" || true
  fi
  for i in 1 2; do
    for a in "" .wgbin/ab-*.gz; do
      X=$B
      if [ -n "$a" ]; then gunzip -c "$a" >$M/ab && chmod +x $M/ab && X=$M/ab; fi
      say "8b tg128 at depths 512 and 2048, the build ${a:-this one} ($i)"
      for depth in 512 2048; do
        $X bench $M/l8b.model --backend wgpu -p 0 -n 128 -d $depth -r 3 | tail -1
      done
    done
  done
  if [ -x $LLVK ]; then
    say "8b llama.cpp-Vulkan tg128 at depths 512 and 2048"
    $LLVK -m $M/l8b.gguf -p 0 -n 128 -d 512,2048 -ngl 99 -r 3
  fi
  say "8b tg32 at depth 512, GPU time per kernel, the last ab build"
  CYB_WGPU_PROFILE=1 $M/ab bench $M/l8b.model --backend wgpu -p 0 -n 32 -d 512 -r 1 | grep -E "attention|us/call"
  ;;
coop)
  # issue 23: prefill on the matrix units. carry .gl .wgbin (.wgbin/wgpu_kernels:
  # the stripped kernel-test binary, `cargo test --release --test wgpu_kernels --no-run`).
  install_bin
  $B backends
  if [ -x .wgbin/wgpu_kernels ]; then
    say "kernel tests against the reference (f16-operand reference where the matrix units run)"
    .wgbin/wgpu_kernels --test-threads 1 2>&1 | tail -25
    say "kernel tests, matrix units off (CYB_WGPU_COOP=0)"
    CYB_WGPU_COOP=0 .wgbin/wgpu_kernels --test-threads 1 2>&1 | tail -4
  fi
  models_8b
  say "8b prefill profile (CYB_WGPU_PROFILE=1 bench -p 512 -n 0 -r 1)"
  CYB_WGPU_PROFILE=1 $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 1
  say "8b pp512, matrix units off (CYB_WGPU_COOP=0)"
  CYB_WGPU_COOP=0 $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 2
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  say "8b greedy, matrix units on and off"
  greedy $M/l8b.model wgpu
  CYB_WGPU_COOP=0 greedy $M/l8b.model wgpu
  llvk $M/l8b.gguf 8b
  ;;
tune)
  # issue 23: matrix-unit kernel variants (shaders/variants/*/mm_coop.wgsl:
  # kernel tests, then pp512), dispatches per submit for decode
  # (CYB_WGPU_BATCH), `run` against `bench` with a 512-token prompt, then
  # llama.cpp-Vulkan. carry .gl .wgbin [.devbin/llvk]
  install_bin
  models_8b
  for v in shaders/variants/*/; do
    [ -f "$v/mm_coop.wgsl" ] || continue
    say "variant $(basename $v): kernel tests"
    CYB_WGPU_SHADERS=$v .wgbin/wgpu_kernels --test-threads 1 matmul fused 2>&1 | grep -E "test result|FAILED|panicked"
    say "variant $(basename $v): 8b pp512"
    CYB_WGPU_SHADERS=$v $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 2
  done
  say "8b pp512, shipped kernel"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 2
  for n in 4096 32 64 128; do
    say "8b tg128, CYB_WGPU_BATCH=$n"
    CYB_WGPU_BATCH=$n $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 2
  done
  prompt512
  for n in 4096 64; do
    say "8b run, 512-token prompt, CYB_WGPU_BATCH=$n"
    CYB_WGPU_BATCH=$n $B run $M/l8b.model -f $M/p512.txt -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  done
  llvk $M/l8b.gguf 8b
  ;;
runbench)
  # issue 23 item 3: `run` against `bench` (short and 512-token prompts; host
  # times, dispatch records), then llama.cpp-Vulkan. carry .gl .wgbin [.devbin/llvk]
  install_bin
  models_8b
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  say "8b bench tg128 host times (CYB_WGPU_PROFILE=host)"
  CYB_WGPU_PROFILE=host $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 1
  say "8b bench tg32 GPU time per kernel (CYB_WGPU_PROFILE=1)"
  CYB_WGPU_PROFILE=1 $B bench $M/l8b.model --backend wgpu -p 0 -n 32 -r 1
  say "8b run, short prompt, host times and dispatch records"
  CYB_WGPU_PROFILE=host $B run $M/l8b.model -p "Hello" -n 128 --temp 0 --no-chat --backend wgpu --timings --dispatch >/dev/null
  run_prompts
  llvk $M/l8b.gguf 8b
  ;;
decode)
  # issue 23 decode: the kernel tests on this GPU (.wgbin/wgpu_kernels), the
  # bench, `run` with short and 512-token prompts (attention over the context
  # split in chunks), then tg128 of each shaders/variants/ folder.
  # carry .gl .wgbin [.devbin/llvk]
  install_bin
  models_8b
  kernel_tests
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  run_prompts
  for be in wgpu reference; do
    say "tiny greedy text after the 512-token prompt, $be"
    $B run $M/tiny.model -f $M/p512.txt -n 24 --temp 0 --no-chat --backend $be --json \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])'
  done
  variants
  llvk $M/l8b.gguf 8b
  ;;
report)
  # issue 23 acceptance, everything in one call: the kernel tests on this GPU
  # (.wgbin/wgpu_kernels), the 8B shape, SmolLM2 and
  # Gemma-3-270M (real GGUFs stashed by earlier calls of scripts/h200-stash.sh
  # while the machine stayed warm), each `cyb-llm bench` next to llama.cpp-Vulkan
  # on the same GGUF; `run` with short and 512-token prompts (decode against
  # bench, time to first token); greedy text of wgpu (f32 activations and the
  # default 8-bit ones) against the reference; then the 8B's tg128 on f32
  # activations, its decode profile and tg128 of each shaders/variants/ folder.
  # carry .gl .wgbin .devbin/llvk .devbin/heads
  bench_8b
  run_prompts
  small_models
  for g in $SMALL; do
    [ -f $M/$g.model ] || continue
    CYB_WGPU_ACTIVATIONS=f32 parity $M/$g.model "$g (f32 activations)"
    say "$g greedy, 8-bit activations: $(greedy $M/$g.model wgpu)"
    say "$g bench"
    $B bench $M/$g.model --backend wgpu -p 512 -n 128 -r 3
    llvk $M/$g.gguf $g
  done
  say "8b tg128, f32 activations"
  CYB_WGPU_ACTIVATIONS=f32 $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3
  profile_8b
  variants
  ;;
coopvariants)
  # issue 23 prefill: pp512 of the 8B shape with the built-in matrix-unit
  # kernel and with each shaders/variants/ folder (kernel tests and `run` with
  # the 511-token prompt too), then llama.cpp-Vulkan's pp512.
  # carry .gl .wgbin .devbin/llvk
  install_bin
  models_8b
  prompt512
  say "8b pp512, built-in kernels"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 5 | tail -1
  for v in shaders/variants/*/; do
    [ -d "$v" ] || continue
    say "shader variant $(basename $v): kernel tests, pp512, run -f p512.txt"
    CYB_WGPU_SHADERS=$v kernel_tests
    CYB_WGPU_SHADERS=$v $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 5 | tail -1
    for i in 1 2; do
      CYB_WGPU_SHADERS=$v $B run $M/l8b.model -f $M/p512.txt -n 16 --temp 0 --no-chat --backend wgpu --timings >/dev/null
    done
  done
  say "8b run -f p512.txt, built-in kernels"
  for i in 1 2; do
    $B run $M/l8b.model -f $M/p512.txt -n 16 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  done
  [ -x $LLVK ] && $LLVK -m $M/l8b.gguf -p 512 -n 0 -ngl 99 -r 5 | grep pp512
  ;;
fill)
  # issue 23 prefill tile fills: the kernel tests, the 8B shape's prefill
  # profile and pp512 with the built-in kernels and each shaders/variants/
  # folder, then llama.cpp-Vulkan's pp512. carry .gl .wgbin .devbin/llvk
  # FILL_QUICK=1: variants only (no built-in kernel tests, no profile).
  install_bin
  if [ -x .wgbin/wgpu_kernels ] && [ -z "$FILL_QUICK" ]; then
    say "kernel tests against the reference (f16-operand reference where the matrix units run)"
    .wgbin/wgpu_kernels --test-threads 1 2>&1 | grep -E "test result|FAILED|panicked|relative error|differ|max " | head -30
  fi
  models_8b
  if [ -z "$FILL_QUICK" ]; then
    say "8b prefill profile (CYB_WGPU_PROFILE=1 bench -p 512 -n 0 -r 1)"
    CYB_WGPU_PROFILE=1 $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 1 2>&1 | head -30
  fi
  say "8b pp512, built-in kernels"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 0 -r 3 | tail -1
  variant_prefills
  say "8b greedy"
  greedy $M/l8b.model wgpu
  [ -x $LLVK ] && $LLVK -m $M/l8b.gguf -p 512 -n 0 -ngl 99 -r 3 | grep pp512
  ;;
accept)
  # issue 23 acceptance figures in the least device time, most important first
  # (the 8B bench and llama.cpp's, `run` with both prompts, then the small
  # models); no kernel tests. carry .gl .wgbin .devbin/llvk .devbin/heads
  install_bin
  models_8b
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  llvk $M/l8b.gguf 8b
  run_prompts
  small_benches
  ;;
pipeline)
  # issue 23 decode overlap: the 8B bench (tg as `run` decodes: greedy picks
  # on the device, the next forward queued before the pick is read back) with
  # llama.cpp-Vulkan, tg128 with --sync-tokens (random ids, every token waited
  # for, as llama-bench), host times; `run` against bench; the small models'
  # tg128 both ways and `run`, next to llama.cpp's tg128.
  # carry .gl .wgbin .devbin/llvk .devbin/heads
  bench_8b
  variant_prefills
  say "8b tg128 --sync-tokens (as llama-bench: random ids, each token waited for)"
  $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3 --sync-tokens | tail -1
  say "8b tg128 host times"
  CYB_WGPU_PROFILE=host $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 1 2>&1 | grep -v "^| -"
  run_prompts
  small_benches
  for g in $SMALL; do
    [ -f $M/$g.model ] || continue
    say "$g tg128 --sync-tokens"
    $B bench $M/$g.model --backend wgpu -p 0 -n 128 -r 3 --sync-tokens | tail -1
    say "$g run -n 128 (twice)"
    for i in 1 2; do $B run $M/$g.model -p "The capital of France is" -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null; done
  done
  ;;
hostgpu)
  # issue 23 decode: where a step's time goes. Host times per batch
  # (CYB_WGPU_PROFILE=host) at the default batch and with one submit per step
  # (CYB_WGPU_BATCH=4096: host and GPU in series, so the GPU's share is the
  # step less the host's), tg128 at other batch sizes, the same for the small
  # models; llama.cpp-Vulkan's per-op GPU times (GGML_VK_PERF_LOGGER) to $OUT.
  # carry .gl .wgbin .devbin/llvk .devbin/heads
  install_bin
  models_8b
  small_models
  for m in l8b SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
    for n in 32 4096; do
      say "$m tg128 host times, CYB_WGPU_BATCH=$n"
      CYB_WGPU_PROFILE=host CYB_WGPU_BATCH=$n $B bench $M/$m.model --backend wgpu -p 0 -n 128 -r 1 2>&1 | grep -v "^| -"
    done
  done
  for n in 16 64; do
    say "8b tg128, CYB_WGPU_BATCH=$n"
    CYB_WGPU_BATCH=$n $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 2 | tail -1
  done
  if [ -x $LLVK ]; then
    for m in l8b SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
      g=$M/$m.gguf; [ $m = l8b ] && g=$M/l8b.gguf
      say "$m llama.cpp-Vulkan tg128"
      $LLVK -m $g -p 0 -n 128 -ngl 99 -r 2 | grep tg128
      GGML_VK_PERF_LOGGER=1 GGML_VK_PERF_LOGGER_FREQUENCY=8 $LLVK -m $g -p 0 -n 16 -ngl 99 -r 1 >${OUT:-/tmp}/perf-$m.log 2>&1
      tail -40 ${OUT:-/tmp}/perf-$m.log
    done
  fi
  ;;
quick)
  # report's 8B part alone (kernel tests, bench next to llama.cpp-Vulkan, decode
  # profile), for a kernel change when little device time is left.
  # carry .gl .wgbin .devbin/llvk
  bench_8b
  profile_8b
  ;;
smol1)
  install_bin
  cp .xfer1/* $M/
  ls -la $M
  ;;
l8b)
  install_bin
  models_8b
  say "8b host times (bench tg128, CYB_WGPU_PROFILE=host)"
  CYB_WGPU_PROFILE=host $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3
  say "8b profile (run -n 64, then -n 1, CYB_WGPU_PROFILE=1)"
  CYB_WGPU_PROFILE=1 $B run $M/l8b.model -p "The capital of France is" -n 64 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  CYB_WGPU_PROFILE=1 $B run $M/l8b.model -p "The capital of France is" -n 1 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  variants
  say "8b tg128, naga's loop and division guards on (CYB_WGPU_CHECKED=1)"
  CYB_WGPU_CHECKED=1 $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3
  llvk $M/l8b.gguf 8b
  ;;
bench)
  cp .xfer1/* $M/
  install_bin
  models_8b
  say "8b profile (run -n 64, CYB_WGPU_PROFILE=1)"
  CYB_WGPU_PROFILE=1 $B run $M/l8b.model -p "The capital of France is" -n 64 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  CYB_WGPU_PROFILE=1 $B run $M/l8b.model -p "The capital of France is" -n 1 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  say "8b run"
  $B run $M/l8b.model -p "The capital of France is" -n 128 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  say "8b bench"
  $B bench $M/l8b.model --backend wgpu -p 512 -n 128 -r 3
  llvk $M/l8b.gguf 8b
  rm -f $M/l8b.gguf
  ;;
smol)
  [ -s $M/smol.gguf ] || cat $M/smol.xz.a .xfer2/smol.xz.b | python3 -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' > $M/smol.gguf
  sha256sum $M/smol.gguf
  $B import $M/smol.gguf -o $M/smol.model >/dev/null
  parity $M/smol.model smollm2
  say "smollm2 profile"
  CYB_WGPU_PROFILE=1 $B run $M/smol.model -p "The capital of France is" -n 64 --temp 0 --no-chat --backend wgpu --timings >/dev/null
  say "smollm2 bench"
  $B bench $M/smol.model --backend wgpu,cpu -p 512 -n 128 -r 3
  llvk $M/smol.gguf smollm2
  say "8b bench again"
  [ -f $M/l8b.model ] && $B bench $M/l8b.model --backend wgpu -p 0 -n 128 -r 3
  ;;
esac
