//! Tokenizers of real imported models against Hugging Face.
//!
//! References: tests/fixtures/tokenizer/*.json, written by scripts/make_tokenizer_fixtures.py
//! (transformers' tokenizer built from the GGUF for SmolLM2 and Gemma 3; the `tokenizers`
//! library on tokenizer.json for all-MiniLM-L6-v2). Each model is imported into a `.model`
//! file, loaded, and its tokenizer built with `Tokenizer::from_model`. Models come from
//! `$CYB_MODELS_DIR` (default `.cache/models`; scripts/fetch-models.sh).

use cyb_llm::import::{self, ImportOptions};
use cyb_llm::tokenizer::{Kind, Tokenizer};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn source(rel: &str) -> PathBuf {
    let p = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"))
        .join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
        p.display()
    );
    p
}

fn check(label: &str, kind: Kind) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/tokenizer/{label}.json"));
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let src = source(fx["source"].as_str().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.model");
    import::import(&src, &out, &ImportOptions::default()).unwrap();
    let model = cyb_llm::load(&out).unwrap();
    let tok = Tokenizer::from_model(&model).unwrap();
    assert_eq!(tok.kind(), kind);
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let mut failed = Vec::new();
    let cases = fx["cases"].as_array().unwrap();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let (plain, special) = (ids(&c["ids"]), ids(&c["ids_special"]));
        let got = tok.encode(text, false).unwrap();
        if got != plain {
            failed.push(format!("{text:?}: expected {plain:?}, got {got:?}"));
        }
        let got = tok.encode(text, true).unwrap();
        if got != special {
            failed.push(format!(
                "{text:?} with specials: expected {special:?}, got {got:?}"
            ));
        }
        if kind != Kind::WordPiece && tok.decode(&plain, false) != text {
            failed.push(format!(
                "{text:?}: decodes to {:?}",
                tok.decode(&plain, false)
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{label}: {} of {} checks fail:\n{}",
        failed.len(),
        cases.len() * 3,
        failed.join("\n")
    );
}

#[test]
fn smollm2_gguf_matches_transformers() {
    check("smollm2", Kind::Bpe);
}

#[test]
fn gemma3_gguf_matches_transformers() {
    check("gemma3-270m", Kind::Spm);
}

#[test]
fn minilm_hf_matches_tokenizers() {
    check("minilm", Kind::WordPiece);
}
