#!/usr/bin/env python3
"""A real GGUF's shape with seeded random weights, for speed measurements on a
machine the real file cannot reach (the H200 device takes 64 MiB a call).

  gguf_shape_clone.py head REAL.gguf OUT.head[.gz]  the header bytes: metadata
                                                  (tokenizer included) and tensor infos
  gguf_shape_clone.py fill OUT.head[.gz] OUT.gguf [--seed N]
                                                  the same header, each tensor filled
                                                  with random values of its own dtype

The clone has the real file's architecture, tokenizer, tensor names, shapes,
dtypes and offsets, so every kernel reads the same bytes in the same layout;
only the values differ (block scales drawn in the range real weights use,
quantized values uniform, norm weights near 1). Speed is what it is for: the
text such weights generate is noise.

`head` is pure Python (no numpy on the build machine); `fill` uses numpy.
"""
import gzip
import struct
import sys

# dtype id -> (name, values per block, bytes per block, byte offsets of the
# block's f16 scales)
DTYPES = {
    0: ("F32", 1, 4, ()),
    1: ("F16", 1, 2, ()),
    2: ("Q4_0", 32, 18, (0,)),
    3: ("Q4_1", 32, 20, (0, 2)),
    6: ("Q5_0", 32, 22, (0,)),
    7: ("Q5_1", 32, 24, (0, 2)),
    8: ("Q8_0", 32, 34, (0,)),
    12: ("Q4_K", 256, 144, (0, 2)),
    13: ("Q5_K", 256, 176, (0, 2)),
    14: ("Q6_K", 256, 210, (208,)),
}
# Fixed sizes of the metadata value types (GGUF v3); 8 = string, 9 = array.
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Header:
    """The parsed header: tensor infos (name, dims, dtype, offset), the
    alignment, and where the tensor data starts."""

    def __init__(self, data):
        self.data = data
        self.pos = 0
        if data[:4] != b"GGUF":
            sys.exit("not a GGUF file (magic is %r)" % data[:4])
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
        if version < 2:
            sys.exit("GGUF version %d: only v2 and v3 are read" % version)
        self.pos = 24
        self.alignment = 32
        for _ in range(n_kv):
            key = self.string()
            kind = self.u32()
            value = self.value(kind)
            if key == "general.alignment":
                self.alignment = value
        self.tensors = []
        for _ in range(n_tensors):
            name = self.string()
            n_dims = self.u32()
            dims = struct.unpack_from("<%dQ" % n_dims, data, self.pos)
            self.pos += 8 * n_dims
            dtype = self.u32()
            (offset,) = struct.unpack_from("<Q", data, self.pos)
            self.pos += 8
            self.tensors.append((name, dims, dtype, offset))
        self.data_offset = -(-self.pos // self.alignment) * self.alignment

    def u32(self):
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return v

    def string(self):
        (n,) = struct.unpack_from("<Q", self.data, self.pos)
        s = self.data[self.pos + 8 : self.pos + 8 + n]
        self.pos += 8 + n
        return s.decode("utf-8", "replace")

    def value(self, kind):
        if kind == 8:
            return self.string()
        if kind == 9:
            sub = self.u32()
            (n,) = struct.unpack_from("<Q", self.data, self.pos)
            self.pos += 8
            if sub in SCALAR:
                self.pos += n * SCALAR[sub]
            else:
                for _ in range(n):
                    self.value(sub)
            return None
        size = SCALAR[kind]
        fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[size]
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v


def tensor_bytes(name, dims, dtype):
    if dtype not in DTYPES:
        sys.exit("tensor %s: dtype %d is not one this script fills (%s)" % (name, dtype, sorted(DTYPES)))
    _, per_block, block_bytes, _ = DTYPES[dtype]
    n = 1
    for d in dims:
        n *= d
    if n % per_block:
        sys.exit("tensor %s: %d values are not whole blocks of %d" % (name, n, per_block))
    return n // per_block * block_bytes


def opener(path):
    """gzip.open for a .gz path, else open (headers are mostly tokenizer text)."""
    return gzip.open if path.endswith(".gz") else open


def head(src, out):
    with open(src, "rb") as f:
        data = f.read(64 << 20)
    h = Header(data)
    with opener(out)(out, "wb") as f:
        f.write(data[: h.data_offset])
    print("%s: %d tensors, header %d bytes -> %s" % (src, len(h.tensors), h.data_offset, out))


def scale_range(dtype):
    """Block scales of the size real weights have (|d| in this range)."""
    name = DTYPES[dtype][0]
    if name == "Q8_0":
        return 0.0002, 0.002
    if name.endswith("_K"):
        return 0.0001, 0.001
    return 0.002, 0.02


def fill(head_path, out, seed):
    import numpy as np

    with opener(head_path)(head_path, "rb") as f:
        data = f.read()
    h = Header(data)
    end = max(h.data_offset + off + tensor_bytes(n, d, t) for n, d, t, off in h.tensors)
    with open(out, "wb") as f:
        f.write(data[: h.data_offset])
        f.truncate(end)
    rng = np.random.default_rng(seed)
    mm = np.memmap(out, dtype=np.uint8, mode="r+")
    for name, dims, dtype, off in h.tensors:
        size = tensor_bytes(name, dims, dtype)
        view = mm[h.data_offset + off : h.data_offset + off + size]
        kind, _, block_bytes, scales = DTYPES[dtype]
        if kind in ("F32", "F16"):
            n = size // (4 if kind == "F32" else 2)
            base = 1.0 if len(dims) == 1 else 0.0
            vals = base + 0.05 * rng.standard_normal(n)
            view[:] = vals.astype(np.float32 if kind == "F32" else np.float16).view(np.uint8)
            continue
        blocks = view.reshape(-1, block_bytes)
        blocks[:] = rng.integers(0, 256, size=blocks.shape, dtype=np.uint8)
        lo, hi = scale_range(dtype)
        for at in scales:
            d = (rng.uniform(lo, hi, size=len(blocks)) * rng.choice([-1, 1], size=len(blocks))).astype(np.float16)
            blocks[:, at : at + 2] = d.view(np.uint8).reshape(-1, 2)
    mm.flush()
    print("%s: %d tensors filled, %d bytes (seed %d)" % (out, len(h.tensors), end, seed))


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "head":
        head(args[1], args[2])
    elif len(args) in (3, 5) and args[0] == "fill":
        seed = int(args[4]) if len(args) == 5 and args[3] == "--seed" else 1
        fill(args[1], args[2], seed)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
