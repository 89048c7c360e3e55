//! Helpers shared by the BertStyle tests: the fixtures of
//! `scripts/make_bert_fixtures.py`, the real all-MiniLM-L6-v2 folder
//! (`scripts/fetch-models.sh minilm`) imported once per test binary, and the
//! classifier folder assembled from MiniLM's files plus the committed head.

#![allow(dead_code)]

#[path = "../scratch/mod.rs"]
mod scratch;

use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher};
use cyb_llm::curated::bert::Hidden;
use cyb_llm::encode::Encoder;
use cyb_llm::import::{import, ImportOptions};
use safetensors::SafeTensors;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// `tests/fixtures/bert`.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bert")
}

/// A fixture JSON file.
pub fn fixture(name: &str) -> Value {
    let path = fixtures().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `$CYB_MODELS_DIR` or `.cache/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("CYB_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"),
    }
}

/// The all-MiniLM-L6-v2 folder; fails (never skips) when it was not fetched.
pub fn minilm_folder() -> PathBuf {
    let src = models_dir().join("minilm");
    assert!(
        src.join("model.safetensors").is_file(),
        "{} is missing: run `scripts/fetch-models.sh minilm` first (or set CYB_MODELS_DIR)",
        src.display()
    );
    src
}

/// Imports the Hugging Face folder `src` as `name` in a new temporary directory.
pub fn import_to(src: &Path, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(name);
    import(src, &out, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("import of {} failed: {e}", src.display()));
    (dir, out)
}

/// Imports the Hugging Face folder `src` as `name` into this test binary's scratch folder.
fn import_to_scratch(src: &Path, name: &str) -> PathBuf {
    let out = scratch::scratch_dir().join(name);
    import(src, &out, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("import of {} failed: {e}", src.display()));
    out
}

/// The MiniLM `.model`, imported once per test binary.
pub fn minilm_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| import_to_scratch(&minilm_folder(), "minilm.model"))
        .clone()
}

/// A BertForSequenceClassification folder at MiniLM's shape: MiniLM's
/// weights and tokenizer, the fixture's config.json and seeded random
/// classifier head; imported once per test binary.
pub fn classifier_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let src = minilm_folder();
            let folder = tempfile::tempdir().unwrap();
            for f in [
                "tokenizer.json",
                "tokenizer_config.json",
                "special_tokens_map.json",
                "vocab.txt",
            ] {
                std::fs::copy(src.join(f), folder.path().join(f)).unwrap();
            }
            std::fs::copy(
                fixtures().join("classifier/config.json"),
                folder.path().join("config.json"),
            )
            .unwrap();
            let base = std::fs::read(src.join("model.safetensors")).unwrap();
            let head = std::fs::read(fixtures().join("classifier/head.safetensors")).unwrap();
            let base = SafeTensors::deserialize(&base).unwrap();
            let head = SafeTensors::deserialize(&head).unwrap();
            let all: Vec<(String, safetensors::tensor::TensorView<'_>)> =
                base.tensors().into_iter().chain(head.tensors()).collect();
            safetensors::serialize_to_file(all, &None, &folder.path().join("model.safetensors"))
                .unwrap();
            import_to_scratch(folder.path(), "classifier.model")
        })
        .clone()
}

/// An encoder on the cpu backend with `threads` threads.
pub fn encoder(path: &Path, threads: usize) -> Encoder {
    let model = cyb_llm::load(path).unwrap_or_else(|e| panic!("load: {e}"));
    let config = BackendConfig { threads };
    let dispatcher = Dispatcher::new(BackendChoice::Named("cpu".into()), &config).unwrap();
    Encoder::new(Arc::new(model), dispatcher).unwrap()
}

/// A JSON array of strings.
pub fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

/// A JSON array of arrays of token ids.
pub fn id_rows(v: &Value) -> Vec<Vec<u32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

/// Asserts that the states of the real tokens of every row of `h` are within 1e-4
/// (relative error) of `want` (per row, the flattened `[len, hidden]` states).
pub fn assert_hidden_matches(h: &Hidden, rows: &[Vec<u32>], want: &Value) {
    for (b, r) in rows.iter().enumerate() {
        let got: Vec<f32> = (0..r.len())
            .flat_map(|i| h.token(b, i).unwrap().to_vec())
            .collect();
        let e = rel_err(&got, &floats(&want[b]));
        assert!(e < 1e-4, "row {b}: relative error {e}");
    }
}

/// transformers' last hidden state of sentence `i` of minilm_embeddings.json
/// (`minilm_hidden.safetensors`): the `[tokens, 384]` values, row-major, and the
/// token count.
pub fn minilm_hidden(i: usize) -> (Vec<f32>, usize) {
    let path = fixtures().join("minilm_hidden.safetensors");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st
        .tensor(&format!("hidden_{i}"))
        .unwrap_or_else(|e| panic!("{}: sentence {i}: {e}", path.display()));
    assert_eq!((t.dtype(), t.shape()[1]), (safetensors::Dtype::F32, 384));
    let values = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (values, t.shape()[0])
}

/// A JSON array of numbers as f32.
pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Cosine similarity (f64 accumulation).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// `max |a - b| / max(max |b|, 1e-6)` (ops.md's relative error).
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0f32, f32::max).max(1e-6);
    diff / scale
}
