//! Whole-model parity of the wgpu backend (lavapipe in CI): SmolLM2's greedy
//! 16 tokens through `cyb-llm run --backend wgpu` equal those of the CPU
//! reference library (`--backend reference`, the arbiter; the fast cpu
//! backend is held to the same reference by its own tests).
//! No Vulkan adapter fails the test (the run exits with `BackendInit`).

mod generate_util;

use generate_util::model_path;
use std::process::Command;

fn greedy_text(model: &str, backend: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .args([
            "run",
            model,
            "--prompt",
            "What is the capital of France?",
            "--temp",
            "0",
            "-n",
            "16",
            "-t",
            "2",
            "--json",
            "--backend",
            backend,
        ])
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "--backend {backend}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["text"].as_str().unwrap().to_string()
}

#[test]
fn smollm2_greedy_16_tokens_equal_reference() {
    let m = model_path("smollm2");
    let m = m.to_str().unwrap();
    let reference = greedy_text(m, "reference");
    let gpu = greedy_text(m, "wgpu");
    assert!(!reference.trim().is_empty());
    assert_eq!(gpu, reference, "wgpu and reference greedy outputs differ");
}
