//! Tokenizer conformance against llama.cpp's vocabulary tests.
//!
//! llama.cpp ships vocab-only GGUFs (`models/ggml-vocab-*.gguf`) with test inputs
//! (`.gguf.inp`, cases separated by `\n__ggml_vocab_test__\n`) and the ids the original
//! Hugging Face tokenizer gives (`.gguf.out`, one line per case). They come from the
//! llama-cpp-python sdist (../shared/models.md); scripts/fetch-models.sh extracts them into
//! `$CYB_MODELS_DIR/llama-vocab/` (default `.cache/models/llama-vocab/`).
//!
//! Each vocabulary is imported through our GGUF reader and tokenized as llama.cpp's
//! test-tokenizer-0 does: no bos/eos, special tokens in the text not parsed.

use cyb_llm::import::gguf;
use cyb_llm::tokenizer::{Kind, Tokenizer};
use std::path::{Path, PathBuf};

fn vocab_dir() -> PathBuf {
    std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"))
        .join("llama-vocab")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
            path.display()
        )
    })
}

/// `(input, expected ids)` of every case, parsed as test-tokenizer-0.cpp does.
fn cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let dir = vocab_dir();
    let inp = read(&dir.join(format!("ggml-vocab-{name}.gguf.inp")));
    let out = read(&dir.join(format!("ggml-vocab-{name}.gguf.out")));
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut rest = inp.as_str();
    while !rest.is_empty() {
        match rest.find(sep) {
            Some(i) => {
                inputs.push(rest[..i].to_string());
                rest = &rest[i + sep.len()..];
            }
            None => {
                inputs.push(rest.to_string());
                rest = "";
            }
        }
    }
    let outputs: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{name}: .inp and .out disagree"
    );
    inputs.into_iter().zip(outputs).collect()
}

fn tokenizer(name: &str) -> Tokenizer {
    let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf"));
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
        path.display()
    );
    let v = gguf::read_vocab(&path).unwrap();
    Tokenizer::new(&v.vocab, &v.tokenizer).unwrap()
}

/// Runs every case of vocabulary `name`; returns the failures as readable lines.
fn failures(name: &str) -> (usize, Vec<String>) {
    let tok = tokenizer(name);
    let cases = cases(name);
    let mut failed = Vec::new();
    for (text, expected) in &cases {
        let got = tok.encode_with(text, false, false).unwrap();
        if &got != expected {
            failed.push(format!("{text:?}: expected {expected:?}, got {got:?}"));
            continue;
        }
        if tok.kind() == Kind::Bpe {
            let back = tok.decode(&got, false);
            if &back != text {
                failed.push(format!("{text:?}: decodes back to {back:?}"));
            }
        }
    }
    (cases.len(), failed)
}

fn check(name: &str) {
    let (total, failed) = failures(name);
    assert!(total > 0, "{name}: no cases");
    eprintln!("{name}: {} of {total} cases pass", total - failed.len());
    assert!(
        failed.is_empty(),
        "{name}: {} of {total} cases fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn llama_spm() {
    check("llama-spm");
}

#[test]
fn llama_bpe() {
    check("llama-bpe");
}

#[test]
fn qwen2() {
    check("qwen2");
}

#[test]
fn gpt_2() {
    check("gpt-2");
}

#[test]
fn bert_bge() {
    check("bert-bge");
}

#[test]
fn phi_3() {
    check("phi-3");
}

#[test]
fn deepseek_llm() {
    check("deepseek-llm");
}

#[test]
fn starcoder() {
    check("starcoder");
}

#[test]
fn unknown_pre_tokenizer_is_an_import_error_naming_it() {
    let path = vocab_dir().join("ggml-vocab-falcon.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-models.sh",
        path.display()
    );
    let err = gguf::read_vocab(&path).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.pre = \"falcon\""), "{err}");
}
