#!/usr/bin/env python3
"""Writes the Hugging Face importer fixtures of tests/fixtures/hf/ (checked by tests/import_hf.rs).

Not run by CI; the outputs are committed. Run from the repository root with a Python that has
torch, transformers, tokenizers, safetensors and numpy (the project venv .cache/venv):

    .cache/venv/bin/python scripts/make_hf_fixtures.py [--models-dir .cache/models]

What it writes, all references independent of the Rust code:

- `qwen2/`: a tiny Qwen2ForCausalLM (random bf16 weights, q/k/v biases, untied lm_head), saved by
  transformers as a *sharded* checkpoint (`model.safetensors.index.json` + shards), a config.json
  in the style of the published Qwen2.5 checkpoints (top-level `rope_theta`), a byte-level BPE
  tokenizer.json trained with the `tokenizers` package using Qwen2's split regex, Qwen's
  special tokens, a ChatML chat template and generation_config.json sampling defaults.
- `gemma3/`: a tiny Gemma3ForCausalLM (`gemma3_text`, random bf16 weights with non-zero norm
  weights, QK-norm, sandwich norms, tied embeddings) with the config.json transformers 5 writes
  (`rope_parameters` per layer type) and an SPM-style byte-fallback BPE tokenizer.
- `qwen3/`: a tiny Qwen3ForCausalLM in f32 (QK-norm, head_dim != hidden/heads, tied
  embeddings) exactly as transformers 5 saves it (`rope_parameters`, `chat_template.jinja`).
- `llama_fused/`: a tiny LlamaForCausalLM in f16 whose q/k/v and gate/up projections were fused
  into `qkv_proj` / `gate_up_proj` (as Phi-3 stores them), with a Llama-3-style BPE tokenizer.
- `llama_spm/`: a tiny Llama in bf16 with a legacy Llama-2-style SPM tokenizer.json
  (Prepend("▁") + Replace normalizer, byte fallback, `<s>` added by the post-processor).
- `<name>/expected.safetensors`: every canonical tensor the importer must write, as f32, computed
  here: bf16/f16 upcast by torch, Gemma norm gains as `np.float32(1) + w` (numpy), fused
  tensors taken from the unfused state dict before fusing.
- `<name>/logits.safetensors`: transformers' float32 logits of each tiny model on seeded
  random ids (see save_logits), for the forward check of the imported files.
- `minilm.json`: for the real all-MiniLM-L6-v2 folder (scripts/fetch-models.sh minilm), the
  SHA-256 of every tensor's f32 bytes and of its f16 bytes (numpy `astype(float16)`), read with
  the python safetensors package, keyed by name.
- `<name>/encode.json`, `minilm_encode.json`: token ids of a few texts from the `tokenizers`
  package (cross-checked with transformers' AutoTokenizer except for llama_spm, see
  write_encode_cases), with and without special tokens.
"""

import argparse
import hashlib
import json
import os
import shutil

import numpy as np
import torch
from safetensors.numpy import load_file as load_np
from safetensors.torch import load_file, save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

OUT = os.path.join("tests", "fixtures", "hf")
SEED = 20261130

QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? The capital of France is Paris.",
    "Hello, world! Numbers like 12345 and 3.14159 appear here, too.",
    "def main():\n    print('hello')\n    return 0\n",
    "Tokenizers split text into pieces; the model sees their ids.",
    "Ünïcödé text: naïve café, 日本語, Русский, emoji 😀.",
    "Digits group differently per preset: 123 1234 1234567 123456 12 123.",
] * 4

