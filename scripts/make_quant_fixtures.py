#!/usr/bin/env python3
"""Writes the encoding fixtures of tests/fixtures/quant/ (checked by tests/quant_gguf_py.rs).

Not run by CI; the outputs are committed. Run from the repository root with a Python that has
`gguf` (gguf-py) and numpy:

    python scripts/make_quant_fixtures.py [--llama-sdist PATH/llama_cpp_python-X.tar.gz]

References, all independent of the Rust code:
- dequantize: `gguf.quants.dequantize` for f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k..q6_k,
  on random blocks (random payload bytes, finite random f16 scales);
- i32 / i8 / u8: numpy `astype(np.float32)` (gguf-py has no dequantizer for integer types);
- ternary: the table of ../shared/spec/quant.md, written out below;
- quantize f16, bf16, q8_0, q4_0: `gguf.quants.quantize`;
- quantize q4_k, q6_k: gguf-py has no quantizer for them, so ggml's own `quantize_row_q4_K_ref` /
  `quantize_row_q6_K_ref` (ggml-quants.c from the llama.cpp copy inside the llama-cpp-python sdist),
  compiled here with the system C compiler (-ffp-contract=off) and called through ctypes.
"""

import argparse
import ctypes
import json
import os
import subprocess
import tarfile
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT_DIR = os.path.join("tests", "fixtures", "quant")
SEED = 20261130

# (name, gguf type, block bytes, values per block, byte offsets of f16 scale fields, number of blocks)
BLOCK_TYPES = [
    ("q8_0", T.Q8_0, 34, 32, [0], 256),
    ("q4_0", T.Q4_0, 18, 32, [0], 256),
    ("q4_1", T.Q4_1, 20, 32, [0, 2], 256),
    ("q5_0", T.Q5_0, 22, 32, [0], 256),
    ("q5_1", T.Q5_1, 24, 32, [0, 2], 256),
    ("q2_k", T.Q2_K, 84, 256, [80, 82], 48),
    ("q3_k", T.Q3_K, 110, 256, [108], 48),
    ("q4_k", T.Q4_K, 144, 256, [0, 2], 48),
    ("q5_k", T.Q5_K, 176, 256, [0, 2], 48),
    ("q6_k", T.Q6_K, 210, 256, [208], 48),
]

# quant.md, "Ternary": value i of a byte sits in bits 2i..2i+2; 00 -> -1, 01 -> 0, 10 -> +1, 11 -> 0.
TERNARY_TABLE = {0b00: -1.0, 0b01: 0.0, 0b10: 1.0, 0b11: 0.0}

