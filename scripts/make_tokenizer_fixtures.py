#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/*.json, the references of tests/tokenizer_models.rs.

Not run by CI; the outputs are committed. Run from the repository root with a Python that has
`transformers` and `tokenizers` (e.g. .cache/venv):

    python scripts/make_tokenizer_fixtures.py [MODELS_DIR]

MODELS_DIR defaults to $CYB_MODELS_DIR or .cache/models (scripts/fetch-models.sh fills it).

References, independent of the Rust code:
- SmolLM2 and Gemma 3 GGUFs: the tokenizer Hugging Face transformers builds from the GGUF
  (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`);
- all-MiniLM-L6-v2: its own tokenizer.json through the `tokenizers` library (padding and
  truncation off).
For each text: the ids without and with special tokens (bos / [CLS] [SEP]).
"""

import json
import os
import sys

from tokenizers import Tokenizer
from transformers import AutoTokenizer

OUT_DIR = os.path.join("tests", "fixtures", "tokenizer")

TEXTS = [
    "",
    " ",
    "Hello world",
    " Hello world",
    "Hello World!",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nmany",
    "What is the capital of France?",
    "The quick brown fox jumps over the lazy dog. 1234567890 3.14159",
    "I've been 'there' - he'll say: \"we'd\", DON'T",
    "Ünïcödé façade naïve café, Straße",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "Привет, мир! Γειά σου Κόσμε",
    "emoji 🦙🔥👩‍👩‍👧 and symbols ∑∫√ ≠ ≤",
    "code: def f(x):\n    return x ** 2  # square\n",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "[CLS] already [SEP] marked [MASK] text",
    "URL https://example.com/a?b=c&d=e#f and email a.b@c.de",
    "a" * 40 + " " + "ab" * 30,
]


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CYB_MODELS_DIR", ".cache/models")
    os.makedirs(OUT_DIR, exist_ok=True)
    sources = [
        ("smollm2", "gguf", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("gemma3-270m", "gguf", "gemma3", "gemma-3-270m-q4_k_m.gguf"),
        ("minilm", "hf", "minilm", None),
    ]
    for label, kind, folder, file in sources:
        path = os.path.join(models_dir, folder)
        if kind == "gguf":
            tok = AutoTokenizer.from_pretrained(path, gguf_file=file)

            def encode(s, special, tok=tok):
                return tok.encode(s, add_special_tokens=special)

        else:
            tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
            tok.no_padding()
            tok.no_truncation()

            def encode(s, special, tok=tok):
                return tok.encode(s, add_special_tokens=special).ids

        cases = [{"text": s, "ids": encode(s, False), "ids_special": encode(s, True)} for s in TEXTS]
        source = os.path.join(folder, file) if file else folder
        with open(os.path.join(OUT_DIR, f"{label}.json"), "w", encoding="utf-8") as f:
            f.write('{\n"source": %s,\n"cases": [\n' % json.dumps(source))
            f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
            f.write("\n]\n}\n")
        print(label, len(cases), file=sys.stderr)


if __name__ == "__main__":
    main()
