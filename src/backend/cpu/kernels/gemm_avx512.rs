//! The AVX-512 micro-kernel of [`super::gemm`]: a 6 x 32 tile (two packed panels of
//! activations) in twelve 16-lane accumulators; per step two loads of packed activations,
//! six weight broadcasts, twelve FMAs. Every output sums its products in the same order, with
//! the same fused multiply-adds, as the AVX2 kernel does, so the results are identical.

use super::gemm::{MR, NR};
use std::arch::x86_64::*;

/// Whether this CPU runs AVX-512F (checked once).
pub(super) fn detected() -> bool {
    static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f"))
}

/// [`super::gemm::PairKernel`] with AVX-512F. Callers check [`detected`].
pub(super) fn pair(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 2 * NR]) {
    assert!(
        a.len() >= (MR - 1) * lda + k && b.len() >= 2 * k * NR,
        "gemm: pair-tile bounds"
    );
    assert!(detected(), "gemm: AVX-512F is not available on this CPU");
    // SAFETY: the bounds and the CPU feature were checked above.
    unsafe { pair_imp(a.as_ptr(), lda, b.as_ptr(), k, acc) }
}

#[target_feature(enable = "avx512f")]
unsafe fn pair_imp(
    a: *const f32,
    lda: usize,
    b: *const f32,
    k: usize,
    acc: &mut [f32; MR * 2 * NR],
) {
    let rows = [0, 1, 2, 3, 4, 5].map(|i| a.add(i * lda));
    let b1 = b.add(k * NR);
    let mut c = [[_mm512_setzero_ps(); 2]; MR];
    for kk in 0..k {
        let p0 = _mm512_loadu_ps(b.add(kk * NR));
        let p1 = _mm512_loadu_ps(b1.add(kk * NR));
        // Fully unrolled over the six rows: the twelve accumulators stay in registers.
        for (ci, row) in c.iter_mut().zip(&rows) {
            let v = _mm512_set1_ps(*row.add(kk));
            ci[0] = _mm512_fmadd_ps(v, p0, ci[0]);
            ci[1] = _mm512_fmadd_ps(v, p1, ci[1]);
        }
    }
    let o = acc.as_mut_ptr();
    for (i, [lo, hi]) in c.into_iter().enumerate() {
        _mm512_storeu_ps(o.add(i * 2 * NR), lo);
        _mm512_storeu_ps(o.add(i * 2 * NR + NR), hi);
    }
}
