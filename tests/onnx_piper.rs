//! The Piper VITS voice `en_US-joe-medium` (ONNX, opset 15, 2755 nodes: run-time
//! integer shape arithmetic, NonZero / GatherND / ScatterND in the stochastic
//! duration predictor, a data-dependent output length), imported and run by
//! `cyb-llm eval`, against onnxruntime's outputs for the same inputs
//! (tests/fixtures/onnx/piper, made by tests/onnx/make_piper_fixtures.py):
//! `scales = [0, 1, 0]` (the noise is multiplied by 0), same number of samples,
//! max |diff| <= 1e-3, for three sentences of different lengths and a batch of
//! two padded ones (input_lengths masks the padding), on cpu (1 and 2 threads)
//! and reference (the shortest sentence and the batch: the reference loops take
//! about 10 s per sentence). On nox the output is the same bytes with 1 and 2
//! threads. On wgpu (lavapipe in CI; no adapter fails the test) the graph runs
//! with the integer and index ops on the cpu, each such node a dispatch record
//! with the reason it fell back; of the nodes on f32 values only the host
//! constants, the duration predictor's CumSum / Compare / Cast and the noise
//! draws fall back (counted, so a node that leaves wgpu fails the test).

mod onnx_util;

use cyb_llm::backend::{BackendChoice, Tensor};
use cyb_llm::graph::{GraphModel, GraphOptions};
use onnx_util::{
    eval_fixture, eval_run, fixture, max_abs_diff, piper_model, read_npy, read_npy_i64,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const TOLERANCE: f32 = 1e-3;

/// Runs `cyb-llm eval` on case `case` with `args`; the max |diff| of `output`
/// and the bytes of the `.npy` file written.
fn eval_output(case: &str, args: &[&str]) -> (f32, Vec<u8>) {
    let inputs = ["input", "input_lengths", "scales"];
    eval_fixture(piper_model(), "piper", case, &inputs, "output", args)
}

/// The max |diff| of `output` for case `case` run with `args`.
fn eval_case(case: &str, args: &[&str]) -> f32 {
    eval_output(case, args).0
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
fn piper_fused_and_unfused_both_match_onnxruntime() {
    // The fusion pass folds each decoder convolution's residual Add into it
    // (-> FusedConvAdd), and the LeakyRelu before it where the convolution is its only
    // reader (HiFi-GAN's residual blocks: 9 of the decoder's 16; the others feed three
    // blocks or a transposed convolution).
    let inputs = ["input", "input_lengths", "scales"];
    let args = ["--backend", "cpu", "-t", "2", "--profile"];
    let (_, stderr) = eval_run(piper_model(), "piper", "s1", &inputs, &args);
    let nodes = |op: &str| {
        stderr
            .lines()
            .find(|l| l.starts_with(&format!("profile: {op} ")))
            .and_then(|l| l.split_whitespace().rev().nth(3)?.parse::<usize>().ok())
    };
    assert_eq!(nodes("FusedConvAdd"), Some(47), "{stderr}");
    assert_eq!(nodes("LeakyRelu"), Some(7), "{stderr}");
    // The sums of the residual blocks' outputs (two `Add`s per upsampling stage, three
    // stages) join the last convolution of a block as its second addend: 184 - 6 `Add`s.
    assert_eq!(nodes("Add"), Some(178), "{stderr}");
    for args in [
        &["--backend", "cpu"][..],
        &["--backend", "cpu", "--no-fuse"],
    ] {
        let d = eval_case("s1", args);
        assert!(d <= TOLERANCE, "s1 {args:?}: max |diff| {d:e}");
    }
}

#[test]
fn piper_on_reference_matches_onnxruntime() {
    for case in ["s0", "b2"] {
        let d = eval_case(case, &["--backend", "reference"]);
        assert!(d <= TOLERANCE, "{case} on reference: max |diff| {d:e}");
    }
}

#[test]
fn piper_on_nox_is_bit_identical_across_thread_counts() {
    let (d1, one) = eval_output("s0", &["--backend", "nox", "-t", "1"]);
    let (d2, two) = eval_output("s0", &["--backend", "nox", "-t", "2"]);
    assert!(one == two, "nox output differs between 1 and 2 threads");
    assert!(d1 <= TOLERANCE && d2 <= TOLERANCE, "nox: max |diff| {d1:e}");
}

#[test]
fn piper_on_wgpu_runs_the_value_ops_and_falls_back_for_the_index_ops() {
    std::env::set_var("NODEVICE_SELECT", "1");
    let model = Arc::new(cyb_llm::load(piper_model()).unwrap());
    let opts = GraphOptions {
        keep_dispatch: true,
        ..Default::default()
    };
    let choice = BackendChoice::parse("wgpu").unwrap();
    let gm = Arc::new(GraphModel::with_backend(model, choice, 2, opts).expect("wgpu backend"));
    let ints = |name: &str| {
        let (shape, v) = read_npy_i64(&fixture(&format!("piper/s0_{name}.npy")));
        Tensor::from_i64(&shape, v).unwrap()
    };
    let (sshape, scales) = read_npy(&fixture("piper/s0_scales.npy"));
    let inputs = [
        ints("input"),
        ints("input_lengths"),
        Tensor::from_f32(&sshape, scales).unwrap(),
    ];
    let mut session = gm.session().unwrap();
    let out = session.run(&inputs, 0).unwrap();
    let got = gm.dispatcher().primary().try_download_f32(&out[0]).unwrap();
    let (want_shape, want) = read_npy(&fixture("piper/s0_output.npy"));
    assert_eq!(out[0].shape(), want_shape.as_slice(), "wgpu: output shape");
    let d = max_abs_diff(&got, &want);
    assert!(d <= TOLERANCE, "wgpu: max |diff| {d:e}");
    let records = session.context().log.records();
    let on_wgpu = records.iter().filter(|r| r.backend == "wgpu").count();
    for op in ["NonZero", "GatherNd", "ScatterNd", "Compare"] {
        let r = records
            .iter()
            .find(|r| r.op == op)
            .unwrap_or_else(|| panic!("no {op} dispatch record"));
        assert_eq!(r.backend, "cpu", "{r}");
        assert!(r.fallback.is_some(), "{r} fell back without a reason");
    }
    // Every node on f32 values runs on wgpu but these: the constants made on the
    // host (Fill, Range), the duration predictor's CumSum, its comparisons (bool
    // results) and Cast (to i64), and the noise draws (RandomNormalLike).
    let mut on_values = BTreeMap::new();
    for r in records.iter().filter(|r| r.backend != "wgpu") {
        let reason = r.fallback.as_deref().unwrap_or_default();
        if !reason.contains("i64") && !reason.contains("bool") {
            *on_values.entry(r.op).or_insert(0) += 1;
        }
    }
    let want = [
        ("Cast", 1),
        ("Compare", 11),
        ("CumSum", 7),
        ("Fill", 46),
        ("RandomNormalLike", 2),
        ("Range", 33),
    ];
    assert_eq!(on_values, BTreeMap::from(want), "f32 nodes off wgpu");
    eprintln!(
        "piper wgpu: max |diff| {d:.3e}, {on_wgpu} of {} nodes on wgpu",
        records.len()
    );
}
