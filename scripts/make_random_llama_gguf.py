#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF with seeded random Q4_0 weights (f32 norms)
and the tokenizer of a vocab GGUF (llama.cpp's ggml-vocab-*.gguf), for
benchmarks: `--shape 8b` is Llama-3-8B's shape (32 layers, 4096, 14336,
32/8 heads, vocab from the tokenizer file).

usage: make_random_llama_gguf.py VOCAB.gguf OUT.gguf [--shape 8b|tiny] [--seed N]
"""
import argparse

import numpy as np
import gguf

SHAPES = {
    "8b": dict(layers=32, dim=4096, ff=14336, heads=32, kv=8),
    "tiny": dict(layers=2, dim=256, ff=512, heads=4, kv=2),
}


def q4_0(rng, rows, cols):
    blocks = rows * cols // 32
    b = rng.integers(0, 256, size=(blocks, 18), dtype=np.uint8)
    scales = (rng.uniform(0.002, 0.02, size=blocks) * rng.choice([-1, 1], size=blocks)).astype(np.float16)
    b[:, :2] = scales.view(np.uint8).reshape(blocks, 2)
    return b.reshape(rows, cols // 32 * 18)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--shape", default="8b", choices=SHAPES)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    rng = np.random.default_rng(a.seed)
    src = gguf.GGUFReader(a.vocab)
    w = gguf.GGUFWriter(a.out, "llama")
    n_vocab = None
    for name, field in src.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(vals)
            w.add_array(name, vals)
        elif kind == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(field.parts[field.data[0]]).decode())
        else:
            w.add_key_value(name, field.parts[field.data[0]].tolist()[0], kind)
    d, hd = s["dim"], s["dim"] // s["heads"]
    w.add_block_count(s["layers"])
    w.add_context_length(8192)
    w.add_embedding_length(d)
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    Q = gguf.GGMLQuantizationType.Q4_0
    ones = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w.add_tensor("token_embd.weight", q4_0(rng, n_vocab, d), raw_dtype=Q)
    for i in range(s["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(d))
        w.add_tensor(p + "attn_q.weight", q4_0(rng, d, d), raw_dtype=Q)
        w.add_tensor(p + "attn_k.weight", q4_0(rng, s["kv"] * hd, d), raw_dtype=Q)
        w.add_tensor(p + "attn_v.weight", q4_0(rng, s["kv"] * hd, d), raw_dtype=Q)
        w.add_tensor(p + "attn_output.weight", q4_0(rng, d, d), raw_dtype=Q)
        w.add_tensor(p + "ffn_norm.weight", ones(d))
        w.add_tensor(p + "ffn_gate.weight", q4_0(rng, s["ff"], d), raw_dtype=Q)
        w.add_tensor(p + "ffn_up.weight", q4_0(rng, s["ff"], d), raw_dtype=Q)
        w.add_tensor(p + "ffn_down.weight", q4_0(rng, d, s["ff"]), raw_dtype=Q)
    w.add_tensor("output_norm.weight", ones(d))
    w.add_tensor("output.weight", q4_0(rng, n_vocab, d), raw_dtype=Q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
