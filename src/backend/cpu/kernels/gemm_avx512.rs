//! The AVX-512 micro-kernels of [`super::gemm`]: a 6 x 32 tile (two packed panels of
//! activations) in twelve 16-lane accumulators (per step two loads of packed activations,
//! six weight broadcasts, twelve FMAs), a 6 x 48 tile (three panels) in eighteen and a
//! 6 x 64 tile (four panels) in twenty-four. Every output sums its products in the same order,
//! with the same fused multiply-adds, as the AVX2 kernel does, so the results are identical.

use super::avx512_detected;
use super::gemm::{MR, NR};
use std::arch::x86_64::*;

/// [`super::gemm::PairKernel`] with AVX-512F. Callers check [`avx512_detected`].
pub(super) fn pair(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 2 * NR]) {
    wide::<2>(a, lda, b, k, acc);
}

/// [`super::gemm::TriKernel`] with AVX-512F: a 6 x 48 tile in eighteen accumulators, per step
/// three loads of packed activations and six weight broadcasts. Callers check
/// [`avx512_detected`].
pub(super) fn tri(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 3 * NR]) {
    wide::<3>(a, lda, b, k, acc);
}

/// [`super::gemm::QuadKernel`] with AVX-512F: a 6 x 64 tile in twenty-four accumulators, per
/// step four loads of packed activations and six weight broadcasts for twenty-four FMAs
/// (the pair kernel needs eight loads for twelve). Callers check [`avx512_detected`].
pub(super) fn quad(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 4 * NR]) {
    wide::<4>(a, lda, b, k, acc);
}

/// `P` consecutive packed panels at once; `acc` holds `MR * P * NR` values.
fn wide<const P: usize>(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32]) {
    assert!(
        a.len() >= (MR - 1) * lda + k && b.len() >= P * k * NR && acc.len() >= MR * P * NR,
        "gemm: wide-tile bounds"
    );
    assert!(
        avx512_detected(),
        "gemm: AVX-512F is not available on this CPU"
    );
    // SAFETY: the bounds and the CPU feature were checked above.
    unsafe { wide_imp::<P>(a.as_ptr(), lda, b.as_ptr(), k, acc.as_mut_ptr()) }
}

#[target_feature(enable = "avx512f")]
unsafe fn wide_imp<const P: usize>(
    a: *const f32,
    lda: usize,
    b: *const f32,
    k: usize,
    o: *mut f32,
) {
    let rows = [0, 1, 2, 3, 4, 5].map(|i| a.add(i * lda));
    let panels: [*const f32; P] = std::array::from_fn(|p| b.add(p * k * NR));
    let mut c = [[_mm512_setzero_ps(); P]; MR];
    for kk in 0..k {
        let bv: [__m512; P] = std::array::from_fn(|p| _mm512_loadu_ps(panels[p].add(kk * NR)));
        // Fully unrolled over the six rows and P panels: the accumulators stay in registers.
        for (ci, row) in c.iter_mut().zip(&rows) {
            let v = _mm512_set1_ps(*row.add(kk));
            for (cij, bj) in ci.iter_mut().zip(&bv) {
                *cij = _mm512_fmadd_ps(v, *bj, *cij);
            }
        }
    }
    for (i, ci) in c.into_iter().enumerate() {
        for (p, v) in ci.into_iter().enumerate() {
            _mm512_storeu_ps(o.add(i * P * NR + p * NR), v);
        }
    }
}

/// One full panel of [`NR`] activation rows (`x`: `NR` rows of `k` values) into `panel`
/// (`panel[kk * NR + j] = x[j][kk]`), sixteen columns at a time through a 16 x 16 register
/// transpose. Callers check [`avx512_detected`].
pub(super) fn pack_panel(x: &[f32], k: usize, panel: &mut [f32]) {
    assert!(
        NR == 16 && x.len() >= NR * k && panel.len() >= k * NR,
        "gemm: pack bounds"
    );
    assert!(
        avx512_detected(),
        "gemm: AVX-512F is not available on this CPU"
    );
    // SAFETY: the bounds and the CPU feature were checked above.
    unsafe { pack_imp(x, k, panel) }
}

#[target_feature(enable = "avx512f")]
unsafe fn pack_imp(x: &[f32], k: usize, panel: &mut [f32]) {
    let k16 = k / 16 * 16;
    for kk0 in (0..k16).step_by(16) {
        // Row j's values kk0..kk0 + 16 (kk0 + 16 <= k), stored as columns at (kk0 + c) * NR.
        let rows: [__m512; 16] =
            std::array::from_fn(|j| _mm512_loadu_ps(x.as_ptr().add(j * k + kk0)));
        for (c, v) in transpose16(rows).into_iter().enumerate() {
            _mm512_storeu_ps(panel.as_mut_ptr().add((kk0 + c) * NR), v);
        }
    }
    for kk in k16..k {
        for j in 0..NR {
            panel[kk * NR + j] = x[j * k + kk];
        }
    }
}

/// Sixteen rows of sixteen values to sixteen columns: `out[c]` lane `j` = `rows[j]` lane `c`.
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(rows: [__m512; 16]) -> [__m512; 16] {
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for i in 0..4 {
        let (a, b, c, d) = (t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
        u[4 * i] = _mm512_shuffle_ps::<0x44>(a, c);
        u[4 * i + 1] = _mm512_shuffle_ps::<0xEE>(a, c);
        u[4 * i + 2] = _mm512_shuffle_ps::<0x44>(b, d);
        u[4 * i + 3] = _mm512_shuffle_ps::<0xEE>(b, d);
    }
    let mut v = [_mm512_setzero_ps(); 16];
    for i in 0..4 {
        v[i] = _mm512_shuffle_f32x4::<0x88>(u[i], u[4 + i]);
        v[4 + i] = _mm512_shuffle_f32x4::<0xDD>(u[i], u[4 + i]);
        v[8 + i] = _mm512_shuffle_f32x4::<0x88>(u[8 + i], u[12 + i]);
        v[12 + i] = _mm512_shuffle_f32x4::<0xDD>(u[8 + i], u[12 + i]);
    }
    let mut o = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        o[i] = _mm512_shuffle_f32x4::<0x88>(v[i], v[8 + i]);
        o[8 + i] = _mm512_shuffle_f32x4::<0xDD>(v[i], v[8 + i]);
    }
    o
}
