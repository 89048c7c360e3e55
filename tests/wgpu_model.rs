//! Whole-model parity of the wgpu backend (lavapipe in CI): SmolLM2's greedy
//! 16 tokens through `cyb-llm run --backend wgpu` on f32 activations
//! (`CYB_WGPU_ACTIVATIONS=f32`, the parity path) equal those of the CPU
//! reference library (`--backend reference`, the arbiter; the fast cpu
//! backend is held to the same reference by its own tests).
//!
//! The dispatch summary (`--dispatch`) proves where the ops ran: every op of
//! the wgpu run on wgpu (a cpu fallback, of one op or of the whole forward,
//! would otherwise pass; measured: 1954 of 1954), every op of the reference
//! run on `reference`.
//! No Vulkan adapter fails the test (the run exits with `BackendInit`).

mod generate_util;

use generate_util::model_path;
use std::collections::BTreeMap;
use std::process::Command;

/// The greedy text and the ops run per backend (`dispatch: ops: ...` line).
fn greedy_text(model: &str, backend: &str) -> (String, BTreeMap<String, usize>) {
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
            "--dispatch",
            "--backend",
            backend,
        ])
        .env("NODEVICE_SELECT", "1")
        .env("CYB_WGPU_ACTIVATIONS", "f32")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "--backend {backend}: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let summary = stderr
        .lines()
        .find_map(|l| l.strip_prefix("dispatch: ops: "))
        .unwrap_or_else(|| panic!("--backend {backend}: no dispatch summary in {stderr}"));
    eprintln!("--backend {backend}: ops: {summary}");
    let counts = summary
        .split(" (fallbacks")
        .next()
        .unwrap()
        .split(", ")
        .map(|part| {
            let (name, n) = part.rsplit_once(' ').unwrap();
            (name.to_string(), n.parse().unwrap())
        })
        .collect();
    (doc["text"].as_str().unwrap().to_string(), counts)
}

#[test]
fn smollm2_greedy_16_tokens_equal_reference() {
    let m = model_path("smollm2");
    let m = m.to_str().unwrap();
    let (reference, ref_ops) = greedy_text(m, "reference");
    let (gpu, gpu_ops) = greedy_text(m, "wgpu");
    assert!(!reference.trim().is_empty());
    assert_eq!(gpu, reference, "wgpu and reference greedy outputs differ");
    let total = |ops: &BTreeMap<String, usize>| ops.values().sum::<usize>();
    assert!(total(&ref_ops) > 0);
    assert_eq!(
        ref_ops.get("reference"),
        Some(&total(&ref_ops)),
        "--backend reference ran ops elsewhere: {ref_ops:?}"
    );
    assert!(total(&gpu_ops) > 0);
    assert_eq!(
        gpu_ops.get("wgpu"),
        Some(&total(&gpu_ops)),
        "--backend wgpu ran ops elsewhere: {gpu_ops:?}"
    );
}
