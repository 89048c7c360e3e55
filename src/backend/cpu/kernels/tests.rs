//! Kernels against dequantize-then-dot (the reference: `crate::quant::dequantize` and an f64
//! sum), on both paths, every supported dtype and awkward shapes.
//!
//! Two checks per case. (1) ops.md's metric `max|y - ref| / max(max|ref|, 1e-6)`, at most 1e-5
//! for float weights and 1e-2 for the integer-activation kernels; with very few outputs a
//! random dot product can be far smaller than its terms, so the denominator is floored at the
//! largest `sqrt(sum_k (W[n,k] x[k])^2)` (the typical size of one), and for the quantized
//! kernels the metric is applied from 17 outputs on (below that it measures luck). (2) For
//! every output, a hard bound: rounding each activation to 8 bits moves it by at most half a
//! step, `max|x over its block| / 254`, so `|y - ref| <= sum_k |W[n,k]| * step_k / 2` (plus f32
//! rounding).

use super::*;
use crate::quant::dequantize;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn paths() -> Vec<KernelPath> {
    let mut p = vec![KernelPath::Portable];
    if cfg!(target_arch = "x86_64") {
        // Every x86-64 machine this project runs on has AVX2; fail rather than skip if not.
        assert!(KernelPath::Avx2.available(), "AVX2+FMA+F16C not detected");
        p.push(KernelPath::Avx2);
        if KernelPath::Avx512Vnni.available() {
            p.push(KernelPath::Avx512Vnni);
        }
    }
    if cfg!(target_arch = "aarch64") {
        assert!(KernelPath::Neon.available(), "NEON not available");
        p.push(KernelPath::Neon);
        if dotprod_expected() {
            p.push(KernelPath::NeonDot);
        }
    }
    p
}

/// Whether this aarch64 CPU has `sdot`. scripts/test-aarch64.sh runs the tests on emulated CPUs
/// with and without it and says which through `CYB_LLM_EXPECT_DOTPROD` (1 or 0), so that
/// detection is checked too and neither path is skipped unnoticed.
fn dotprod_expected() -> bool {
    let detected = KernelPath::NeonDot.available();
    if let Ok(v) = std::env::var("CYB_LLM_EXPECT_DOTPROD") {
        assert_eq!(
            detected,
            v == "1",
            "dotprod detection vs CYB_LLM_EXPECT_DOTPROD={v}"
        );
    }
    detected
}

/// Random weights `[n, k]`: random payload bytes with f16 scales in -1..1 for block
/// encodings, random values in -1..1 for float encodings.
fn weights(rng: &mut ChaCha8Rng, dtype: DType, n: usize, k: usize) -> Vec<u8> {
    let blocks = n * k / dtype.block_values();
    let bb = dtype.block_bytes();
    let mut w = vec![0u8; blocks * bb];
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let v: Vec<f32> = (0..n * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
            w = crate::quant::quantize(dtype, &v).unwrap();
        }
        _ => {
            rng.fill(&mut w[..]);
            for b in w.chunks_exact_mut(bb) {
                for &o in dtype.f16_scale_offsets() {
                    let s = half::f16::from_f32(rng.gen_range(-1.0..1.0));
                    b[o..o + 2].copy_from_slice(&s.to_le_bytes());
                }
            }
        }
    }
    w
}

/// What a kernel's output is checked against.
struct Expected {
    y: Vec<f32>,
    /// The largest root of the sum of squared terms of one output.
    typical: f64,
    /// Per output, the largest error 8-bit activations can cause (0 for float weights).
    bound: Vec<f64>,
}

fn reference(dtype: DType, w: &[u8], n: usize, k: usize, x: &[f32], m: usize) -> Expected {
    let wf = dequantize(dtype, w, None).unwrap();
    let act_block = if dtype.block_values() == 256 { 256 } else { 32 };
    let half_steps: Vec<f64> = x
        .chunks(act_block)
        .flat_map(|b| {
            let amax = b.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64;
            std::iter::repeat_n(amax / 254.0, b.len())
        })
        .collect();
    let mut e = Expected {
        y: vec![0.0; m * n],
        typical: 0.0,
        bound: vec![0.0; m * n],
    };
    for i in 0..m {
        for r in 0..n {
            let (mut s, mut sq, mut abs, mut b) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for c in 0..k {
                let (wv, xv) = (wf[r * k + c] as f64, x[i * k + c] as f64);
                s += wv * xv;
                sq += (wv * xv).powi(2);
                abs += (wv * xv).abs();
                b += wv.abs() * half_steps[i * k + c];
            }
            e.y[i * n + r] = s as f32;
            e.typical = e.typical.max(sq.sqrt());
            e.bound[i * n + r] = if dtype.is_quantized() { b * 1.001 } else { 0.0 } + abs * 1e-5;
        }
    }
    e
}