GGML_STUBS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "ggml_abort %s:%d\n", file, line); abort(); }
size_t ggml_row_size(int type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(int type) { (void) type; return "?"; }
size_t ggml_type_size(int type) { (void) type; abort(); }
"""


def finite_f16(rng, n):
    """n random finite f16 values (every finite bit pattern, subnormals and both signs included)."""
    out = np.empty(n, dtype=np.uint16)
    filled = 0
    while filled < n:
        bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
        bits = bits[(bits & 0x7C00) != 0x7C00]
        take = min(n - filled, bits.size)
        out[filled : filled + take] = bits[:take]
        filled += take
    return out


def write(name, data):
    path = os.path.join(OUT_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    return name


def dequant_fixtures(rng, manifest):
    for name, qtype, bb, bv, scale_offsets, nblocks in BLOCK_TYPES:
        raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
        for off in scale_offsets:
            raw[:, off : off + 2] = finite_f16(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
        expected = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32)
        assert expected.size == nblocks * bv
        manifest.append(
            {
                "kind": "dequantize",
                "dtype": name,
                "input": write(f"dequant_{name}.in", raw.tobytes()),
                "output": write(f"dequant_{name}.out", expected.astype("<f4").tobytes()),
                "reference": "gguf.quants.dequantize",
            }
        )

    n = 4096
    # f32 and bf16: every bit pattern, NaNs and infinities included (both are exact bit moves).
    f32_raw = rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    bf16_raw = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    # f16: finite values plus the infinities; NaN payload handling differs between converters and
    # the spec only asks for finite values.
    f16_raw = np.concatenate([finite_f16(rng, n - 2), np.array([0x7C00, 0xFC00], dtype=np.uint16)])
    plain = [
        ("f32", T.F32, f32_raw.astype("<u4").view(np.uint8)),
        ("bf16", T.BF16, bf16_raw.astype("<u2").view(np.uint8)),
        ("f16", T.F16, f16_raw.astype("<u2").view(np.uint8)),
    ]
    for name, qtype, raw in plain:
        expected = quants.dequantize(raw, qtype).astype(np.float32)
        manifest.append(
            {
                "kind": "dequantize",
                "dtype": name,
                "input": write(f"dequant_{name}.in", raw.tobytes()),
                "output": write(f"dequant_{name}.out", expected.astype("<f4").tobytes()),
                "reference": "gguf.quants.dequantize",
            }
        )

    ints = [
        ("i32", rng.integers(-(1 << 31), 1 << 31, size=n, dtype=np.int64).astype("<i4")),
        ("i8", rng.integers(-128, 128, size=n, dtype=np.int16).astype(np.int8)),
        ("u8", rng.integers(0, 256, size=n, dtype=np.uint16).astype(np.uint8)),
    ]
    for name, values in ints:
        expected = values.astype(np.float32)
        manifest.append(
            {
                "kind": "dequantize",
                "dtype": name,
                "input": write(f"dequant_{name}.in", values.tobytes()),
                "output": write(f"dequant_{name}.out", expected.astype("<f4").tobytes()),
                "reference": "numpy astype(float32)",
            }
        )

    for tag, scale in [("pos", np.float32(0.0371)), ("neg", np.float32(-2.5))]:
        raw = rng.integers(0, 256, size=1024, dtype=np.uint8)
        values = np.empty(raw.size * 4, dtype=np.float32)
        for byte_index, byte in enumerate(raw.tolist()):
            for i in range(4):
                code = (byte >> (2 * i)) & 3
                values[4 * byte_index + i] = np.float32(scale) * np.float32(TERNARY_TABLE[code])
        manifest.append(
            {
                "kind": "dequantize",
                "dtype": "ternary",
                "scale": float(scale),
                "input": write(f"dequant_ternary_{tag}.in", raw.tobytes()),
                "output": write(f"dequant_ternary_{tag}.out", values.astype("<f4").tobytes()),
                "reference": "quant.md ternary table",
            }
        )


def quant_inputs(rng, n_superblocks):
    """Rows of f32 with varied block statistics: scaled normals, uniforms, outliers, zero and constant blocks."""
    blocks = []
    for i in range(n_superblocks):
        kind = i % 8
        scale = np.float32(10.0 ** rng.uniform(-3, 3))
        if kind in (0, 1, 2):
            b = rng.standard_normal(256) * scale
        elif kind == 3:
            b = rng.uniform(-1, 1, 256) * scale
        elif kind == 4:
            b = rng.standard_normal(256) * scale
            b[rng.integers(0, 256, 3)] *= 40
        elif kind == 5:
            b = rng.uniform(0.5, 1.0, 256) * scale  # all positive
            b[0:32] = 0.0  # one all-zero sub-block
        elif kind == 6:
            b = -rng.uniform(0.0, 1.0, 256) * scale  # all non-positive
            b[64:96] = -scale  # one constant sub-block
        else:
            b = np.zeros(256)
            if i % 16 == 7:
                b[100] = scale  # a single non-zero value
        blocks.append(b.astype(np.float32))
    return np.concatenate(blocks).astype(np.float32)


def build_ggml(sdist, workdir):
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/ggml/" in m.name]
        tar.extractall(workdir, members=members, filter="data")
    roots = [m.name.split("/vendor/")[0] for m in members[:1]]
    ggml = os.path.join(workdir, roots[0], "vendor", "llama.cpp", "ggml")
    stubs = os.path.join(workdir, "stubs.c")
    with open(stubs, "w") as f:
        f.write(GGML_STUBS)
    lib = os.path.join(workdir, "libggmlquants.so")
    subprocess.run(
        [
            "cc", "-O2", "-ffp-contract=off", "-fPIC", "-shared",
            "-I", os.path.join(ggml, "include"), "-I", os.path.join(ggml, "src"),
            os.path.join(ggml, "src", "ggml-quants.c"), stubs, "-o", lib, "-lm",
        ],
        check=True,
    )
    return ctypes.CDLL(lib), os.path.basename(sdist)


def ggml_quantize(lib, fn_name, block_bytes, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(x.size // 256 * block_bytes, dtype=np.uint8)
    fn = getattr(lib, fn_name)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


def quant_fixtures(rng, manifest, sdist):
    x = quant_inputs(rng, 32)
    x_file = write("quant_input.f32", x.astype("<f4").tobytes())
    for name, qtype in [("f16", T.F16), ("bf16", T.BF16), ("q8_0", T.Q8_0), ("q4_0", T.Q4_0)]:
        q = np.asarray(quants.quantize(x.reshape(1, -1), qtype)).view(np.uint8).reshape(-1)
        manifest.append(
            {
                "kind": "quantize",
                "dtype": name,
                "input": x_file,
                "output": write(f"quant_{name}.out", q.tobytes()),
                "reference": "gguf.quants.quantize",
            }
        )
    with tempfile.TemporaryDirectory() as tmp:
        lib, origin = build_ggml(sdist, tmp)
        for name, fn_name, bb in [("q4_k", "quantize_row_q4_K_ref", 144), ("q6_k", "quantize_row_q6_K_ref", 210)]:
            q = ggml_quantize(lib, fn_name, bb, x)
            manifest.append(
                {
                    "kind": "quantize",
                    "dtype": name,
                    "input": x_file,
                    "output": write(f"quant_{name}.out", q.tobytes()),
                    "reference": f"ggml {fn_name} ({origin})",
                }
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--llama-sdist",
        default=os.path.join(".cache", "dl", "llama_cpp_python-0.3.36.tar.gz"),
        help="llama-cpp-python source distribution (for ggml's k-quant reference quantizers)",
    )
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)
    for f in os.listdir(OUT_DIR):
        os.remove(os.path.join(OUT_DIR, f))
    rng = np.random.default_rng(SEED)
    manifest = []
    dequant_fixtures(rng, manifest)
    quant_fixtures(rng, manifest, args.llama_sdist)
    with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
        json.dump({"seed": SEED, "fixtures": manifest}, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print(f"wrote {len(manifest)} fixtures, {total} bytes, to {OUT_DIR}")


if __name__ == "__main__":
    main()
