#!/usr/bin/env bash
# Real GGUFs for the H200 device machine (issue 23: SmolLM2-135M Q4_1 and
# Gemma-3-270M Q4_K_M, 351 MB together), carried over several back-to-back
# device calls while the machine stays warm (one call may carry 64 MiB, the tracked tree included):
#
#   here:            scripts/h200-stash.sh pack        (.devbin/stash1 .. stashN)
#   device 1..N:     carry [".devbin/stashK"]          command: scripts/h200-stash.sh put K
#   device, then:    scripts/wgpu-h200.sh report       (joins and checks them)
#
# When the device will not stay up for nine calls in a row, `report` falls back
# to clones of the two shapes (scripts/gguf_shape_clone.py, carry .devbin/heads).
#
# The parts are slices of one tar of the two files, with its SHA-256.
set -euo pipefail
cd "$(dirname "$0")/.."
M=/tmp/cyb
case "${1:-}" in
pack)
  smol=.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  gemma=.cache/models/gemma3/gemma-3-270m-q4_k_m.gguf
  rm -rf .devbin/stash[0-9]* /tmp/stash.part-*
  tar cf /tmp/stash.tar -C "$(dirname "$smol")" "$(basename "$smol")" -C "$PWD/$(dirname "$gemma")" "$(basename "$gemma")"
  split -b 42000000 -d /tmp/stash.tar /tmp/stash.part-
  n=0
  for f in /tmp/stash.part-*; do
    n=$((n + 1)); mkdir -p .devbin/stash$n; mv "$f" .devbin/stash$n/
  done
  (cd /tmp && sha256sum stash.tar) >.devbin/stash1/stash.tar.sha256
  echo "$n" >.devbin/stash1/parts
  rm /tmp/stash.tar
  du -sh .devbin/stash*
  ;;
put)
  mkdir -p $M/stash
  cp .devbin/stash"${2:?part number}"/* $M/stash/
  ls -la $M/stash
  ;;
*)
  echo "usage: scripts/h200-stash.sh pack|put K" >&2
  exit 2
  ;;
esac
