#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/*.json, the references of tests/import_gguf.rs.

Not run by CI; the outputs are committed. Run from the repository root with a Python that has
`gguf` (gguf-py) and numpy (e.g. .cache/venv):

    python scripts/make_gguf_fixtures.py [MODELS_DIR]

MODELS_DIR defaults to $CYB_MODELS_DIR or .cache/models (scripts/fetch-models.sh fills it).

For each model, independently of the Rust code:
- every tensor: its canonical Hugging Face name (the table below, written from
  ../shared/spec/families.md), the row-major shape (gguf-py's `shape` reversed), the GGML type,
  and the SHA-256 of the little-endian f32 bytes of `gguf.quants.dequantize` of the source data,
  plus a few sample values;
- the metadata the importer turns into config / vocab (as gguf-py reads it).
"""

import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf import quants

OUT_DIR = os.path.join("tests", "fixtures", "gguf")

MODELS = [
    ("smollm2-q4_1", "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3-270m-q4_k_m", "gemma3/gemma-3-270m-q4_k_m.gguf"),
]

TOP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}

LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}


def canonical(name, sandwich):
    if name in TOP:
        return TOP[name]
    blk, layer, base, suffix = name.split(".")
    assert blk == "blk", name
    if base == "ffn_norm":
        hf = "pre_feedforward_layernorm" if sandwich else "post_attention_layernorm"
    else:
        hf = LAYER[base]
    return f"model.layers.{layer}.{hf}.{suffix}"


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def sha256(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CYB_MODELS_DIR", ".cache/models")
    os.makedirs(OUT_DIR, exist_ok=True)
    rng = np.random.default_rng(20261130)
    for label, rel in MODELS:
        path = os.path.join(models_dir, rel)
        reader = GGUFReader(path)
        arch = field(reader, "general.architecture")
        sandwich = any(".post_attention_norm." in t.name for t in reader.tensors)
        tensors = []
        for t in reader.tensors:
            values = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
            n = values.size
            idx = sorted({0, n - 1, *rng.integers(0, n, 4).tolist()})
            tensors.append(
                {
                    "name": canonical(t.name, sandwich),
                    "gguf_name": t.name,
                    "shape": [int(d) for d in reversed(t.shape.tolist())],
                    "ggml_type": t.tensor_type.name,
                    "sha256_f32": sha256(values),
                    "samples": [[int(i), float(values[i])] for i in idx],
                }
            )
            print(label, t.name, t.tensor_type.name, file=sys.stderr)
        tokens = field(reader, "tokenizer.ggml.tokens")
        merges = field(reader, "tokenizer.ggml.merges") or []
        template = field(reader, "tokenizer.chat_template")
        meta = {
            "architecture": arch,
            "block_count": field(reader, f"{arch}.block_count"),
            "embedding_length": field(reader, f"{arch}.embedding_length"),
            "feed_forward_length": field(reader, f"{arch}.feed_forward_length"),
            "head_count": field(reader, f"{arch}.attention.head_count"),
            "head_count_kv": field(reader, f"{arch}.attention.head_count_kv"),
            "key_length": field(reader, f"{arch}.attention.key_length"),
            "context_length": field(reader, f"{arch}.context_length"),
            "rope_freq_base": field(reader, f"{arch}.rope.freq_base"),
            "rms_eps": field(reader, f"{arch}.attention.layer_norm_rms_epsilon"),
            "sliding_window": field(reader, f"{arch}.attention.sliding_window"),
            "tokenizer_model": field(reader, "tokenizer.ggml.model"),
            "tokenizer_pre": field(reader, "tokenizer.ggml.pre"),
            "n_tokens": len(tokens),
            "tokens_sha256": hashlib.sha256("\n".join(tokens).encode()).hexdigest(),
            "n_merges": len(merges),
            "merges_sha256": hashlib.sha256("\n".join(merges).encode()).hexdigest(),
            "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
            "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
            "add_bos_token": field(reader, "tokenizer.ggml.add_bos_token"),
            "chat_template_sha256": None if template is None else hashlib.sha256(template.encode()).hexdigest(),
        }
        with open(os.path.join(OUT_DIR, f"{label}.json"), "w") as f:
            f.write('{\n"file": %s,\n"metadata": %s,\n"tensors": [\n' % (json.dumps(rel), json.dumps(meta, indent=1)))
            f.write(",\n".join(json.dumps(t) for t in tensors))
            f.write("\n]\n}\n")


if __name__ == "__main__":
    main()
