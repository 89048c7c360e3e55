#!/usr/bin/env python3
"""Reference perplexities for tests/perplexity.rs, from llama.cpp's own tool.

For each model (SmolLM2-135M-Instruct Q4_1, Gemma-3-270M Q4_K_M and the qwen2
test model; fetched or made by scripts/fetch-models.sh) it runs `llama-perplexity`
(built by scripts/build-llamacpp.sh from the llama-cpp-python 0.3.36 sdist) on
the same GGUF and text (llama.cpp's tools/perplexity/README.md from that sdist,
`scripts/fetch-models.sh ppltext`) with llama-perplexity's defaults but for the
chunk count and threads, and writes tests/fixtures/perplexity/llamacpp.json:
the command, llama-perplexity's version, the text's SHA-256, the running estimate
after each chunk and the final `PPL = x +/- y`.

Run: python3 scripts/make_perplexity_fixtures.py   (standard library only)
"""
import hashlib
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("CYB_MODELS_DIR", os.path.join(ROOT, ".cache/models"))
BIN = os.path.join(ROOT, ".cache/llama.cpp-build/cmake/bin/llama-perplexity")
OUT = os.path.join(ROOT, "tests/fixtures/perplexity/llamacpp.json")
TEXT = os.path.join(MODELS, "texts/llama-perplexity-README.md")
CTX = 512
CHUNKS = 4

SPECS = {
    "smollm2": "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma3/gemma-3-270m-q4_k_m.gguf",
    "qwen2": "qwen2/qwen2-test.gguf",
}


def run(model):
    args = [BIN, "-m", os.path.join(MODELS, SPECS[model]), "-f", TEXT,
            "-c", str(CTX), "--chunks", str(CHUNKS), "-t", "2"]
    p = subprocess.run(args, capture_output=True, text=True)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        raise SystemExit(f"llama-perplexity failed on {model}:\n{log}")
    final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
    if not final:
        raise SystemExit(f"no final estimate for {model}:\n{log}")
    chunks = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+),", log)]
    if len(chunks) != CHUNKS:
        raise SystemExit(f"{model}: {len(chunks)} chunk estimates, expected {CHUNKS}:\n{log}")
    return {
        "command": " ".join(["llama-perplexity"] + args[1:]).replace(ROOT + "/", ""),
        "perplexity": float(final.group(1)),
        "stderr": float(final.group(2)),
        "per_chunk": chunks,
    }


def main():
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True)
    with open(TEXT, "rb") as f:
        text_sha = hashlib.sha256(f.read()).hexdigest()
    doc = {
        "about": "llama-perplexity (llama.cpp from the llama-cpp-python 0.3.36 sdist) on the "
                 "real test models; made by scripts/make_perplexity_fixtures.py",
        "llama_perplexity_version": (version.stdout + version.stderr).strip().splitlines(),
        "text": "llama_cpp_python-0.3.36/vendor/llama.cpp/tools/perplexity/README.md",
        "text_sha256": text_sha,
        "ctx": CTX,
        "chunks": CHUNKS,
        "models": {m: run(m) for m in SPECS},
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
