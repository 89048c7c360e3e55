#!/usr/bin/env python3
"""Writes whisper.cpp ggml weights from the CTranslate2 tiny.en folder, for the
benchmark against whisper-cli (BENCHMARKS.md): the same weights on both sides.

Header (hparams, mel filters, vocab) = whisper.cpp's weightless
for-tests-ggml-tiny.en.bin; tensors follow as convert-pt-to-ggml.py writes them
(openai names, f16 matrices, f32 vectors / conv biases [n, 1] / positional tables,
the fused CT2 QKV and cross KV split by rows, no key bias).

usage: whisper_ct2_to_ggml.py CT2_DIR FOR_TESTS_GGML OUT.bin
"""
import struct
import sys

import numpy as np


def read_ct2(path):
    b = open(path, "rb").read()
    at = 0

    def u(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, b, at)
        at += struct.calcsize(fmt)
        return v

    def s():
        nonlocal at
        (n,) = u("H")
        v = b[at : at + n - 1].decode()
        at += n
        return v

    assert u("I")[0] == 6
    s(), u("I")
    (n,) = u("I")
    out = {}
    dt = {0: np.float32, 4: np.float16, 1: np.int8, 2: np.int16, 3: np.int32}
    for _ in range(n):
        name = s()
        (rank,) = u("B")
        shape = u("I" * rank)
        (t,) = u("B")
        (nb,) = u("I")
        out[name] = np.frombuffer(b[at : at + nb], dtype=dt[t]).reshape(shape)
        at += nb
    return out


def main(ct2_dir, header, dest):
    v = read_ct2(f"{ct2_dir}/model.bin")
    t = {}
    t["encoder.conv1.weight"] = v["encoder/conv1/weight"]
    t["encoder.conv1.bias"] = v["encoder/conv1/bias"].reshape(-1, 1)
    t["encoder.conv2.weight"] = v["encoder/conv2/weight"]
    t["encoder.conv2.bias"] = v["encoder/conv2/bias"].reshape(-1, 1)
    t["encoder.positional_embedding"] = v["encoder/position_encodings/encodings"]
    t["decoder.positional_embedding"] = v["decoder/position_encodings/encodings"]
    t["decoder.token_embedding.weight"] = v["decoder/embeddings/weight"]

    def ln(dst, src):
        t[f"{dst}.weight"] = v[f"{src}/gamma"]
        t[f"{dst}.bias"] = v[f"{src}/beta"]

    def lin(dst, src, part=None, parts=1, bias=True):
        w, b = v[f"{src}/weight"], v[f"{src}/bias"]
        if part is not None:
            n = w.shape[0] // parts
            w, b = w[part * n : (part + 1) * n], b[part * n : (part + 1) * n]
        t[f"{dst}.weight"] = w
        if bias:
            t[f"{dst}.bias"] = b

    ln("encoder.ln_post", "encoder/layer_norm")
    ln("decoder.ln", "decoder/layer_norm")
    for tower in ("encoder", "decoder"):
        i = 0
        while f"{tower}/layer_{i}/ffn/linear_0/weight" in v:
            d, c = f"{tower}.blocks.{i}", f"{tower}/layer_{i}"
            ln(f"{d}.attn_ln", f"{c}/self_attention/layer_norm")
            lin(f"{d}.attn.query", f"{c}/self_attention/linear_0", 0, 3)
            lin(f"{d}.attn.key", f"{c}/self_attention/linear_0", 1, 3, bias=False)
            lin(f"{d}.attn.value", f"{c}/self_attention/linear_0", 2, 3)
            lin(f"{d}.attn.out", f"{c}/self_attention/linear_1")
            ln(f"{d}.mlp_ln", f"{c}/ffn/layer_norm")
            lin(f"{d}.mlp.0", f"{c}/ffn/linear_0")
            lin(f"{d}.mlp.2", f"{c}/ffn/linear_1")
            if tower == "decoder":
                ln(f"{d}.cross_attn_ln", f"{c}/attention/layer_norm")
                lin(f"{d}.cross_attn.query", f"{c}/attention/linear_0")
                lin(f"{d}.cross_attn.key", f"{c}/attention/linear_1", 0, 2, bias=False)
                lin(f"{d}.cross_attn.value", f"{c}/attention/linear_1", 1, 2)
                lin(f"{d}.cross_attn.out", f"{c}/attention/linear_2")
            i += 1
    f32_names = {"encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
                 "decoder.positional_embedding"}
    with open(dest, "wb") as out:
        out.write(open(header, "rb").read())
        for name, data in t.items():
            f32 = data.ndim < 2 or name in f32_names
            data = np.ascontiguousarray(data.astype(np.float32 if f32 else np.float16))
            nb = name.encode()
            out.write(struct.pack("iii", data.ndim, len(nb), 0 if f32 else 1))
            for k in range(data.ndim):
                out.write(struct.pack("i", data.shape[data.ndim - 1 - k]))
            out.write(nb)
            data.tofile(out)


if __name__ == "__main__":
    main(*sys.argv[1:])