QWEN_CHAT = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
GEMMA_CHAT = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}\n"
)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def byte_level_tokenizer(regex, vocab_size, specials, user_tokens, bos=None):
    """A byte-level BPE trained on CORPUS; specials and user tokens appended after the learned ids."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(specials)
    tok.add_tokens(user_tokens)
    if bos is None:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
        )
    return tok


def spm_tokenizer(vocab_size, specials, bos="<bos>", prepend=False):
    """An SPM-style BPE (▁ for space, <0xNN> byte fallback): Gemma's tokenizer.json layout, or
    with `prepend` the legacy Llama 2 one (Prepend("▁") normalizer, no pre-tokenizer)."""
    space = normalizers.Replace(" ", "▁")
    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), space]) if prepend else space
    learner = Tokenizer(models.BPE())
    learner.normalizer = normalizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
    learner.train_from_iterator(CORPUS, trainer)
    learned = json.loads(learner.to_str())["model"]
    vocab = {}
    for s in specials[:4]:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizer
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if prepend:
        steps.append(decoders.Strip(" ", 1, 0))
    else:
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")  # as transformers' GemmaTokenizer
    tok.decoder = decoders.Sequence(steps)
    tok.add_special_tokens(specials)
    bos_id = tok.token_to_id(bos)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
    )
    return tok


def randomize(model, norm_scale):
    """Replaces every parameter with seeded random values (norm weights around 0 for Gemma)."""
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = norm_scale if "norm" in name else 0.05
            p.copy_(torch.randn(p.shape, generator=g) * scale)


def save_expected(out_dir, tensors):
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, "expected.safetensors"))


LOGIT_POSITIONS = [0, 5, 11, 17, 23]


def save_logits(out_dir, model, n_tokens):
    """transformers' float32 logits on 24 seeded random ids (past Gemma's sliding window of
    16), at LOGIT_POSITIONS: `logits.safetensors` (`ids` i32, `positions` i32, `logits` f32
    [positions, vocab]). The reference model is rebuilt from the config.json written to
    `out_dir/model` (AutoConfig, as loading the folder would) with `model`'s weights in f32."""
    cfg = AutoConfig.from_pretrained(os.path.join(out_dir, "model"))
    ref = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()}, strict=True)
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, n_tokens, (1, LOGIT_POSITIONS[-1] + 1), generator=g)
    with torch.no_grad():
        logits = ref(input_ids=ids).logits[0]
    pos = torch.tensor(LOGIT_POSITIONS)
    save_file(
        {"ids": ids[0].to(torch.int32), "positions": pos.to(torch.int32), "logits": logits[pos].contiguous()},
        os.path.join(out_dir, "logits.safetensors"),
    )


def f32_state(model):
    return {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}


