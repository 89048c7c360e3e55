//! The AVX2 + FMA micro-kernel of [`super::gemm`]: a 6 x 16 tile in twelve 8-lane
//! accumulators; per step two loads of packed activations, six weight broadcasts, twelve FMAs.

use super::gemm::{MR, NR};
use std::arch::x86_64::*;

/// [`super::gemm::MicroKernel`] with AVX2 + FMA. Callers check that the CPU has them
/// ([`super::KernelPath::Avx2`] available).
pub(super) fn micro(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * NR]) {
    assert!(
        a.len() >= (MR - 1) * lda + k && b.len() >= k * NR,
        "gemm: micro-tile bounds"
    );
    // SAFETY: the bounds were checked above; AVX2 + FMA availability is the caller's
    // precondition (the dispatcher only picks this kernel on the Avx2 path).
    unsafe { micro_imp(a.as_ptr(), lda, b.as_ptr(), k, acc) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn micro_imp(a: *const f32, lda: usize, b: *const f32, k: usize, acc: &mut [f32; MR * NR]) {
    let rows = [0, 1, 2, 3, 4, 5].map(|i| a.add(i * lda));
    let mut c = [[_mm256_setzero_ps(); 2]; MR];
    for kk in 0..k {
        let bp = b.add(kk * NR);
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        // Fully unrolled over the six rows: the twelve accumulators stay in registers.
        for (ci, row) in c.iter_mut().zip(&rows) {
            let v = _mm256_set1_ps(*row.add(kk));
            ci[0] = _mm256_fmadd_ps(v, b0, ci[0]);
            ci[1] = _mm256_fmadd_ps(v, b1, ci[1]);
        }
    }
    let o = acc.as_mut_ptr();
    for (i, [lo, hi]) in c.into_iter().enumerate() {
        _mm256_storeu_ps(o.add(i * NR), lo);
        _mm256_storeu_ps(o.add(i * NR + 8), hi);
    }
}