fn rel_error(y: &[f32], r: &[f32], floor: f64) -> f64 {
    let max_ref = r.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
    let max_err = y
        .iter()
        .zip(r)
        .fold(0.0f64, |m, (a, b)| m.max((*a as f64 - *b as f64).abs()));
    max_err / max_ref.max(floor).max(1e-6)
}

fn tolerance(dtype: DType) -> f64 {
    if dtype.is_quantized() {
        1e-2
    } else {
        1e-5
    }
}

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

fn check(rng: &mut ChaCha8Rng, dtype: DType, n: usize, k: usize, m: usize) {
    let w = weights(rng, dtype, n, k);
    let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let want = reference(dtype, &w, n, k, &x, m);
    for path in paths() {
        let mut y = vec![f32::NAN; m * n];
        matmul_with(path, dtype, &w, n, k, &x, m, None, &mut y);
        let e = rel_error(&y, &want.y, want.typical);
        assert!(
            e <= tolerance(dtype) || (dtype.is_quantized() && n < 17),
            "{dtype} {path:?} n={n} k={k} m={m}: relative error {e:e}"
        );
        for (j, ((&got, &r), &bound)) in y.iter().zip(&want.y).zip(&want.bound).enumerate() {
            let err = (got as f64 - r as f64).abs();
            assert!(
                err <= bound,
                "{dtype} {path:?} n={n} k={k} m={m} output {j}: {got} vs {r} (bound {bound:e})"
            );
        }
    }
}

#[test]
fn matvec_matches_reference_on_awkward_shapes() {
    let sizes = [1, 3, 17, 255, 4097];
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for dtype in DType::MATMUL_WEIGHTS {
        for &n in &sizes {
            for &k in &sizes {
                let k = round_up(k, dtype.block_values());
                if n * k > 1 << 21 {
                    continue;
                }
                check(&mut rng, dtype, n, k, 1);
            }
        }
    }
}

#[test]
fn matmul_matches_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    for dtype in DType::MATMUL_WEIGHTS {
        for (n, k, m) in [(3, 17, 2), (17, 255, 17), (255, 3, 5), (33, 600, 40)] {
            check(&mut rng, dtype, n, round_up(k, dtype.block_values()), m);
        }
    }
}

#[test]
fn largest_shape_matches_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for dtype in [DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4K, DType::Q6K] {
        check(
            &mut rng,
            dtype,
            4097,
            round_up(4097, dtype.block_values()),
            1,
        );
    }
}

#[test]
fn the_paths_agree_with_each_other() {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for dtype in DType::MATMUL_WEIGHTS {
        let (n, k, m) = (19, round_up(700, dtype.block_values()), 3);
        let w = weights(&mut rng, dtype, n, k);
        let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let outs: Vec<Vec<f32>> = paths()
            .into_iter()
            .map(|p| {
                let mut y = vec![0.0; m * n];
                matmul_with(p, dtype, &w, n, k, &x, m, None, &mut y);
                y
            })
            .collect();
        for o in &outs[1..] {
            // Same integer sums; only the f32 summation order differs.
            assert!(
                rel_error(o, &outs[0], 0.0) <= 1e-5,
                "{dtype}: paths disagree"
            );
        }
    }
}

#[test]
fn non_finite_activations_give_nan() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    for dtype in [DType::Q4_0, DType::Q4K] {
        let k = 256;
        let w = weights(&mut rng, dtype, 2, k);
        let mut x = vec![0.5f32; k];
        x[7] = f32::INFINITY;
        for path in paths() {
            let mut y = vec![0.0; 2];
            matmul_with(path, dtype, &w, 2, k, &x, 1, None, &mut y);
            assert!(y.iter().all(|v| v.is_nan()), "{dtype} {path:?}: {y:?}");
        }
    }
}