def make_qwen2():
    d = os.path.join(OUT, "qwen2")
    shutil.rmtree(d, ignore_errors=True)
    src = os.path.join(d, "model")
    os.makedirs(src)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = byte_level_tokenizer(QWEN2_REGEX, 320, specials, ["<tool_call>"])
    tok.save(os.path.join(src, "tokenizer.json"))
    n = tok.get_vocab_size()
    eot, im_end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    cfg = Qwen2Config(
        vocab_size=n + 4,  # padded beyond the tokenizer, as Qwen2.5 is
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=eot,
        eos_token_id=eot,
    )
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(cfg)
    randomize(model, 0.5)
    model = model.to(torch.bfloat16)
    model.save_pretrained(src, max_shard_size="40KB")
    # The published Qwen2.5 config.json style (transformers 4.x: top-level rope_theta).
    write_json(
        os.path.join(src, "config.json"),
        {
            "architectures": ["Qwen2ForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": eot,
            "eos_token_id": eot,
            "hidden_act": "silu",
            "hidden_size": 32,
            "initializer_range": 0.02,
            "intermediate_size": 64,
            "max_position_embeddings": 512,
            "max_window_layers": 2,
            "model_type": "qwen2",
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "sliding_window": 512,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.43.1",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": n + 4,
        },
    )
    added = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t in specials,
        }
        for t in specials + ["<tool_call>"]
    }
    write_json(
        os.path.join(src, "tokenizer_config.json"),
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": added,
            "bos_token": None,
            "chat_template": QWEN_CHAT,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": 512,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        },
    )
    for extra in ("chat_template.jinja", "generation_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            os.remove(os.path.join(src, extra))
    write_json(
        os.path.join(src, "generation_config.json"),
        {
            "bos_token_id": eot,
            "pad_token_id": eot,
            "do_sample": True,
            "eos_token_id": [im_end, eot],
            "repetition_penalty": 1.05,
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "transformers_version": "4.37.0",
        },
    )
    save_expected(d, f32_state(model))
    save_logits(d, model, n)


def make_gemma3():
    d = os.path.join(OUT, "gemma3")
    shutil.rmtree(d, ignore_errors=True)
    src = os.path.join(d, "model")
    os.makedirs(src)
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    tok = spm_tokenizer(360, specials)
    tok.save(os.path.join(src, "tokenizer.json"))
    n = tok.get_vocab_size()
    eot = tok.token_to_id("<end_of_turn>")
    cfg = Gemma3TextConfig(
        vocab_size=n,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=512,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    torch.manual_seed(SEED)
    model = Gemma3ForCausalLM(cfg)
    randomize(model, 0.5)
    model = model.to(torch.bfloat16)
    model.save_pretrained(src)
    for extra in ("chat_template.jinja", "generation_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            os.remove(os.path.join(src, extra))
    write_json(
        os.path.join(src, "tokenizer_config.json"),
        {
            "add_bos_token": True,
            "add_eos_token": False,
            "bos_token": "<bos>",
            "chat_template": GEMMA_CHAT,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<eos>",
            "model_max_length": 512,
            "pad_token": "<pad>",
            "spaces_between_special_tokens": False,
            "tokenizer_class": "GemmaTokenizer",
            "unk_token": "<unk>",
            "use_default_system_prompt": False,
        },
    )
    write_json(
        os.path.join(src, "generation_config.json"),
        {
            "bos_token_id": 2,
            "cache_implementation": "hybrid",
            "do_sample": True,
            "eos_token_id": [1, eot],
            "pad_token_id": 0,
            "top_k": 64,
            "top_p": 0.95,
            "transformers_version": "4.55.0",
        },
    )
    expected = {}
    for k, v in model.state_dict().items():
        w = v.float().numpy()
        if k.endswith("norm.weight"):
            w = np.float32(1) + w
        expected[k] = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    expected.pop("lm_head.weight", None)  # tied: not written
    save_expected(d, expected)
    save_logits(d, model, n)


def make_qwen3():
    d = os.path.join(OUT, "qwen3")
    shutil.rmtree(d, ignore_errors=True)
    src = os.path.join(d, "model")
    os.makedirs(src)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = byte_level_tokenizer(QWEN2_REGEX, 300, specials, ["<think>", "</think>"])
    tok.save(os.path.join(src, "tokenizer.json"))
    n = tok.get_vocab_size()
    eot, im_end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    cfg = Qwen3Config(
        vocab_size=n,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=eot,
        eos_token_id=im_end,
    )
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(cfg)
    randomize(model, 0.5)
    model.save_pretrained(src)
    if os.path.exists(os.path.join(src, "generation_config.json")):
        os.remove(os.path.join(src, "generation_config.json"))
    with open(os.path.join(src, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(QWEN_CHAT)
    write_json(
        os.path.join(src, "tokenizer_config.json"),
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "tokenizer_class": "Qwen2Tokenizer"},
    )
    write_json(os.path.join(src, "generation_config.json"), {"do_sample": False, "eos_token_id": [im_end, eot]})
    expected = f32_state(model)
    expected.pop("lm_head.weight", None)  # tied: not written
    save_expected(d, expected)
    save_logits(d, model, n)


def make_llama_spm():
    d = os.path.join(OUT, "llama_spm")
    shutil.rmtree(d, ignore_errors=True)
    src = os.path.join(d, "model")
    os.makedirs(src)
    tok = spm_tokenizer(330, ["<unk>", "<s>", "</s>"], bos="<s>", prepend=True)
    tok.save(os.path.join(src, "tokenizer.json"))
    n = tok.get_vocab_size()
    cfg = LlamaConfig(
        vocab_size=n,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg)
    randomize(model, 0.5)
    model = model.to(torch.bfloat16)
    model.save_pretrained(src)
    for extra in ("chat_template.jinja", "generation_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            os.remove(os.path.join(src, extra))
    write_json(
        os.path.join(src, "tokenizer_config.json"),
        {
            "add_bos_token": True,
            "add_eos_token": False,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "legacy": True,
            "pad_token": None,
            "tokenizer_class": "LlamaTokenizer",
            "unk_token": "<unk>",
        },
    )
    save_expected(d, f32_state(model))
    save_logits(d, model, n)


def make_llama_fused():
    d = os.path.join(OUT, "llama_fused")
    shutil.rmtree(d, ignore_errors=True)
    src = os.path.join(d, "model")
    os.makedirs(src)
    tok = byte_level_tokenizer(
        LLAMA3_REGEX, 300, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], [], bos="<|begin_of_text|>"
    )
    tok.save(os.path.join(src, "tokenizer.json"))
    n = tok.get_vocab_size()
    bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|end_of_text|>")
    cfg = LlamaConfig(
        vocab_size=n,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg)
    randomize(model, 0.5)
    model = model.to(torch.float16)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    fused = {}
    for k, v in state.items():
        if k.endswith("self_attn.q_proj.weight"):
            p = k[: -len("q_proj.weight")]
            fused[p + "qkv_proj.weight"] = torch.cat(
                [state[p + "q_proj.weight"], state[p + "k_proj.weight"], state[p + "v_proj.weight"]]
            )
        elif k.endswith("mlp.gate_proj.weight"):
            p = k[: -len("gate_proj.weight")]
            fused[p + "gate_up_proj.weight"] = torch.cat([state[p + "gate_proj.weight"], state[p + "up_proj.weight"]])
        elif not any(k.endswith(s) for s in ("k_proj.weight", "v_proj.weight", "up_proj.weight")):
            fused[k] = v
    save_file(fused, os.path.join(src, "model.safetensors"), metadata={"format": "pt"})
    write_json(
        os.path.join(src, "config.json"),
        {
            "architectures": ["LlamaForCausalLM"],
            "attention_bias": False,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "hidden_act": "silu",
            "hidden_size": 32,
            "intermediate_size": 64,
            "max_position_embeddings": 256,
            "mlp_bias": False,
            "model_type": "llama",
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-05,
            "rope_scaling": {
                "factor": 8.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 128,
                "rope_type": "llama3",
            },
            "rope_theta": 500000.0,
            "tie_word_embeddings": True,
            "torch_dtype": "float16",
            "vocab_size": n,
        },
    )
    write_json(
        os.path.join(src, "tokenizer_config.json"),
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "model_max_length": 256},
    )
    save_expected(d, {k: v.float() for k, v in state.items()})
    save_logits(d, model, n)


ENCODE_TEXTS = [
    "Hello world",
    " leading space and  double  spaces",
    "The capital of France is Paris.\n\nNew line\tand tab",
    "numbers 1234567 3.14159",
    "naïve café 日本語 Русский 😀👍🏽",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nWho?<end_of_turn>",
    "def f(x):\n    return x ** 2  # ok",
    "[CLS] UNaffable [SEP] héllo",
    "   ",
    "don't won't I'll",
]


def write_encode_cases(folder, out_path, check_auto=True):
    """Ids of ENCODE_TEXTS from the `tokenizers` package (padding and truncation off), with and
    without the post-processor's special tokens. With `check_auto`, transformers' AutoTokenizer
    must agree; it is off for the legacy Llama-2 layout, whose normalizer transformers 5
    replaces by its own Metaspace (it then does not prepend "▁" to text that starts with a
    space, while the file's Prepend, sentencepiece and llama.cpp do)."""
    from transformers import AutoTokenizer

    raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    raw.no_padding()
    raw.no_truncation()
    auto = AutoTokenizer.from_pretrained(folder) if check_auto else None
    cases = []
    for text in ENCODE_TEXTS:
        ids = raw.encode(text, add_special_tokens=False).ids
        ids_special = raw.encode(text, add_special_tokens=True).ids
        if auto is not None:
            assert ids == auto(text, add_special_tokens=False)["input_ids"], (folder, text)
            assert ids_special == auto(text, add_special_tokens=True)["input_ids"], (folder, text)
        cases.append({"text": text, "ids": ids, "ids_special": ids_special})
    write_json(out_path, cases)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def make_minilm(models_dir):
    path = os.path.join(models_dir, "minilm", "model.safetensors")
    tensors = load_np(path)
    out = {}
    for name, v in sorted(tensors.items()):
        if v.dtype != np.float32:
            continue  # buffers such as embeddings.position_ids (int64) are not weights
        out[name] = {
            "shape": list(v.shape),
            "f32": sha(np.ascontiguousarray(v, dtype="<f4").tobytes()),
            "f16": sha(np.ascontiguousarray(v.astype(np.float16), dtype="<f2").tobytes()),
        }
    write_json(os.path.join(OUT, "minilm.json"), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.environ.get("CYB_MODELS_DIR", os.path.join(".cache", "models")))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    make_qwen2()
    make_gemma3()
    make_qwen3()
    make_llama_fused()
    make_llama_spm()
    make_minilm(args.models_dir)
    for name in ("qwen2", "qwen3", "gemma3", "llama_fused", "llama_spm"):
        folder = os.path.join(OUT, name, "model")
        write_encode_cases(folder, os.path.join(OUT, name, "encode.json"), check_auto=name != "llama_spm")
    write_encode_cases(os.path.join(args.models_dir, "minilm"), os.path.join(OUT, "minilm_encode.json"))


if __name__ == "__main__":
    main()
