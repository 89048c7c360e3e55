#!/usr/bin/env python3
"""Writes a benchmark GGUF: a real model's shape and quantization mix with seeded random
weights (kernel speed depends on shapes and encodings, not on the values), and the real
tokenizer of a vocab GGUF (llama.cpp's models/ggml-vocab-*.gguf).

  qwen2-0.5b  Qwen2-0.5B as llama.cpp quantizes it to Q4_K_M: 24 layers, hidden 896, 14 query
              heads of 64, 2 KV heads, FFN 4864, QKV biases, untied output. Rows of 896 values
              take the 32-value fallbacks of the k-quants: Q5_0 (attention, FFN gate/up),
              Q8_0 (attn_v of the "more bits" layers, embeddings, output); ffn_down Q6_K on
              the "more bits" layers, else Q4_K.            vocab: ggml-vocab-qwen2.gguf
  llama-1b    Llama-3.2-1B's shape at Q4_K_M: 16 layers, hidden 2048, 32 query heads of 64,
              8 KV heads, FFN 8192, tied embeddings (Q6_K); Q4_K everywhere else but attn_v
              and ffn_down of the "more bits" layers (Q6_K).  vocab: ggml-vocab-llama-bpe.gguf

Standard library only, deterministic for a given seed. Payload bytes are random; the f16
block scales are `±base * 2^u` (u uniform in [-1, 1]) with `base` sized so that weights have
about the spread of make_qwen2_gguf.py's.

usage: make_bench_gguf.py qwen2-0.5b|llama-1b VOCAB.gguf OUT.gguf [--seed N]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_qwen2_gguf import (  # noqa: E402
    BOOL, F32, STR, U32, f32s, gstr, kv, read_kvs, scale_tables, token_texts, write_gguf,
)

# GGUF type: (values per block, bytes per block, f16 scale offsets, element std at scale 1).
T_F32, T_Q5_0, T_Q8_0, T_Q4_K, T_Q6_K = 0, 6, 8, 12, 14
BLOCK = {
    T_Q5_0: (32, 22, (0,), 9.2),
    T_Q8_0: (32, 34, (0,), 74.0),
    T_Q4_K: (256, 144, (0, 2), 150.0),
    T_Q6_K: (256, 210, (208,), 1370.0),
}
# llama.cpp's file type numbers: 15 = MOSTLY_Q4_K_M.
FILE_TYPE_Q4_K_M = 15

SHAPES = {
    "qwen2-0.5b": dict(arch="qwen2", layers=24, dim=896, heads=14, kv=2, ff=4864, rope=1.0e6,
                       eps=1.0e-6, bias=True, tied=False),
    "llama-1b": dict(arch="llama", layers=16, dim=2048, heads=32, kv=8, ff=8192, rope=5.0e5,
                     eps=1.0e-5, bias=False, tied=True),
}


def more_bits(i, n):
    """llama.cpp's use_more_bits: the layers Q4_K_M gives Q6_K (attn_v, ffn_down)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def blocks(rng, t, n_values, std):
    """Random blocks of GGUF type `t` whose values have about `std`."""
    bv, bb, offsets, unit = BLOCK[t]
    n = n_values // bv
    out = bytearray(rng.randbytes(n * bb))
    lo, hi = scale_tables(rng, std / unit)
    for o in offsets:
        picks = rng.randbytes(n)
        out[o::bb] = picks.translate(lo)
        out[o + 1::bb] = picks.translate(hi)
    return bytes(out)


def tensors_of(rng, s, n_vocab):
    """(name, dims ne0-first, type, bytes) of every tensor of shape `s`."""
    dim, ff, layers = s["dim"], s["ff"], s["layers"]
    hd = dim // s["heads"]
    kvd = s["kv"] * hd
    k32 = s["arch"] == "qwen2"  # rows of 896 values: 32-value fallbacks
    main = T_Q5_0 if k32 else T_Q4_K
    embd = T_Q8_0 if k32 else T_Q6_K
    out = [("token_embd.weight", (dim, n_vocab), embd, blocks(rng, embd, dim * n_vocab, 1.0))]

    def mat(name, t, rows_in, rows_out, std):
        out.append((name, (rows_in, rows_out), t, blocks(rng, t, rows_in * rows_out, std)))

    for i in range(layers):
        p = f"blk.{i}."
        more = more_bits(i, layers)
        v_type = (T_Q8_0 if k32 else T_Q6_K) if more else main
        out.append((p + "attn_norm.weight", (dim,), T_F32, f32s(rng, dim, 1.0, 0.2)))
        for name, width, t in (("attn_q", dim, main), ("attn_k", kvd, main), ("attn_v", kvd, v_type)):
            mat(p + name + ".weight", t, dim, width, 0.8 / dim**0.5)
            if s["bias"]:
                out.append((p + name + ".bias", (width,), T_F32, f32s(rng, width, 0.0, 0.3)))
        mat(p + "attn_output.weight", main, dim, dim, 0.5 / dim**0.5)
        out.append((p + "ffn_norm.weight", (dim,), T_F32, f32s(rng, dim, 1.0, 0.2)))
        mat(p + "ffn_gate.weight", main, dim, ff, 1.0 / dim**0.5)
        mat(p + "ffn_up.weight", main, dim, ff, 1.0 / dim**0.5)
        mat(p + "ffn_down.weight", T_Q6_K if more else T_Q4_K, ff, dim, 0.5 / ff**0.5)
    out.append(("output_norm.weight", (dim,), T_F32, f32s(rng, dim, 1.0, 0.2)))
    if not s["tied"]:
        mat("output.weight", T_Q8_0, dim, n_vocab, 6.0 / dim**0.5)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=SHAPES)
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    vocab_kvs = read_kvs(a.vocab)
    tokens = [raw for key, raw in vocab_kvs if key == "tokenizer.ggml.tokens"]
    if not tokens:
        raise SystemExit(f"{a.vocab}: no tokenizer.ggml.tokens")
    n_vocab = len(token_texts(tokens[0]))
    rng = random.Random(a.seed)
    tensors = tensors_of(rng, s, n_vocab)
    arch = s["arch"]
    meta = [
        kv("general.architecture", STR, arch),
        kv("general.name", STR, f"cyb-llm benchmark {a.shape} (random weights, seed {a.seed})"),
        kv("general.file_type", U32, FILE_TYPE_Q4_K_M),
        kv(f"{arch}.block_count", U32, s["layers"]),
        kv(f"{arch}.context_length", U32, 4096),
        kv(f"{arch}.embedding_length", U32, s["dim"]),
        kv(f"{arch}.feed_forward_length", U32, s["ff"]),
        kv(f"{arch}.attention.head_count", U32, s["heads"]),
        kv(f"{arch}.attention.head_count_kv", U32, s["kv"]),
        kv(f"{arch}.rope.freq_base", F32, s["rope"]),
        kv(f"{arch}.attention.layer_norm_rms_epsilon", F32, s["eps"]),
        kv("tokenizer.ggml.add_bos_token", BOOL, False),
    ]
    meta += [gstr(key) + raw for key, raw in vocab_kvs if key.startswith("tokenizer.")]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    write_gguf(a.out, meta, tensors)


if __name__ == "__main__":
    main()