#[test]
fn supports_exactly_the_matmul_encodings() {
    for dtype in DType::ALL {
        assert_eq!(
            supports(dtype),
            DType::MATMUL_WEIGHTS.contains(&dtype),
            "{dtype}"
        );
    }
}

#[test]
fn force_portable_switches_the_active_path() {
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let (n, k) = (5, 64);
    let w = weights(&mut rng, DType::Q8_0, n, k);
    let x: Vec<f32> = (0..k).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let env_portable = std::env::var("CYB_LLM_PORTABLE_KERNELS").is_ok_and(|v| v == "1");
    let best = if env_portable {
        KernelPath::Portable
    } else if KernelPath::Avx512Vnni.available() {
        KernelPath::Avx512Vnni
    } else if cfg!(target_arch = "x86_64") {
        KernelPath::Avx2
    } else if cfg!(target_arch = "aarch64") && dotprod_expected() {
        KernelPath::NeonDot
    } else if cfg!(target_arch = "aarch64") {
        KernelPath::Neon
    } else {
        KernelPath::Portable
    };
    for (force, path) in [(true, KernelPath::Portable), (false, best)] {
        set_force_portable(force);
        assert_eq!(active_path(), path);
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        matvec(DType::Q8_0, &w, n, k, &x, &mut a);
        matmul_with(path, DType::Q8_0, &w, n, k, &x, 1, None, &mut b);
        assert_eq!(a, b);
    }
}

/// The four-row and panel kernels on awkward shapes: weight rows not a multiple of 4 or 8,
/// one activation row, 4..7 rows (four-row kernels), 8 and more (panels), against the
/// reference and against the portable path. The k-quant panels (`maddubs` and VNNI forms) keep
/// the portable kernels' arithmetic (exact i32 sums, then the same f32 operations in the same
/// order), so they must match them bit for bit; the 32-value encodings' VNNI and `maddubs` forms (panels, and the
/// four-row matrix-vector kernels against the AVX2 row kernels) must match each other bit for
/// bit (same i32 sums, same f32 operations).
#[test]
fn multi_row_kernels_match_portable() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let dtypes = [
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ];
    let shapes = [
        (1, 1),
        (13, 1),
        (30, 1),
        (7, 4),
        (13, 7),
        (1, 8),
        (13, 9),
        (8, 16),
        (29, 33),
        // Several batches of k-quant panels (the last one short) against chunks of rows.
        (150, 70),
    ];
    for dtype in dtypes {
        for (n, m) in shapes {
            let k = round_up(520, dtype.block_values());
            check(&mut rng, dtype, n, k, m);
            let w = weights(&mut rng, dtype, n, k);
            let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let outs: Vec<Vec<f32>> = paths()
                .into_iter()
                .map(|p| {
                    let mut y = vec![f32::NAN; m * n];
                    matmul_with(p, dtype, &w, n, k, &x, m, None, &mut y);
                    y
                })
                .collect();
            let avx2 = paths().iter().position(|&p| p == KernelPath::Avx2);
            let typical = reference(dtype, &w, n, k, &x, m).typical;
            for (o, path) in outs.iter().zip(paths()).skip(1) {
                #[cfg(target_arch = "x86_64")]
                let panel = use_panel(path, dtype, m);
                #[cfg(not(target_arch = "x86_64"))]
                let panel = false;
                if panel && dtype.block_values() == 256 {
                    assert_eq!(
                        o, &outs[0],
                        "{dtype} {path:?} n={n} m={m}: panel vs portable"
                    );
                } else if (panel || m == 1)
                    && path == KernelPath::Avx512Vnni
                    && dtype.block_values() == 32
                {
                    let a = &outs[avx2.unwrap()];
                    assert_eq!(o, a, "{dtype} n={n} m={m}: VNNI vs AVX2 kernels");
                } else {
                    // Against the outputs' typical size: one output's sum can cancel.
                    let e = rel_error(o, &outs[0], typical);
                    assert!(
                        e <= 1e-5,
                        "{dtype} {path:?} n={n} m={m}: paths differ by {e:e}"
                    );
                }
            }
        }
    }
}
