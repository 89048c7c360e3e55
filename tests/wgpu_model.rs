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
//!
//! Greedy decoding on wgpu picks each token on the device and queues the next
//! forward before reading the pick back (`Backend::argmax_on_device`); a
//! chat of two turns (the first ending on the stop token, whose forward is
//! taken back out of the cache) gives the same tokens, text and history as
//! the host's pick (top-k 1 at temperature 1, which samples on the host).

mod generate_util;

use cyb_llm::backend::BackendChoice;
use cyb_llm::generate::{Finish, LoadOptions, Message, Prompt, Sampling, TextModel};
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

/// Two chat turns on one generator: (text, finish) of each, then the history.
fn two_turns(
    tm: &std::sync::Arc<TextModel>,
    sampling: &Sampling,
) -> (Vec<(String, Finish)>, Vec<u32>) {
    let mut g = tm.generator().unwrap();
    let mut messages = vec![Message::new("user", "What is 2+2?")];
    let mut turns = Vec::new();
    for next in ["And 3+3?", ""] {
        let mut gen = g
            .generate(Prompt::Chat(messages.clone()), Some(16), sampling)
            .unwrap();
        let text: String = gen.by_ref().map(|p| p.unwrap().text).collect();
        turns.push((text.clone(), gen.finish().unwrap()));
        drop(gen);
        messages.push(Message::new("assistant", &text));
        messages.push(Message::new("user", next));
        if next.is_empty() {
            break;
        }
    }
    (turns, g.history().to_vec())
}

#[test]
fn device_greedy_pick_equals_the_host_pick_across_chat_turns() {
    let opts = LoadOptions {
        backend: BackendChoice::Named("wgpu".into()),
        threads: 2,
        ctx_size: 512,
        ..LoadOptions::default()
    };
    let tm = TextModel::load(model_path("smollm2"), &opts).unwrap();
    let host_pick = Sampling {
        temperature: 1.0,
        top_k: 1,
        ..Sampling::greedy()
    };
    let (device_turns, device_history) = two_turns(&tm, &Sampling::greedy());
    let (host_turns, host_history) = two_turns(&tm, &host_pick);
    eprintln!("device pick: {device_turns:?}");
    assert_eq!(
        device_turns[0].1,
        Finish::Stop,
        "the first turn should end on the stop token"
    );
    assert_eq!(device_turns, host_turns);
    assert_eq!(device_history, host_history);
}
