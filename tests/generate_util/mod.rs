//! Helpers shared by the text-generation tests: the real models of
//! ../shared/models.md and the qwen2 test model of scripts/make_qwen2_gguf.py
//! (fetched or made by scripts/fetch-models.sh, imported once per test binary),
//! the fixtures of scripts/make_llm_fixtures.py, and logit checks.

#![allow(dead_code)]

#[path = "../scratch/mod.rs"]
mod scratch;

use cyb_llm::backend::BackendChoice;
use cyb_llm::generate::{LoadOptions, TextModel};
use cyb_llm::import::{import, ImportOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// `$CYB_MODELS_DIR` or `.cache/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("CYB_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"),
    }
}

/// The GGUF of a real model; fails (never skips) when it was not fetched.
pub fn gguf(name: &str) -> PathBuf {
    let rel = match name {
        "smollm2" => "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma3" => "gemma3/gemma-3-270m-q4_k_m.gguf",
        "qwen2" => "qwen2/qwen2-test.gguf",
        other => panic!("unknown model {other}"),
    };
    let p = models_dir().join(rel);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/fetch-models.sh first (or set CYB_MODELS_DIR)",
        p.display()
    );
    p
}

/// Models imported so far by this test binary: name and `.model` path.
type ImportedModels = Mutex<Vec<(String, PathBuf)>>;

static IMPORTED: OnceLock<ImportedModels> = OnceLock::new();

/// The `.model` file of a real model, imported from its GGUF once per test binary.
pub fn model_path(name: &str) -> PathBuf {
    let all = IMPORTED.get_or_init(|| Mutex::new(Vec::new()));
    let mut all = all.lock().unwrap();
    if let Some((_, p)) = all.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let path = scratch::scratch_dir().join(format!("{name}.model"));
    import(&gguf(name), &path, &ImportOptions::default()).unwrap();
    all.push((name.to_string(), path.clone()));
    path
}

/// Load options of the tests: the cpu backend, 2 threads, 2048 tokens of context.
pub fn cpu_options() -> LoadOptions {
    LoadOptions {
        backend: BackendChoice::Named("cpu".into()),
        threads: 2,
        ctx_size: 2048,
        ..LoadOptions::default()
    }
}

/// The real model loaded for generation with [`cpu_options`].
pub fn text_model(name: &str) -> Arc<TextModel> {
    let opts = cpu_options();
    TextModel::load(model_path(name), &opts).unwrap()
}

/// A fixture of `tests/fixtures/llm/<model>/`.
pub fn fixture(model: &str, file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm")
        .join(model)
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Token ids of a JSON array.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// `(argmax, top-1 minus top-2)` of a logit row.
pub fn top2(row: &[f32]) -> (usize, f32) {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    let second = row
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != best)
        .map(|(_, &v)| v)
        .fold(f32::NEG_INFINITY, f32::max);
    (best, row[best] - second)
}

/// ops.md relative error: `max|y - ref| / max(max|ref|, 1e-6)`.
pub fn rel_err(y: &[f32], reference: &[f32]) -> f32 {
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    y.iter()
        .zip(reference)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()))
        / scale
}
