#!/usr/bin/env python3
"""Reference fixtures for the text-generation tests (tests/generate_*.rs).

For each model (SmolLM2-135M-Instruct Q4_1, Gemma-3-270M Q4_K_M, and the qwen2
test model of scripts/make_qwen2_gguf.py: real Qwen2 vocabulary, random weights;
all fetched or made by scripts/fetch-models.sh) it writes tests/fixtures/llm/<model>/:

- hf_rows.safetensors: Hugging Face transformers (f32, loading the same GGUF with
  `gguf_file=`, dequantized) logits of one long prompt (ROWS_PROMPT, 120+ tokens):
  `ids` (i64, the prompt with the tokenizer's special tokens), `positions` (i64)
  and `logits` (f32 [positions, vocab], whole rows) at ROW_POSITIONS and the last
  position; and `llamacpp_rel_err` (f32 [positions]): llama.cpp's own distance from
  those rows, max |llama.cpp - transformers| / max |transformers| (llama.cpp fed the
  prompt up to each position, its ids checked equal), the envelope an engine with
  8-bit activations reaches on the row.
- llamacpp.json: greedy continuations of 32 tokens from llama.cpp (built by
  scripts/build-llamacpp.sh from the llama-cpp-python 0.3.36 sdist) for 5 prompts,
  raw and chat-templated: prompt ids, generated ids and llama.cpp's top-2 gap per
  step, `eog` (the end-of-generation token llama.cpp stopped on, with its step's
  gap) when it stopped before 32 tokens, and at every step (the eog step too) the
  top-2 ids and gap of transformers' f32 logits on the same tokens (the model's
  exact definition, to tell near-ties of the model from rounding). The ids come
  from scripts/llamacpp_greedy.cpp (llama.cpp's library, argmax over its logits);
  the script checks that their text equals what `llama-completion --temp 0`
  prints for the same prompt (an immediate stop: that it printed nothing).

Run: .cache/venv/bin/python scripts/make_llm_fixtures.py [--rows-only] [smollm2|gemma3|qwen2 ...]
(--rows-only rewrites hf_rows.safetensors alone)
(needs torch, transformers, accelerate, gguf; CI only reads the JSON files).
"""
import json
import os
import subprocess
import sys

import gguf
import numpy as np
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("CYB_MODELS_DIR", os.path.join(ROOT, ".cache/models"))
BIN = os.path.join(ROOT, ".cache/llama.cpp-build/cmake/bin")
OUT = os.path.join(ROOT, "tests/fixtures/llm")
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

# The prompt of the whole-row logits check (raw text, the tokenizer's own special tokens
# added): prose, code and digits, long enough for positions past 100.
ROWS_PROMPT = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman who "
    "counted the waves every morning. He wrote the numbers 3, 17, 42 and 1024 in a notebook "
    "and kept it under his bed. One day a stranger asked him why. He answered with a short "
    "program:\n\ndef fibonacci(n):\n    if n < 2:\n        return n\n    return "
    "fibonacci(n - 1) + fibonacci(n - 2)\n\nThe stranger laughed, because the capital of "
    "France is Paris, and nothing about waves had anything to do with it. Still, the old man "
    "kept counting, and by the end of the summer the notebook was full"
)
# Positions of ROWS_PROMPT whose rows are recorded, besides the last one.
ROW_POSITIONS = (0, 37, 100)

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


def llamacpp_row_errors(tok, path, ids, positions, logits):
    """llama.cpp's relative distance from transformers' row at each position."""
    bos = 1 if tok.bos_token_id is not None and ids[0] == tok.bos_token_id else 0
    dump = os.path.join(OUT, ".row.f32")
    errors = []
    for i, p in enumerate(positions):
        run = subprocess.run(
            [os.path.join(BIN, "llamacpp-greedy"), "-m", path, "-n", "1", "-t", "2", *LLAMACPP_KV_FLAGS, "-d", dump],
            input=tok.decode(ids[bos : p + 1]).encode(),
            capture_output=True,
            check=True,
        )
        if json.loads(run.stdout)["prompt_ids"] != ids[: p + 1]:
            raise SystemExit(f"{path}: llama.cpp tokenizes the first {p + 1} tokens of ROWS_PROMPT differently")
        row = torch.from_numpy(np.fromfile(dump, dtype=np.float32))
        ref = logits[i]
        errors.append(((row - ref).abs().max() / ref.abs().max()).item())
    os.remove(dump)
    return torch.tensor(errors, dtype=torch.float32)


def hf_rows(d, f):
    """The model, its tokenizer and transformers' whole logit rows of ROWS_PROMPT."""
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    ids = tok(ROWS_PROMPT, add_special_tokens=True).input_ids
    if len(ids) <= 110:
        raise SystemExit(f"{f}: ROWS_PROMPT is only {len(ids)} tokens; the check needs rows past 100")
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    positions = [*ROW_POSITIONS, len(ids) - 1]
    rows = {
        "ids": torch.tensor(ids, dtype=torch.int64),
        "positions": torch.tensor(positions, dtype=torch.int64),
        "logits": logits[positions].float().contiguous(),
    }
    rows["llamacpp_rel_err"] = llamacpp_row_errors(tok, os.path.join(d, f), ids, positions, rows["logits"])
    print(f"  llama.cpp vs transformers per row: {rows['llamacpp_rel_err'].tolist()}", file=sys.stderr)
    meta = {
        "source": f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
        f"{f} loaded with gguf_file= in float32",
    }
    return tok, model, rows, meta


def hf_top2(model, prompt_ids, tokens, steps):
    """transformers' f32 top-2 (ids, gap) at the first `steps` steps of llama.cpp's path
    (`steps` is len(tokens), plus one for the step that picked the eog token)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + tokens])).logits[0].double()
    out = []
    for s in range(steps):
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
            printed = completion.replace("[end of text]", "").strip()
            same_text = text.strip() in completion if text.strip() else not printed
            if not same_text:
                raise SystemExit(
                    f"{name} {mode} {user!r}: llamacpp-greedy text {text!r} is not what "
                    f"llama-completion --temp 0 printed: {completion!r}"
                )
            if "eog" not in ref and len(ref["tokens"]) != N_PREDICT:
                raise SystemExit(f"{name} {mode} {user!r}: llamacpp-greedy stopped early without an eog token")
            steps = len(ref["tokens"]) + ("eog" in ref)
            ref["hf_top2"] = hf_top2(model, ref["prompt_ids"], ref["tokens"], steps)
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
    args = sys.argv[1:]
    rows_only = "--rows-only" in args
    names = [a for a in args if a != "--rows-only"] or list(SPECS)
    for name in names:
        sub, f = SPECS[name]
        d = os.path.join(MODELS, sub)
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        print(f"{name}: transformers logit rows", file=sys.stderr)
        tok, model, rows, meta = hf_rows(d, f)
        save_file(rows, os.path.join(out, "hf_rows.safetensors"), metadata=meta)
        if rows_only:
            continue
        print(f"{name}: llama.cpp continuations", file=sys.stderr)
        cont = llamacpp(name, tok, model, os.path.join(d, f))
        with open(os.path.join(out, "llamacpp.json"), "w") as fh:
            json.dump(cont, fh, indent=1)


if __name__ == "__main__":
    main()
