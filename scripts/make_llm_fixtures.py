#!/usr/bin/env python3
"""Reference fixtures for the text-generation tests (tests/generate_*.rs).

For each model (SmolLM2-135M-Instruct Q4_1, Gemma-3-270M Q4_K_M, and the qwen2
test model of scripts/make_qwen2_gguf.py: real Qwen2 vocabulary, random weights;
all fetched or made by scripts/fetch-models.sh) it writes tests/fixtures/llm/<model>/:

- hf_logits.json: Hugging Face transformers (f32, loading the same GGUF with
  `gguf_file=`, dequantized) logits of 3 prompts at several positions: the top-k
  ids and values, and statistics of the whole row (absmax, mean, std, argmax).
- llamacpp.json: greedy continuations of 32 tokens from llama.cpp (built by
  scripts/build-llamacpp.sh from the llama-cpp-python 0.3.36 sdist) for 5 prompts,
  raw and chat-templated: prompt ids, generated ids and llama.cpp's top-2 gap per
  step, and at every step the top-2 ids and gap of transformers' f32 logits on the
  same tokens (the model's exact definition, to tell whose rounding flipped a
  token where we and llama.cpp differ). The ids come from scripts/llamacpp_greedy.cpp (llama.cpp's library, argmax
  over its logits); the script checks that their text equals what
  `llama-completion --temp 0` prints for the same prompt.

Run: .cache/venv/bin/python scripts/make_llm_fixtures.py [smollm2|gemma3|qwen2 ...]
(needs torch, transformers, accelerate, gguf; CI only reads the JSON files).
"""
import json
import os
import subprocess
import sys

import gguf
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("CYB_MODELS_DIR", os.path.join(ROOT, ".cache/models"))
BIN = os.path.join(ROOT, ".cache/llama.cpp-build/cmake/bin")
OUT = os.path.join(ROOT, "tests/fixtures/llm")
TOP_K = 16
# llama.cpp with the KV cache in f32 and without flash attention (llama-completion's
# `-ctk f32 -ctv f32 -fa off`), as cyb-llm keeps it: its default f16 cache and f16 value
# accumulation alone move logits by the 8-bit activation noise and split greedy paths at
# near-ties that its own f32 configuration does not.
LLAMACPP_KV_FLAGS = ("-kv", "f32", "-fa", "off")
N_PREDICT = 32

SPECS = {
    "smollm2": ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3": ("gemma3", "gemma-3-270m-q4_k_m.gguf"),
    "qwen2": ("qwen2", "qwen2-test.gguf"),
}

# Prompts for the logits check (raw text, the tokenizer's own special tokens added).
LOGIT_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
]

# Prompts for the continuation check, each run raw and chat-templated.
CONTINUATION_PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the ocean.",
    "List three primary colors.",
    "The first man on the moon was",
    "Explain what a CPU does in one sentence.",
]


def chat_text(tok, name, user):
    """The chat-templated prompt: the model's template, or the gemma preset (tokenizer.md)."""
    if tok.chat_template:
        return tok.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
    if name == "gemma3":
        return f"<bos><start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"
    raise SystemExit(f"{name}: no chat template")


def hf_logits(name, d, f):
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    cases = []
    for text in LOGIT_PROMPTS:
        ids = tok(text, add_special_tokens=True).input_ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double()
        n = len(ids)
        positions = sorted({0, n // 3, (2 * n) // 3, n - 1})
        rows = []
        for p in positions:
            row = logits[p]
            vals, idx = row.topk(TOP_K)
            rows.append(
                {
                    "position": p,
                    "top_ids": idx.tolist(),
                    "top_logits": [round(v, 6) for v in vals.tolist()],
                    "absmax": row.abs().max().item(),
                    "mean": row.mean().item(),
                    "std": row.std(unbiased=False).item(),
                }
            )
        cases.append({"prompt": text, "ids": ids, "rows": rows})
    return tok, model, {
        "source": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
        f"{f} loaded with gguf_file= in float32",
        "top_k": TOP_K,
        "cases": cases,
    }


def hf_top2(model, prompt_ids, tokens):
    """transformers' f32 top-2 (ids, gap) at each generated step of llama.cpp's path."""
    if not tokens:
        return []
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + tokens])).logits[0].double()
    out = []
    for s in range(len(tokens)):
        vals, idx = logits[len(prompt_ids) - 1 + s].topk(2)
        out.append({"ids": idx.tolist(), "gap": round((vals[0] - vals[1]).item(), 6)})
    return out


