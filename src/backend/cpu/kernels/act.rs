//! Activation rows quantized to 8 bits per value, the second operand of the integer kernels.

use half::f16;
use rayon::prelude::*;

/// 32 activations as `d * qs[i]`, with `sum = sum(qs)` for the encodings with an offset.
/// The scales are kept at the precision of ggml's `block_q8_0` / `block_q8_1` (f16), so that
/// the integer kernels multiply by the same scales as llama.cpp's (only summation orders
/// differ) and greedy decoding follows llama.cpp's path wherever those do not decide.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub struct Q8Block {
    /// Scale, rounded to f16 precision.
    pub d: f32,
    /// Sum of `qs`.
    pub sum: i32,
    /// `d * sum` (with `d` before rounding), rounded to f16 precision: the offset factor of
    /// q4_1 / q5_1 rows.
    pub s: f32,
    /// Values in -127..=127.
    pub qs: [i8; 32],
}

/// 256 activations as `d * qs[i]`, with the sums of each group of 16 in `bsums` and of each
/// group of 32 in `bsums32`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub struct Q8KBlock {
    /// Values in -127..=127.
    pub qs: [i8; 256],
    /// Sums of `qs[16j .. 16j + 16]`.
    pub bsums: [i32; 16],
    /// Sums of `qs[32j .. 32j + 32]`.
    pub bsums32: [i32; 8],
    /// Scale.
    pub d: f32,
}

/// Quantizes `x` (any length) to `qs` with one scale: `d = max|x| / 127`, values rounded to
/// nearest (ties to even). A non-finite input makes `d` NaN, so the products built on it are
/// NaN as the reference's would be. Written with integer bit tricks instead of `f32::max` /
/// `f32::round` so that it vectorizes (no libm calls).
fn quantize_run(x: &[f32], qs: &mut [i8]) -> f32 {
    // |x| as bits: for finite values their order is the numeric order; NaN and inf are larger.
    let max_bits = x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
    if max_bits >= 0x7f80_0000 {
        qs.fill(0);
        return f32::NAN;
    }
    let amax = f32::from_bits(max_bits);
    if amax == 0.0 {
        qs.fill(0);
        return 0.0;
    }
    let id = 127.0 / amax;
    for (q, &v) in qs.iter_mut().zip(x) {
        // Adding 1.5 * 2^23 leaves round(v * id) in the low mantissa bits.
        let r = (v * id + 12_582_912.0).to_bits() as i32 - 0x4b40_0000;
        *q = r.clamp(-127, 127) as i8;
    }
    amax / 127.0
}

/// `m` rows of `k` values (k a multiple of 32) as `m * k / 32` [`Q8Block`]s.
pub fn quantize_q8(x: &[f32], k: usize, m: usize) -> Vec<Q8Block> {
    let zero = Q8Block {
        d: 0.0,
        sum: 0,
        s: 0.0,
        qs: [0; 32],
    };
    let mut out = vec![zero; m * k / 32];
    let fill = |(b, xs): (&mut Q8Block, &[f32])| {
        let d = quantize_run(xs, &mut b.qs);
        b.sum = b.qs.iter().map(|&q| q as i32).sum();
        b.d = f16::from_f32(d).to_f32();
        b.s = f16::from_f32(d * b.sum as f32).to_f32();
    };
    if m > 1 {
        out.par_iter_mut()
            .zip(x.par_chunks_exact(32))
            .for_each(fill);
    } else {
        out.iter_mut().zip(x.chunks_exact(32)).for_each(fill);
    }
    out
}

/// `m` rows of `k` values (k a multiple of 256) as `m * k / 256` [`Q8KBlock`]s.
pub fn quantize_q8k(x: &[f32], k: usize, m: usize) -> Vec<Q8KBlock> {
    let zero = Q8KBlock {
        qs: [0; 256],
        bsums: [0; 16],
        bsums32: [0; 8],
        d: 0.0,
    };
    let mut out = vec![zero; m * k / 256];
    let fill = |(b, xs): (&mut Q8KBlock, &[f32])| {
        b.d = quantize_run(xs, &mut b.qs);
        for (s, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = q.iter().map(|&q| q as i32).sum();
        }
        for (j, s) in b.bsums32.iter_mut().enumerate() {
            *s = b.bsums[2 * j] + b.bsums[2 * j + 1];
        }
    };
    if m > 1 {
        out.par_iter_mut()
            .zip(x.par_chunks_exact(256))
            .for_each(fill);
    } else {
        out.iter_mut().zip(x.chunks_exact(256)).for_each(fill);
    }
    out
}
