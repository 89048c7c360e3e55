#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets into fuzz/seeds/TARGET/
(scripts/fuzz.sh copies them into fuzz/corpus/TARGET before a run). Standard
library only; inputs are the test fixtures, plus jfk.mp3 and the tiny.en
CTranslate2 config when `scripts/fetch-models.sh whisper` has fetched them.

  gguf_import    a tiny Llama GGUF (f32, 1 layer, 16-token byte-level BPE vocab), with
                 and without a chat template
  hf_import      the llama_fused and distilbert_tiny test folders, each as config.json,
                 tokenizer.json, tokenizer_config.json and model.safetensors joined by
                 the target's file separator
  ct2_import     a tiny Whisper CTranslate2 model (d_model 8, 1 layer each side),
                 config.json and vocabulary.txt joined the same way
  audio_decode   WAVs (16-bit mono, 8-bit stereo, 24-bit, float), a verbatim FLAC and
                 the first 4 KiB of jfk.mp3, each after the target's name-hint byte
  chat_template  every template of tests/fixtures/chat/templates.json, then the
                 message separator and a message

usage: scripts/make_fuzz_seeds.py
"""
import json
import math
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"
FILE_SEPARATOR = b"\n##cyb-file##\n"
MESSAGE_SEPARATOR = "\n##cyb-messages##\n"


def put(target, name, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# --- GGUF -------------------------------------------------------------------


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    """(type id, bytes) of a metadata value: int -> uint32, float -> float32."""
    if isinstance(v, bool):
        return 7, struct.pack("<B", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        return 8, gguf_str(v)
    items = [gguf_value(x) for x in v]
    return 9, struct.pack("<IQ", items[0][0], len(items)) + b"".join(b for _, b in items)


def gguf(kv, tensors):
    """GGUF v3 bytes; tensors: (name, row-major shape, f32 values)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        t, b = gguf_value(v)
        out += gguf_str(k) + struct.pack("<I", t) + b
    offset, blobs = 0, []
    for name, shape, values in tensors:
        ne = list(reversed(shape))
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", 0, offset)
        blob = struct.pack(f"<{len(values)}f", *values)
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    return out + b"".join(blobs)


def values(n, seed):
    return [math.sin(seed * 7.1 + i * 0.37) * 0.1 for i in range(n)]


def gguf_seeds():
    d, ff, heads, kv_heads, n_layers = 8, 16, 2, 1, 1
    kv_dim = d // heads * kv_heads
    tokens = ["<s>", "</s>", "a", "b", "c", "d", "e", "\u0120", "ab", "cd", "\u0120a", "abc", "de", "h", "i", "hi"]
    merges = ["a b", "c d", "\u0120 a", "ab c", "d e", "h i"]
    kv = {
        "general.architecture": "llama",
        "general.name": "fuzz-tiny",
        "llama.context_length": 64,
        "llama.embedding_length": d,
        "llama.block_count": n_layers,
        "llama.feed_forward_length": ff,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv_heads,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.rope.freq_base": 10000.0,
        "llama.rope.dimension_count": d // heads,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3, 3] + [1] * (len(tokens) - 2),
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.eos_token_id": 1,
    }
    t = [
        ("token_embd.weight", [len(tokens), d]),
        ("output_norm.weight", [d]),
        ("blk.0.attn_norm.weight", [d]),
        ("blk.0.attn_q.weight", [d, d]),
        ("blk.0.attn_k.weight", [kv_dim, d]),
        ("blk.0.attn_v.weight", [kv_dim, d]),
        ("blk.0.attn_output.weight", [d, d]),
        ("blk.0.ffn_norm.weight", [d]),
        ("blk.0.ffn_gate.weight", [ff, d]),
        ("blk.0.ffn_up.weight", [ff, d]),
        ("blk.0.ffn_down.weight", [d, ff]),
    ]
    tensors = [(n, s, values(math.prod(s), i)) for i, (n, s) in enumerate(t)]
    put("gguf_import", "tiny_llama.gguf", gguf(kv, tensors))
    kv["tokenizer.chat_template"] = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    put("gguf_import", "tiny_llama_chat.gguf", gguf(kv, tensors))


# --- Hugging Face -----------------------------------------------------------


