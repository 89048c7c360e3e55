#!/usr/bin/env python3
"""Chat-template fixtures: transformers' `apply_chat_template` on every real template we ship
tests for, written to tests/fixtures/chat/templates.json for tests/chat_templates.rs.

Run from the repository root after scripts/fetch-models.sh (models under $CYB_MODELS_DIR,
default .cache/models), in a venv with transformers, gguf and jinja2:

    .cache/venv/bin/python scripts/make_chat_fixtures.py

Templates:
- the real models' GGUFs (SmolLM2-135M-Instruct, the qwen2 test model of
  scripts/make_qwen2_gguf.py): tokenizer = AutoTokenizer.from_pretrained(dir, gguf_file=...),
  rendered with tokenizer.apply_chat_template(...) as it is;
- Gemma-3 270m: its GGUF has no `tokenizer.chat_template` (transformers' tokenizer has none
  and cannot apply one), so the runtime uses its gemma preset (tokenizer.md). Recorded with
  `template: null`; the expected text of every conversation is llama.cpp's built-in `gemma`
  template (llama_chat_apply_template through scripts/llamacpp_chat.cpp, built by
  scripts/build-llamacpp.sh: system text folded into the first user turn, contents trimmed),
  with `<bos>` in front;
- the llama.cpp vocabulary GGUFs with a template (llama-vocab/: phi-3, qwen2, command-r,
  gemma-4; real templates of those models; gemma-4's tokenizer is one the runtime does not
  load, so only its template is used; qwen35's template is qwen2's, and its pre-tokenizer
  is one the runtime does not load either): rendered with
  tokenizer.apply_chat_template(chat_template=<the GGUF's template>, bos_token=, eos_token=
  <the GGUF's bos/eos token texts>) on the SmolLM2 tokenizer (only the renderer is used).

Each conversation is rendered with add_generation_prompt true and false; where the template
raises (e.g. roles that do not alternate) the error is recorded and our renderer must fail too.
"""

import json
import os
import subprocess
import sys
from importlib.metadata import version

import gguf
import jinja2
import transformers
from transformers import AutoTokenizer

MODELS = os.environ.get("CYB_MODELS_DIR", ".cache/models")
LLAMACPP_BIN = os.path.join(os.environ.get("CYB_LLAMACPP_BUILD", ".cache/llama.cpp-build"), "cmake/bin")
OUT = "tests/fixtures/chat/templates.json"

CONVERSATIONS = [
    ("user", [("user", "What is the capital of France?")]),
    ("system_user", [("system", "You are a terse geography tutor."), ("user", "What is the capital of France?")]),
    (
        "multi_turn",
        [
            ("user", "Hi!"),
            ("assistant", "Hello! How can I help you today?"),
            ("user", "Name three rivers in Europe."),
        ],
    ),
    (
        "system_multi_turn",
        [
            ("system", "Answer in one sentence."),
            ("user", "What is 2 + 2?"),
            ("assistant", "2 + 2 is 4."),
            ("user", "And 3 + 3?"),
        ],
    ),
    ("ends_with_assistant", [("user", "Say hi."), ("assistant", "Hi.")]),
    ("whitespace_unicode", [("user", "  Ünïcödé — 日本語\nwith a second line.  \n")]),
    ("two_users", [("user", "First question."), ("user", "Second question.")]),
]

