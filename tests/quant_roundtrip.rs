//! Quantizer accuracy (dequantize(quantize(x)) vs x) and quantizer input errors.
//!
//! quant.md's "tolerances of the formats themselves" (q8_0 1/256, q6_k 1/256, q4_k 1/64,
//! q4_0 1/32 of the block's max |value|) are tighter than the formats allow even with
//! gguf-py's / ggml's own quantizers, which ours reproduce byte for byte (tests/quant_gguf_py.rs):
//! q8_0's worst case is half a step (max/254) plus the f16 rounding of `d`, q4_0's is a
//! whole step (max/8, for the value opposite the block's extreme) plus 7/8 of the f16
//! rounding of `d`. So the bounds checked here are
//! the formats' own: the worst case per weight and the RMS error, relative to the block max.

use cyb_llm::quant::{dequantize, quantize, QuantError};
use cyb_llm::DType;
use rand::{Rng, SeedableRng};

/// Rows of values with block-to-block varying scale: uniform and Gaussian blocks. Scales stay
/// in 0.1..1000 so that the f16 block scales are normal numbers (subnormal ones lose precision).
fn sample(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    for b in 0..n / 256 {
        let scale = 10f32.powf(rng.gen_range(-1.0..3.0));
        for _ in 0..256 {
            let v = if b % 2 == 0 {
                rng.gen_range(-1.0f32..1.0)
            } else {
                let (u1, u2): (f32, f32) = (rng.gen_range(1e-7..1.0), rng.gen());
                (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            };
            x.push(v * scale);
        }
    }
    x
}

/// (worst, rms) of |dequantize(quantize(x)) - x| / max|block|.
fn errors(dtype: DType, x: &[f32]) -> (f64, f64) {
    let y = dequantize(dtype, &quantize(dtype, x).unwrap(), None).unwrap();
    let bv = dtype.block_values();
    let (mut worst, mut sq) = (0.0f64, 0.0f64);
    for (xb, yb) in x.chunks(bv).zip(y.chunks(bv)) {
        let max = xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64;
        for (&a, &b) in xb.iter().zip(yb) {
            let e = (a as f64 - b as f64).abs() / max;
            worst = worst.max(e);
            sq += e * e;
        }
    }
    (worst, (sq / x.len() as f64).sqrt())
}

#[test]
fn quantizers_stay_within_the_formats_error_bounds() {
    let x = sample(256 * 256, 7);
    // (dtype, worst-case bound, RMS bound), relative to the block max.
    let bounds = [
        (DType::Q8_0, 0.5 / 127.0 + 1.0 / 2048.0, 1.0 / 400.0),
        (DType::Q4_0, (1.0 + 8.0 / 2048.0) / 8.0, 1.0 / 24.0),
        (DType::Q4K, 1.0 / 8.0, 1.0 / 28.0),
        (DType::Q6K, 1.0 / 32.0, 1.0 / 110.0),
    ];
    for (dtype, worst_bound, rms_bound) in bounds {
        let (worst, rms) = errors(dtype, &x);
        assert!(
            worst <= worst_bound,
            "{dtype}: worst error {worst} > {worst_bound}"
        );
        assert!(rms <= rms_bound, "{dtype}: rms error {rms} > {rms_bound}");
    }
}

#[test]
fn plain_targets_round_trip() {
    let x = sample(1024, 8);
    assert_eq!(
        dequantize(DType::F32, &quantize(DType::F32, &x).unwrap(), None).unwrap(),
        x
    );
    for dtype in [DType::F16, DType::BF16] {
        let y = dequantize(dtype, &quantize(dtype, &x).unwrap(), None).unwrap();
        let rel = if dtype == DType::F16 {
            1.0 / 2048.0
        } else {
            1.0 / 256.0
        };
        for (a, b) in x.iter().zip(&y) {
            // f16 flushes tiny values to subnormals: allow an absolute floor there.
            assert!((a - b).abs() <= a.abs() * rel + 6e-8, "{dtype}: {a} -> {b}");
        }
    }
}

#[test]
fn zero_blocks_quantize_to_zeros() {
    let x = vec![0.0f32; 512];
    for dtype in [DType::Q8_0, DType::Q4_0, DType::Q4K, DType::Q6K] {
        let y = dequantize(dtype, &quantize(dtype, &x).unwrap(), None).unwrap();
        assert!(y.iter().all(|&v| v == 0.0), "{dtype}");
    }
}

#[test]
fn bad_quantizer_input_is_an_error() {
    assert_eq!(
        quantize(DType::Q4K, &[0.0; 300]),
        Err(QuantError::PartialRow {
            dtype: DType::Q4K,
            values: 300,
            block_values: 256
        })
    );
    let mut x = vec![1.0f32; 64];
    x[40] = f32::NAN;
    assert!(matches!(
        quantize(DType::Q8_0, &x),
        Err(QuantError::NonFinite {
            dtype: DType::Q8_0,
            index: 40,
            ..
        })
    ));
    x[40] = f32::INFINITY;
    assert!(matches!(
        quantize(DType::Q4_0, &x),
        Err(QuantError::NonFinite { index: 40, .. })
    ));
    for dtype in [DType::Q4_1, DType::Q5K, DType::Ternary, DType::I8] {
        assert_eq!(
            quantize(dtype, &[0.0; 256]),
            Err(QuantError::NoQuantizer { dtype })
        );
    }
}