def hf_seeds():
    for name, folder in [
        ("llama_fused", ROOT / "tests/fixtures/hf/llama_fused/model"),
        ("distilbert_tiny", ROOT / "tests/fixtures/bert/distilbert_tiny"),
    ]:
        parts = [
            (folder / f).read_bytes() if (folder / f).exists() else b""
            for f in ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
        ]
        put("hf_import", name, FILE_SEPARATOR.join(parts))


# --- CTranslate2 ------------------------------------------------------------


def ct2_string(s):
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def ct2_variable(name, shape, data, dtype):
    """dtype ids of CTranslate2 binary version 6: 0 float32, 1 int8, 2 int16, 3 int32, 4 float16."""
    out = ct2_string(name) + struct.pack("<B", len(shape))
    out += b"".join(struct.pack("<I", d) for d in shape)
    return out + struct.pack("<BI", dtype, len(data)) + data


def f16(n, seed):
    return struct.pack(f"<{n}e", *values(n, seed))


def ct2_seeds():
    d, ffn, n_mels, n_vocab, text_ctx, audio_ctx = 8, 16, 80, 64, 16, 16
    vs = []

    def var(name, shape):
        vs.append(ct2_variable(name, shape, f16(math.prod(shape), len(vs)), 4))

    def scalar(name, v, dtype=1):
        data = struct.pack("<b", v) if dtype == 1 else struct.pack("<h", v)
        vs.append(ct2_variable(name, [], data, dtype))

    def norm(p):
        var(f"{p}/beta", [d])
        var(f"{p}/gamma", [d])

    def linear(p, rows, cols):
        var(f"{p}/bias", [rows])
        var(f"{p}/weight", [rows, cols])

    scalar("decoder/activation", 1)
    scalar("decoder/alibi", 0)
    scalar("decoder/alignment_heads", 1, 2)
    scalar("decoder/alignment_layer", 0, 2)
    var("decoder/embeddings/weight", [n_vocab, d])
    for sub, rows in [("attention", None), ("self_attention", None)]:
        p = f"decoder/layer_0/{sub}"
        norm(f"{p}/layer_norm")
    linear("decoder/layer_0/attention/linear_0", d, d)
    linear("decoder/layer_0/attention/linear_1", 2 * d, d)
    linear("decoder/layer_0/attention/linear_2", d, d)
    norm("decoder/layer_0/ffn/layer_norm")
    linear("decoder/layer_0/ffn/linear_0", ffn, d)
    linear("decoder/layer_0/ffn/linear_1", d, ffn)
    linear("decoder/layer_0/self_attention/linear_0", 3 * d, d)
    linear("decoder/layer_0/self_attention/linear_1", d, d)
    norm("decoder/layer_norm")
    scalar("decoder/num_heads", 2, 2)
    var("decoder/position_encodings/encodings", [text_ctx, d])
    scalar("decoder/pre_norm", 1)
    scalar("decoder/scale_embeddings", 0)
    scalar("decoder/start_from_zero_embedding", 0)
    linear("encoder/conv1", d, n_mels)
    vs[-1] = ct2_variable("encoder/conv1/weight", [d, n_mels, 3], f16(d * n_mels * 3, 90), 4)
    var("encoder/conv2/bias", [d])
    var("encoder/conv2/weight", [d, d, 3])
    norm("encoder/layer_0/ffn/layer_norm")
    linear("encoder/layer_0/ffn/linear_0", ffn, d)
    linear("encoder/layer_0/ffn/linear_1", d, ffn)
    norm("encoder/layer_0/self_attention/layer_norm")
    linear("encoder/layer_0/self_attention/linear_0", 3 * d, d)
    linear("encoder/layer_0/self_attention/linear_1", d, d)
    norm("encoder/layer_norm")
    scalar("encoder/num_heads", 2, 2)
    var("encoder/position_encodings/encodings", [audio_ctx, d])
    model = struct.pack("<I", 6) + ct2_string("WhisperSpec") + struct.pack("<II", 3, len(vs))
    model += b"".join(vs)
    model += struct.pack("<I", 1) + ct2_string("decoder/projection/weight") + ct2_string("decoder/embeddings/weight")
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nocaptions|>",
        "<|notimestamps|>",
    ]
    pieces = [chr(ord("a") + i % 26) * (1 + i // 26) for i in range(n_vocab - len(specials) - 8)]
    pieces += specials + [f"<|{i * 0.02:.2f}|>" for i in range(8)]
    config = {
        "alignment_heads": [[0, 0]],
        "lang_ids": [],
        "suppress_ids": [1, 2],
        "suppress_ids_begin": [0],
    }
    put(
        "ct2_import",
        "tiny_whisper",
        FILE_SEPARATOR.join([model, json.dumps(config).encode(), "\n".join(pieces).encode() + b"\n"]),
    )


# --- audio ------------------------------------------------------------------

WAV, FLAC, MP3 = 0, 1, 2  # name-hint bytes of the audio_decode target


def wav(rate, channels, bits, frames, fmt=1):
    n = frames * channels
    xs = [math.sin(i * 0.05) * 0.5 for i in range(n)]
    if fmt == 3:
        data = struct.pack(f"<{n}f", *xs)
    elif bits == 8:
        data = bytes(int(128 + x * 127) for x in xs)
    elif bits == 16:
        data = struct.pack(f"<{n}h", *(int(x * 32767) for x in xs))
    else:
        data = b"".join(int(x * 8388607).to_bytes(3, "little", signed=True) for x in xs)
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", fmt, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt_chunk + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def crc8(b):
    c = 0
    for x in b:
        c ^= x
        for _ in range(8):
            c = ((c << 1) ^ 0x07) & 0xFF if c & 0x80 else (c << 1) & 0xFF
    return c


def crc16(b):
    c = 0
    for x in b:
        c ^= x << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x8005) & 0xFFFF if c & 0x8000 else (c << 1) & 0xFFFF
    return c


def flac(rate=16000, frames=256):
    """A mono 16-bit FLAC of one frame with a VERBATIM subframe (no compression)."""
    xs = [int(math.sin(i * 0.05) * 12000) for i in range(frames)]
    info = struct.pack(">HH", frames, frames) + b"\0\0\0" + b"\0\0\0"
    packed = (rate << 44) | (0 << 41) | (15 << 36) | frames  # rate, channels-1, bits-1, total
    info += packed.to_bytes(8, "big") + b"\0" * 16
    meta = bytes([0x80]) + len(info).to_bytes(3, "big") + info  # last block, STREAMINFO
    # Frame header: sync, fixed block size; block size code 6 (8-bit count-1 at end),
    # rate code 0 (from STREAMINFO), mono, 16-bit; frame number 0.
    head = bytes([0xFF, 0xF8, 0x60, 0x08, 0x00, frames - 1])
    head += bytes([crc8(head)])
    sub = bytes([0x02])  # VERBATIM subframe, no wasted bits
    sub += b"".join(struct.pack(">h", x) for x in xs)
    frame = head + sub
    frame += struct.pack(">H", crc16(frame))
    return b"fLaC" + meta + frame


def mp3_head(path, n=4096):
    """The first `n` bytes of `path`: its ID3 tag and first MPEG frames (the last one cut)."""
    return path.read_bytes()[:n]


def audio_seeds():
    put("audio_decode", "mono16.wav", bytes([WAV]) + wav(16000, 1, 16, 400))
    put("audio_decode", "stereo8.wav", bytes([WAV]) + wav(8000, 2, 8, 300))
    put("audio_decode", "mono24.wav", bytes([WAV]) + wav(44100, 1, 24, 200))
    put("audio_decode", "float.wav", bytes([WAV]) + wav(22050, 1, 32, 300, fmt=3))
    put("audio_decode", "verbatim.flac", bytes([FLAC]) + flac())
    mp3 = ROOT / ".cache/models/whisper/jfk.mp3"
    if mp3.exists():
        put("audio_decode", "jfk_head.mp3", bytes([MP3]) + mp3_head(mp3))


# --- chat templates ---------------------------------------------------------


def chat_seeds():
    d = json.loads((ROOT / "tests/fixtures/chat/templates.json").read_text())
    seen = set()
    for t in d["templates"]:
        if t.get("template") and t["template"] not in seen:
            seen.add(t["template"])
            put("chat_template", t["name"], (t["template"] + MESSAGE_SEPARATOR + "Hello?").encode())


def main():
    gguf_seeds()
    hf_seeds()
    ct2_seeds()
    audio_seeds()
    chat_seeds()
    for t in sorted(SEEDS.iterdir()):
        files = list(t.iterdir())
        print(f"{t.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