# (name, GGUF under MODELS, how): "model" = AutoTokenizer from the GGUF itself,
# "vocab" = the GGUF's template and special tokens on transformers' renderer; "template" =
# the same for a vocabulary the runtime does not load (gemma4 tokenizer): only our
# renderer is checked on its template.
SOURCES = [
    ("smollm2", "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "model"),
    ("qwen2", "qwen2/qwen2-test.gguf", "model"),
    ("gemma3", "gemma3/gemma-3-270m-q4_k_m.gguf", "model"),
    ("vocab-phi-3", "llama-vocab/ggml-vocab-phi-3.gguf", "vocab"),
    ("vocab-qwen2", "llama-vocab/ggml-vocab-qwen2.gguf", "vocab"),
    ("vocab-command-r", "llama-vocab/ggml-vocab-command-r.gguf", "vocab"),
    ("vocab-gemma-4", "llama-vocab/ggml-vocab-gemma-4.gguf", "template"),
]


def gguf_str(reader, key):
    """A string field of a GGUF, or None."""
    f = reader.fields.get(key)
    return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8")


def gguf_token(reader, key):
    """The text of the token whose id is in `key`, or None."""
    f = reader.fields.get(key)
    if f is None:
        return None
    tokens = reader.fields["tokenizer.ggml.tokens"]
    tid = int(f.parts[f.data[0]][0])
    return bytes(tokens.parts[tokens.data[tid]]).decode("utf-8")


def llamacpp_gemma(messages, add_generation_prompt):
    """llama.cpp's built-in `gemma` template (scripts/llamacpp_chat.cpp), with the BOS text
    its tokenizer adds in front."""
    tool = os.path.join(LLAMACPP_BIN, "llamacpp-chat")
    if not os.access(tool, os.X_OK):
        raise SystemExit(f"{tool} is missing: run scripts/build-llamacpp.sh")
    stdin = b"".join(r.encode() + b"\0" + c.encode() + b"\0" for r, c in messages)
    out = subprocess.run([tool, "gemma", "1" if add_generation_prompt else "0"], input=stdin,
                         capture_output=True, check=True)
    return "<bos>" + out.stdout.decode("utf-8")


def render(apply, messages, add_generation_prompt):
    """One fixture row: the rendered text, or the error the template raised."""
    conv = [{"role": r, "content": c} for r, c in messages]
    try:
        return {"text": apply(conv, add_generation_prompt)}
    except Exception as e:  # the template's raise_exception (jinja2 TemplateError)
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    renderer = AutoTokenizer.from_pretrained(os.path.join(MODELS, "smollm2"), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    templates = []
    for name, rel, how in SOURCES:
        path = os.path.join(MODELS, rel)
        reader = gguf.GGUFReader(path)
        entry = {"name": name, "gguf": rel, "kind": how}
        if how == "model":
            tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
            template = tok.chat_template
            if template != gguf_str(reader, "tokenizer.chat_template"):
                raise SystemExit(f"{name}: transformers' template is not the GGUF's")

            def apply(conv, gen, tok=tok):
                return tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)

        else:
            template = gguf_str(reader, "tokenizer.chat_template")
            bos = gguf_token(reader, "tokenizer.ggml.bos_token_id")
            eos = gguf_token(reader, "tokenizer.ggml.eos_token_id")
            entry.update({"bos_token": bos, "eos_token": eos})

            def apply(conv, gen, template=template, bos=bos, eos=eos):
                return renderer.apply_chat_template(
                    conv, chat_template=template, tokenize=False, add_generation_prompt=gen, bos_token=bos, eos_token=eos
                )

        entry["template"] = template
        rows = []
        for conv_name, messages in CONVERSATIONS:
            for gen in (True, False):
                if template is None:
                    if name != "gemma3":
                        raise SystemExit(f"{name}: the GGUF has no chat template")
                    row = {"text": llamacpp_gemma(messages, gen)}
                else:
                    row = render(apply, messages, gen)
                rows.append({"conversation": conv_name, "add_generation_prompt": gen, **row})
        entry["renders"] = rows
        templates.append(entry)
        errors = sum("error" in r for r in rows)
        print(f"{name}: {len(rows)} renders ({errors} template errors)", file=sys.stderr)
    doc = {
        "source": f"transformers {transformers.__version__} apply_chat_template (jinja2 {jinja2.__version__}), "
        f"gguf-py {version('gguf')}; gemma3: llama.cpp's built-in gemma template (llama-cpp-python 0.3.36 "
        "sdist, scripts/llamacpp_chat.cpp); scripts/make_chat_fixtures.py",
        "conversations": [{"name": n, "messages": [{"role": r, "content": c} for r, c in m]} for n, m in CONVERSATIONS],
        "templates": templates,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
