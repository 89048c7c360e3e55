#!/usr/bin/env python3
"""Writes the qwen2 test model: a small Qwen2-architecture GGUF with the real
Qwen2 tokenizer (llama.cpp's models/ggml-vocab-qwen2.gguf: vocabulary, merges,
pre-tokenizer, chat template) and seeded random weights, for the text-generation
tests (tests/generate_*.rs) as the third model of issue 4: QKV biases, an
untied output matrix, grouped-query attention, RoPE base 1e6.

Python standard library only (CI runs it from scripts/fetch-models.sh without
numpy or gguf-py), byte-for-byte deterministic: fetch-models.sh checks the
SHA-256 of the result. The quantized matrices are random quants under random
per-block scales (no rounding, so no float differences between platforms);
norm gains and biases are f32 drawn from random.Random(SEED).

Shapes: 4 layers, hidden 128, 4 query heads of 32, 2 KV heads, FFN 384.
Encodings: token_embd and the FFN in Q4_0, attention and output in Q8_0.
Scales keep each layer's residual contribution below the embedding's (so the
8-bit activation rounding of llama.cpp and of the fast cpu backend moves the
logits little) and make the logits' standard deviation about 6 over the
151936-token vocabulary, so greedy choices are rarely ties.
The output rows of the vocabulary's unused "[PAD...]" tokens are zero (a trained
model never predicts them either).

usage: make_qwen2_gguf.py VOCAB.gguf OUT.gguf
"""
import os
import random
import struct
import sys

SEED = 20261130
LAYERS, DIM, HEADS, KV_HEADS, FF = 4, 128, 4, 2, 384
HEAD_DIM = DIM // HEADS
ALIGN = 32

# GGUF value types and tensor types used here.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}
T_F32, T_Q4_0, T_Q8_0 = 0, 2, 8


def read_kvs(path):
    """The key/value section of a GGUF as (key, raw type+value bytes) pairs."""
    data = open(path, "rb").read()
    if data[:4] != b"GGUF":
        raise SystemExit(f"{path}: not a GGUF file")
    _version, _n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    pos = 24

    def skip_value(t, pos):
        if t in SCALAR:
            return pos + SCALAR[t]
        if t == STR:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        if t == ARR:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if et in SCALAR:
                return pos + n * SCALAR[et]
            for _ in range(n):
                pos = skip_value(et, pos)
            return pos
        raise SystemExit(f"{path}: unknown GGUF value type {t}")

    kvs = []
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8 : pos + 8 + n].decode()
        start = pos + 8 + n
        (t,) = struct.unpack_from("<I", data, start)
        end = skip_value(t, start + 4)
        kvs.append((key, data[start:end]))
        pos = end
    return kvs


def token_texts(raw):
    """The strings of a raw tokenizer.ggml.tokens value (type, element type, count, strings)."""
    _t, _et, n = struct.unpack_from("<IIQ", raw, 0)
    pos, out = 16, []
    for _ in range(n):
        (m,) = struct.unpack_from("<Q", raw, pos)
        out.append(raw[pos + 8 : pos + 8 + m].decode("utf-8", "replace"))
        pos += 8 + m
    return out


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, t, value):
    fmt = {U32: "<I", F32: "<f", BOOL: "<?"}
    body = gstr(value) if t == STR else struct.pack(fmt[t], value)
    return gstr(key) + struct.pack("<I", t) + body


def scale_tables(rng, base):
    """Byte -> low / high byte of an f16 scale `±base * 2^u`, u uniform in [-1, 1]."""
    lo, hi = bytearray(256), bytearray(256)
    for i in range(256):
        d = base * 2.0 ** (rng.uniform(-1.0, 1.0)) * rng.choice((-1.0, 1.0))
        lo[i], hi[i] = struct.pack("<e", d)
    return bytes(lo), bytes(hi)


def blocks(rng, n_values, quant_bytes, std):
    """Random Q4_0 (quant_bytes 16) or Q8_0 (32) blocks whose values have about `std`."""
    n = n_values // 32
    # Element std of a block with scale 1: uniform nibble - 8 (16 levels) or uniform int8.
    unit = 16 / 12**0.5 if quant_bytes == 16 else 256 / 12**0.5
    lo, hi = scale_tables(rng, std / unit / 1.25)
    picks = rng.randbytes(n)
    quants = rng.randbytes(n * quant_bytes)
    width = 2 + quant_bytes
    out = bytearray(n * width)
    out[0::width] = picks.translate(lo)
    out[1::width] = picks.translate(hi)
    for j in range(quant_bytes):
        out[2 + j :: width] = quants[j::quant_bytes]
    return bytes(out)


def f32s(rng, n, mean, std):
    return struct.pack(f"<{n}f", *(rng.gauss(mean, std) for _ in range(n)))