def adds_bos(path):
    """The GGUF's tokenizer.ggml.add_bos_token (llama.cpp's default when absent: true)."""
    field = gguf.GGUFReader(path).fields.get("tokenizer.ggml.add_bos_token")
    return True if field is None else bool(field.parts[field.data[0]][0])


def llamacpp(name, tok, model, path):
    add_bos = adds_bos(path)
    cases = []
    for user in CONTINUATION_PROMPTS:
        for mode in ("raw", "chat"):
            prompt = user if mode == "raw" else chat_text(tok, name, user)
            if add_bos and tok.bos_token and prompt.startswith(tok.bos_token):
                # llama.cpp adds BOS itself (add_bos), as the runtime does: not twice.
                prompt = prompt[len(tok.bos_token):]
            run = subprocess.run(
                [os.path.join(BIN, "llamacpp-greedy"), "-m", path, "-n", str(N_PREDICT), "-t", "2", *LLAMACPP_KV_FLAGS],
                input=prompt.encode(),
                capture_output=True,
                check=True,
            )
            ref = json.loads(run.stdout)
            completion = subprocess.run(
                [
                    os.path.join(BIN, "llama-completion"), "-m", path, "-p", prompt, "-n", str(N_PREDICT),
                    "--temp", "0", "-no-cnv", "-t", "2", "-c", "512", "--no-warmup", "--no-display-prompt",
                    "-ctk", "f32", "-ctv", "f32", "-fa", "off",
                ],
                capture_output=True,
                check=True,
            ).stdout.decode("utf-8", "replace")
            text = tok.decode(ref["tokens"], skip_special_tokens=True)
            if text.strip() not in completion:
                raise SystemExit(
                    f"{name} {mode} {user!r}: llamacpp-greedy text {text!r} is not what "
                    f"llama-completion --temp 0 printed: {completion!r}"
                )
            ref["hf_top2"] = hf_top2(model, ref["prompt_ids"], ref["tokens"])
            cases.append({"prompt": prompt, "mode": mode, **ref, "text": text})
            print(f"  {mode:4} {user!r} -> {text!r}", file=sys.stderr)
    return {
        "source": "llama.cpp from llama-cpp-python 0.3.36 (vendor/llama.cpp), CPU, GGML_NATIVE=ON, "
        "KV cache f32, flash attention off; "
        "ids from scripts/llamacpp_greedy.cpp, text checked against llama-completion --temp 0; "
        "hf_top2 from transformers in float32 on the same tokens",
        "n_predict": N_PREDICT,
        "cases": cases,
    }


def main():
    names = sys.argv[1:] or list(SPECS)
    for name in names:
        sub, f = SPECS[name]
        d = os.path.join(MODELS, sub)
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        print(f"{name}: transformers logits", file=sys.stderr)
        tok, model, logits = hf_logits(name, d, f)
        with open(os.path.join(out, "hf_logits.json"), "w") as fh:
            json.dump(logits, fh, indent=1)
        print(f"{name}: llama.cpp continuations", file=sys.stderr)
        cont = llamacpp(name, tok, model, os.path.join(d, f))
        with open(os.path.join(out, "llamacpp.json"), "w") as fh:
            json.dump(cont, fh, indent=1)


if __name__ == "__main__":
    main()
