//! The terrain consistency UNet of `adaptive-terrain-diffusion` (ONNX, opset
//! 18, 2103 nodes), imported and run by `cyb-llm eval`, against onnxruntime's
//! outputs for the same inputs (tests/fixtures/onnx/unet, made by
//! tests/onnx/make_unet_fixtures.py): max |diff| <= 1e-3 on batches of 1, 2
//! and 3 with mixed noise levels and labels, on cpu (1 and 2 threads),
//! reference and wgpu (lavapipe in CI; a missing adapter fails the test), where
//! every node runs on wgpu (no dispatch fallback).

mod onnx_util;

use onnx_util::{eval_fixture, eval_run, fixture_diff, unet_model};

const TOLERANCE: f32 = 1e-3;

/// Runs `cyb-llm eval` on case `case` with `args`; the max |diff| of `denoised`.
fn eval_case(case: &str, args: &[&str]) -> f32 {
    let inputs = ["noisy", "sigma", "difficulty"];
    eval_fixture(unet_model(), "unet", case, &inputs, "denoised", args).0
}

#[test]
fn unet_on_cpu_matches_onnxruntime_for_every_batch() {
    for threads in ["1", "2"] {
        for case in ["b1", "b2", "b3"] {
            let d = eval_case(case, &["--backend", "cpu", "-t", threads]);
            assert!(
                d <= TOLERANCE,
                "{case} on cpu -t {threads}: max |diff| {d:e}"
            );
        }
    }
}

#[test]
fn unet_on_reference_matches_onnxruntime() {
    let d = eval_case("b1", &["--backend", "reference"]);
    assert!(d <= TOLERANCE, "reference: max |diff| {d:e}");
}

#[test]
fn unet_on_wgpu_matches_onnxruntime_with_every_node_on_wgpu() {
    std::env::set_var("NODEVICE_SELECT", "1");
    let inputs = ["noisy", "sigma", "difficulty"];
    let args = ["--backend", "wgpu", "-t", "2", "--dispatch"];
    let (out, stderr) = eval_run(unet_model(), "unet", "b2", &inputs, &args);
    // Convolutions, norms, attention products, layout copies, resizes and pools
    // all run there: a node that falls back to the cpu fails this.
    assert!(stderr.contains("(fallbacks: 0)"), "{stderr}");
    let d = fixture_diff(&out, "unet", "b2", "denoised", &args).0;
    assert!(d <= TOLERANCE, "wgpu: max |diff| {d:e}");
}

#[test]
fn unet_fused_and_unfused_both_match_onnxruntime() {
    // The fusion pass rewrites the exported group norms (Reshape, InstanceNormalization,
    // Reshape, Mul, Add -> GroupNormAffine), x * sigmoid(x) (-> Silu), then each norm with
    // its time-embedding Mul and Add and its Silu (-> FusedGroupNorm), each attention's
    // BatchMatmul, Softmax, BatchMatmul (-> FusedAttention), and each convolution with the
    // residual Add after it (-> FusedConvAdd).
    let inputs = ["noisy", "sigma", "difficulty"];
    let args = ["--backend", "cpu", "-t", "2", "--timings"];
    let (_, stderr) = eval_run(unet_model(), "unet", "b1", &inputs, &args);
    assert!(stderr.contains("(475 fused groups)"), "{stderr}");
    let fused = eval_case("b2", &["--backend", "cpu", "-t", "2"]);
    let unfused = eval_case("b2", &["--backend", "cpu", "-t", "2", "--no-fuse"]);
    assert!(
        fused <= TOLERANCE && unfused <= TOLERANCE,
        "fused {fused:e}, unfused {unfused:e}"
    );
}