def write_gguf(out_path, meta, tensors):
    """A GGUF v3 file of the encoded key/values `meta` and the tensors (name, dims ne0-first,
    type, bytes), written to OUT.part and renamed."""
    infos, offset = [], 0
    for name, dims, t, data in tensors:
        infos.append(gstr(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                     + struct.pack("<IQ", t, offset))
        offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + b"".join(infos)
    with open(out_path + ".part", "wb") as f:
        f.write(head + b"\0" * (-len(head) % ALIGN))
        for _, _, _, data in tensors:
            f.write(data + b"\0" * (-len(data) % ALIGN))
    os.replace(out_path + ".part", out_path)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    vocab_path, out_path = sys.argv[1:]
    vocab_kvs = read_kvs(vocab_path)
    tokens = [raw for key, raw in vocab_kvs if key == "tokenizer.ggml.tokens"]
    if not tokens:
        raise SystemExit(f"{vocab_path}: no tokenizer.ggml.tokens")
    texts = token_texts(tokens[0])
    n_vocab = len(texts)
    rng = random.Random(SEED)
    kv_dim = KV_HEADS * HEAD_DIM

    # (name, dims ne0-first, type, bytes)
    tensors = [("token_embd.weight", (DIM, n_vocab), T_Q4_0, blocks(rng, DIM * n_vocab, 16, 1.0))]
    for i in range(LAYERS):
        p = f"blk.{i}."
        tensors += [
            (p + "attn_norm.weight", (DIM,), T_F32, f32s(rng, DIM, 1.0, 0.2)),
            (p + "attn_q.weight", (DIM, DIM), T_Q8_0, blocks(rng, DIM * DIM, 32, 0.8 / DIM**0.5)),
            (p + "attn_q.bias", (DIM,), T_F32, f32s(rng, DIM, 0.0, 0.3)),
            (p + "attn_k.weight", (DIM, kv_dim), T_Q8_0, blocks(rng, DIM * kv_dim, 32, 0.8 / DIM**0.5)),
            (p + "attn_k.bias", (kv_dim,), T_F32, f32s(rng, kv_dim, 0.0, 0.3)),
            (p + "attn_v.weight", (DIM, kv_dim), T_Q8_0, blocks(rng, DIM * kv_dim, 32, 0.6 / DIM**0.5)),
            (p + "attn_v.bias", (kv_dim,), T_F32, f32s(rng, kv_dim, 0.0, 0.2)),
            (p + "attn_output.weight", (DIM, DIM), T_Q8_0, blocks(rng, DIM * DIM, 32, 0.5 / DIM**0.5)),
            (p + "ffn_norm.weight", (DIM,), T_F32, f32s(rng, DIM, 1.0, 0.2)),
            (p + "ffn_gate.weight", (DIM, FF), T_Q4_0, blocks(rng, DIM * FF, 16, 1.0 / DIM**0.5)),
            (p + "ffn_up.weight", (DIM, FF), T_Q4_0, blocks(rng, DIM * FF, 16, 1.0 / DIM**0.5)),
            (p + "ffn_down.weight", (FF, DIM), T_Q4_0, blocks(rng, FF * DIM, 16, 0.5 / FF**0.5)),
        ]
    tensors += [
        ("output_norm.weight", (DIM,), T_F32, f32s(rng, DIM, 1.0, 0.2)),
        ("output.weight", (DIM, n_vocab), T_Q8_0, blocks(rng, DIM * n_vocab, 32, 6.0 / DIM**0.5)),
    ]
    output = bytearray(tensors[-1][3])
    row = DIM // 32 * 34
    for i, text in enumerate(texts):
        if text.startswith("[PAD"):
            output[i * row : (i + 1) * row] = bytes(row)
    tensors[-1] = tensors[-1][:3] + (bytes(output),)

    meta = [
        kv("general.architecture", STR, "qwen2"),
        kv("general.name", STR, "cyb-llm qwen2 test model (random weights, seed %d)" % SEED),
        kv("general.file_type", U32, 7),
        kv("qwen2.block_count", U32, LAYERS),
        kv("qwen2.context_length", U32, 4096),
        kv("qwen2.embedding_length", U32, DIM),
        kv("qwen2.feed_forward_length", U32, FF),
        kv("qwen2.attention.head_count", U32, HEADS),
        kv("qwen2.attention.head_count_kv", U32, KV_HEADS),
        kv("qwen2.rope.freq_base", F32, 1.0e6),
        kv("qwen2.attention.layer_norm_rms_epsilon", F32, 1.0e-6),
        kv("tokenizer.ggml.add_bos_token", BOOL, False),
    ]
    meta += [gstr(key) + raw for key, raw in vocab_kvs if key.startswith("tokenizer.")]

    write_gguf(out_path, meta, tensors)


if __name__ == "__main__":
    main()
