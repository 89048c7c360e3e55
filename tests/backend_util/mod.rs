//! Helpers shared by the backend tests: seeded random inputs, tolerances,
//! and running an op on the cpu backend and on the reference.

#![allow(dead_code)]

pub mod wgpu;

use cyb_llm::backend::cpu::{reference, CpuBackend};
use cyb_llm::backend::{Backend, ExecContext, Op, SharedBytes, Tensor};
use cyb_llm::DType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded generator. The seed is fixed per test name, so a run is reproducible (CI
/// sees the same inputs every time); `CYB_TEST_SEED=N` picks seed N and
/// `CYB_TEST_SEED=clock` a new one per run, as `scripts/seed-sweep.sh` does to search
/// for inputs a tolerance does not cover. The seed is printed.
pub fn rng(test: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed(test))
}

/// The seed [`rng`] uses for `test` (printed).
pub fn seed(test: &str) -> u64 {
    let fixed = || {
        test.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    };
    let seed = match std::env::var("CYB_TEST_SEED").ok().as_deref() {
        Some("clock") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        Some(s) => s.parse().unwrap_or_else(|_| {
            panic!("CYB_TEST_SEED={s}: expected an unsigned integer or `clock`")
        }),
        None => fixed(),
    };
    eprintln!("{test}: seed {seed} (rerun with CYB_TEST_SEED={seed})");
    seed
}

/// Values uniform in [-1, 1), never all zero.
pub fn values(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// A host f32 tensor of random values.
pub fn rand_tensor(rng: &mut ChaCha8Rng, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(shape, values(rng, n)).expect("shape matches")
}

/// Random encoded bytes for `shape` in `dtype`: random quants with small
/// finite scales of either sign for block encodings, random values for f32/f16/bf16.
pub fn rand_weight(rng: &mut ChaCha8Rng, shape: &[usize], dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let bytes: Vec<u8> = match dtype {
        DType::F32 => values(rng, n)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F16 => values(rng, n)
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        DType::BF16 => values(rng, n)
            .iter()
            .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
            .collect(),
        _ => {
            let size = dtype.byte_size(shape).expect("whole blocks") as usize;
            let mut b: Vec<u8> = (0..size).map(|_| rng.gen()).collect();
            for block in b.chunks_mut(dtype.block_bytes()) {
                for &off in dtype.f16_scale_offsets() {
                    let magnitude = rng.gen_range(0.001f32..0.05);
                    let sign = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
                    let s = half::f16::from_f32(sign * magnitude);
                    block[off..off + 2].copy_from_slice(&s.to_le_bytes());
                }
            }
            b
        }
    };
    let scale = (dtype == DType::Ternary).then_some(0.75);
    Tensor::from_bytes(shape, dtype, SharedBytes::from_vec(bytes), scale).expect("sizes match")
}

/// ops.md relative error: `max|y - ref| / max(max|ref|, 1e-6)`.
pub fn rel_err(y: &[f32], r: &[f32]) -> f32 {
    assert_eq!(y.len(), r.len(), "output lengths differ");
    let mut num = 0.0f32;
    let mut den = 1e-6f32;
    for (&a, &b) in y.iter().zip(r) {
        assert_eq!(
            a.is_finite(),
            b.is_finite(),
            "finiteness differs: {a} vs {b}"
        );
        if b.is_finite() {
            num = num.max((a - b).abs());
            den = den.max(b.abs());
        }
    }
    num / den
}

/// Runs `op` on the cpu backend (`threads` threads) and on the reference;
/// checks every output within `tol` and returns the worst error.
pub fn check_op(op: &Op, inputs: &[Tensor], tol: f32, threads: usize) -> f32 {
    check_op_floor(op, inputs, tol, threads, 0.0)
}

/// The typical size of one output of `x [.., K] W^T`: the largest
/// `sqrt(sum_k (W[n,k] x[k])^2)`. With few outputs a random dot product can
/// be far smaller than its terms, so it floors the error denominator.
pub fn matmul_typical(x: &Tensor, w: &Tensor) -> f32 {
    let (xv, wv) = (x.read_f32("test").unwrap(), w.read_f32("test").unwrap());
    let k = w.shape()[1].max(1);
    let mut typical = 0.0f64;
    for xr in xv.chunks(k) {
        for wr in wv.chunks(k) {
            let sq: f64 = xr
                .iter()
                .zip(wr)
                .map(|(&a, &b)| (a as f64 * b as f64).powi(2))
                .sum();
            typical = typical.max(sq.sqrt());
        }
    }
    typical as f32
}

/// [`check_op`] with the error denominator floored at `floor`.
pub fn check_op_floor(op: &Op, inputs: &[Tensor], tol: f32, threads: usize, floor: f32) -> f32 {
    let cpu = CpuBackend::new(threads).expect("cpu backend");
    let mut ctx = ExecContext::new(threads);
    let got = cpu.execute(op, inputs, &mut ctx).expect("cpu executes");
    let want = reference::execute(op, inputs).expect("reference executes");
    assert_eq!(got.len(), want.len(), "{op:?}: output counts differ");
    let mut worst = 0.0f32;
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), w.shape(), "{op:?}: shapes differ");
        assert_eq!(g.dtype(), w.dtype(), "{op:?}: dtypes differ");
        let (gv, wv) = (
            cpu.download_f32(g),
            reference::ReferenceBackend.download_f32(w),
        );
        let max_ref = wv.iter().fold(
            0.0f32,
            |m, v| if v.is_finite() { m.max(v.abs()) } else { m },
        );
        let e = rel_err(&gv, &wv) * max_ref.max(1e-6) / max_ref.max(floor).max(1e-6);
        let shapes: Vec<_> = inputs
            .iter()
            .map(|t| (t.dtype(), t.shape().to_vec()))
            .collect();
        assert!(e <= tol, "{op:?} on {shapes:?}: relative error {e} > {tol}");
        worst = worst.max(e);
    }
    worst
}
