//! The Piper VITS voice `en_US-joe-medium` (ONNX, opset 15, 2755 nodes: run-time
//! integer shape arithmetic, NonZero / GatherND / ScatterND in the stochastic
//! duration predictor, a data-dependent output length), imported and run by
//! `cyb-llm eval`, against onnxruntime's outputs for the same inputs
//! (tests/fixtures/onnx/piper, made by tests/onnx/make_piper_fixtures.py):
//! `scales = [0, 1, 0]` (the noise is multiplied by 0), same number of samples,
//! max |diff| <= 1e-3, for three sentences of different lengths and a batch of
//! two padded ones (input_lengths masks the padding), on cpu (1 and 2 threads)
//! and reference (the shortest sentence and the batch: the reference loops take
//! about 10 s per sentence).

mod onnx_util;

use onnx_util::{fixture, max_abs_diff, piper_model, read_npy, scratch_dir};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

const TOLERANCE: f32 = 1e-3;

/// Runs `cyb-llm eval` on case `case` with `args`; the max |diff| of `output`.
fn eval_case(case: &str, args: &[&str]) -> f32 {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run_id = RUNS.fetch_add(1, Ordering::Relaxed);
    let out = scratch_dir().join(format!("eval-{case}-{run_id}"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cyb-llm"));
    cmd.arg("eval").arg(piper_model());
    for input in ["input", "input_lengths", "scales"] {
        let f = fixture(&format!("piper/{case}_{input}.npy"));
        cmd.arg("--input").arg(format!("{input}={}", f.display()));
    }
    let run = cmd
        .arg("--output-dir")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "eval {case} {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (shape, got) = read_npy(&out.join("output.npy"));
    let (want_shape, want) = read_npy(&fixture(&format!("piper/{case}_output.npy")));
    assert_eq!(shape, want_shape, "{case} {args:?}: output shape (samples)");
    let d = max_abs_diff(&got, &want);
    eprintln!("piper {case} {args:?}: max |diff| vs onnxruntime {d:.3e}");
    d
}

#[test]
fn piper_on_cpu_matches_onnxruntime_for_every_sentence() {
    for threads in ["1", "2"] {
        for case in ["s0", "s1", "s2", "b2"] {
            let d = eval_case(case, &["--backend", "cpu", "-t", threads]);
            assert!(
                d <= TOLERANCE,
                "{case} on cpu -t {threads}: max |diff| {d:e}"
            );
        }
    }
}

#[test]
fn piper_on_reference_matches_onnxruntime() {
    for case in ["s0", "b2"] {
        let d = eval_case(case, &["--backend", "reference"]);
        assert!(d <= TOLERANCE, "{case} on reference: max |diff| {d:e}");
    }
}
