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
    let a0 = a;
    let a1 = a.add(lda);
    let a2 = a.add(2 * lda);
    let a3 = a.add(3 * lda);
    let a4 = a.add(4 * lda);
    let a5 = a.add(5 * lda);
    let mut c00 = _mm256_setzero_ps();
    let mut c01 = _mm256_setzero_ps();
    let mut c10 = _mm256_setzero_ps();
    let mut c11 = _mm256_setzero_ps();
    let mut c20 = _mm256_setzero_ps();
    let mut c21 = _mm256_setzero_ps();
    let mut c30 = _mm256_setzero_ps();
    let mut c31 = _mm256_setzero_ps();
    let mut c40 = _mm256_setzero_ps();
    let mut c41 = _mm256_setzero_ps();
    let mut c50 = _mm256_setzero_ps();
    let mut c51 = _mm256_setzero_ps();
    for kk in 0..k {
        let bp = b.add(kk * NR);
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        let v = _mm256_set1_ps(*a0.add(kk));
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        let v = _mm256_set1_ps(*a1.add(kk));
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        let v = _mm256_set1_ps(*a2.add(kk));
        c20 = _mm256_fmadd_ps(v, b0, c20);
        c21 = _mm256_fmadd_ps(v, b1, c21);
        let v = _mm256_set1_ps(*a3.add(kk));
        c30 = _mm256_fmadd_ps(v, b0, c30);
        c31 = _mm256_fmadd_ps(v, b1, c31);
        let v = _mm256_set1_ps(*a4.add(kk));
        c40 = _mm256_fmadd_ps(v, b0, c40);
        c41 = _mm256_fmadd_ps(v, b1, c41);
        let v = _mm256_set1_ps(*a5.add(kk));
        c50 = _mm256_fmadd_ps(v, b0, c50);
        c51 = _mm256_fmadd_ps(v, b1, c51);
    }
    let o = acc.as_mut_ptr();
    for (i, (lo, hi)) in [
        (c00, c01),
        (c10, c11),
        (c20, c21),
        (c30, c31),
        (c40, c41),
        (c50, c51),
    ]
    .into_iter()
    .enumerate()
    {
        _mm256_storeu_ps(o.add(i * NR), lo);
        _mm256_storeu_ps(o.add(i * NR + 8), hi);
    }
}
