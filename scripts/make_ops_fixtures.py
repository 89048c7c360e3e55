#!/usr/bin/env python3
"""Writes tests/fixtures/ops/ops.json: inputs and PyTorch (float64) outputs for
the ops of ../shared/spec/ops.md, so the CPU reference library is checked
against an independent implementation (tests/backend_reference.rs).

Run: .cache/venv/bin/python scripts/make_ops_fixtures.py
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20260130)
cases = []


def rand(*shape):
    # f32 values (what the runtime sees), computed on in f64.
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def add(op, attrs, inputs, outputs):
    cases.append({
        "op": op,
        "attrs": attrs,
        # Inputs: shortest text that parses back to the same f32; outputs: 10 digits.
        "inputs": [{"shape": list(np.shape(a)), "data": [float(str(v)) for v in np.asarray(a, np.float32).ravel()]} for a in inputs],
        "outputs": [{"shape": list(o.shape), "data": [float("%.10g" % v) for v in o.detach().numpy().ravel()]} for o in outputs],
    })


# Linear: y = x W^T
for (m, k, n) in [(1, 17, 3), (3, 255, 17)]:
    x, w = rand(m, k), rand(n, k)
    add("Matmul", {}, [x, w], [F.linear(t(x), t(w))])

# Norms
for d in [1, 17, 255]:
    x, g, b = rand(3, d), rand(d), rand(d)
    eps = 1e-6
    rms = t(x) * torch.rsqrt(t(x).pow(2).mean(-1, keepdim=True) + eps)
    add("RmsNorm", {"eps": eps, "add_one": False}, [x, g], [rms * t(g)])
    add("RmsNorm", {"eps": eps, "add_one": True}, [x, g], [rms * (1.0 + t(g))])
    add("LayerNorm", {"eps": 1e-5}, [x, g, b], [F.layer_norm(t(x), (d,), t(g), t(b), 1e-5)])
x, g, b = rand(2, 6, 5), rand(6), rand(6)
add("GroupNorm", {"groups": 3, "eps": 1e-5}, [x, g, b], [F.group_norm(t(x), 3, t(g), t(b), 1e-5)])

# Activations
x = rand(255) * 6.0
add("Silu", {}, [x], [F.silu(t(x))])
add("Gelu", {}, [x], [F.gelu(t(x))])
add("GeluTanh", {}, [x], [F.gelu(t(x), approximate="tanh")])
add("Sigmoid", {}, [x], [torch.sigmoid(t(x))])
add("Tanh", {}, [x], [torch.tanh(t(x))])
add("Softcap", {"cap": 2.5}, [x], [2.5 * torch.tanh(t(x) / 2.5)])
xs = rand(3, 17) * 4.0
add("Softmax", {}, [xs], [F.softmax(t(xs), -1)])
g, u = rand(3, 17) * 4.0, rand(3, 17)
add("SwiGlu", {}, [g, u], [F.silu(t(g)) * t(u)])
add("GeGlu", {}, [g, u], [F.gelu(t(g)) * t(u)])


# RoPE: neox = HF rotate_half on the first rot dims; normal = adjacent pairs
# (Meta / GGUF layout, as complex multiplication).
def rope_ref(x, pos, base, rot, style):
    s, h, d = x.shape
    inv = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = (torch.arange(pos, pos + s, dtype=torch.float64)[:, None] * inv[None, :])  # [s, rot/2]
    xr, xp = x[..., :rot], x[..., rot:]
    if style == "neox":
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
        rotated = xr * cos + torch.cat([-x2, x1], -1) * sin
    else:
        c = torch.view_as_complex(xr.reshape(s, h, rot // 2, 2).contiguous())
        rotated = torch.view_as_real(c * torch.polar(torch.ones_like(ang), ang)[:, None, :]).reshape(s, h, rot)
    return torch.cat([rotated, xp], -1)


for style in ["neox", "normal"]:
    for (s, h, d, rot, pos) in [(3, 2, 16, 16, 0), (5, 3, 18, 8, 1234)]:
        x = rand(s, h, d)
        add("Rope", {"style": style, "rot_dim": rot, "pos": pos, "base": 10000.0}, [x],
            [rope_ref(t(x), pos, 10000.0, rot, style)])


# Attention with GQA and masks; key j sits at position j, query i at q_pos + i.
def sdpa_ref(q, k, v, mask, q_pos, scale):
    sq, h, d = q.shape
    sk, hkv, _ = k.shape
    rep = h // hkv
    kk = k.repeat_interleave(rep, dim=1).permute(1, 0, 2)
    vv = v.repeat_interleave(rep, dim=1).permute(1, 0, 2)
    qq = q.permute(1, 0, 2)
    p = torch.arange(q_pos, q_pos + sq)[:, None]
    j = torch.arange(sk)[None, :]
    if mask["kind"] == "causal":
        allowed = j <= p
    elif mask["kind"] == "sliding":
        allowed = (j <= p) & (j > p - mask["window"])
    elif mask["kind"] == "padding":
        allowed = torch.tensor(mask["keep"])[None, :].expand(sq, sk)
    else:
        allowed = torch.ones(sq, sk, dtype=torch.bool)
    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=allowed, scale=scale)
    return out.permute(1, 0, 2)


for (sq, h, hkv, d, sk, q_pos) in [(3, 4, 2, 8, 3, 0), (2, 6, 3, 16, 20, 18)]:
    q, k, v = rand(sq, h, d), rand(sk, hkv, d), rand(sk, hkv, d)
    keep = (rng.uniform(size=sk) < 0.7).tolist()
    keep[0] = True
    for mask in [{"kind": "none"}, {"kind": "causal"}, {"kind": "sliding", "window": 2}, {"kind": "padding", "keep": keep}]:
        scale = 1.0 / math.sqrt(d)
        add("Sdpa", {"mask": mask, "q_pos": q_pos}, [q, k, v], [sdpa_ref(t(q), t(k), t(v), mask, q_pos, scale)])

# Conv1d (Whisper stem style)
x, w, b = rand(3, 17), rand(4, 3, 3), rand(4)
add("Conv1d", {"stride": 2, "padding": 1}, [x, w, b], [F.conv1d(t(x)[None], t(w), t(b), stride=2, padding=1)[0]])

out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "ops", "ops.json")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump({"generator": "scripts/make_ops_fixtures.py (torch %s, float64)" % torch.__version__, "cases": cases}, f)
print("wrote", len(cases), "cases to", out)
