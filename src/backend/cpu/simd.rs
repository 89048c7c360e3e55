//! f32 vector primitives of the fast cpu ops: a portable version (8
//! independent lanes, which the compiler vectorizes) and an AVX2+FMA version
//! chosen at run time on x86-64. Both are public so tests check each.

/// Whether the AVX2+FMA path is used on this machine.
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `sum a[i] b[i]` (lengths must match; extra elements of the longer are ignored).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { avx2::dot(a, b) };
    }
    portable::dot(a, b)
}

/// `y[i] += a x[i]`.
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { avx2::axpy(a, x, y) };
    }
    portable::axpy(a, x, y)
}

/// `sum x[i]^2`.
pub fn sum_sq(x: &[f32]) -> f32 {
    dot(x, x)
}

/// Replaces `x[i]` by `exp(x[i] - m)` (`-inf` entries by exactly 0) and returns the sum,
/// accumulated in f64: the 8-lane AVX2 exp of the blocked attention (about 2 ulp) where the
/// CPU has it, libm elsewhere. For softmaxes over large vocabularies.
pub fn exp_sub(x: &mut [f32], m: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { avx2_exp_sub(x, m) };
    }
    x.iter_mut()
        .map(|v| {
            *v = (*v - m).exp();
            f64::from(*v)
        })
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_exp_sub(x: &mut [f32], m: f32) -> f64 {
    use std::arch::x86_64::*;
    let (mv, ninf) = (_mm256_set1_ps(m), _mm256_set1_ps(f32::NEG_INFINITY));
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let chunks = x.len() / 8;
    for c in 0..chunks {
        let ptr = x.as_mut_ptr().add(c * 8);
        let v = _mm256_loadu_ps(ptr);
        let e = super::fast::attention_block::avx2::exp(_mm256_sub_ps(v, mv));
        let e = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, ninf), e);
        _mm256_storeu_ps(ptr, e);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
    }
    let mut lanes = [0.0f64; 4];
    _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(lo, hi));
    let mut sum: f64 = lanes.iter().sum();
    for v in &mut x[chunks * 8..] {
        *v = (*v - m).exp();
        sum += f64::from(*v);
    }
    sum
}

/// Portable versions: 8 lanes of independent accumulators.
pub mod portable {
    /// `sum a[i] b[i]`.
    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0.0f32; 8];
        let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            for l in 0..8 {
                acc[l] += x[l] * y[l];
            }
        }
        let mut tail = 0.0;
        for (x, y) in ra.iter().zip(rb) {
            tail += x * y;
        }
        (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
    }

    /// `y[i] += a x[i]`.
    pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o += a * v;
        }
    }
}

/// AVX2+FMA versions. Callers must check [`has_avx2_fma`].
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use std::arch::x86_64::*;

    /// `sum a[i] b[i]`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 8)),
                _mm256_loadu_ps(pb.add(i + 8)),
                acc1,
            );
            i += 16;
        }
        if i + 8 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            i += 8;
        }
        let acc = _mm256_add_ps(acc0, acc1);
        let hi = _mm256_extractf128_ps(acc, 1);
        let s4 = _mm_add_ps(_mm256_castps256_ps128(acc), hi);
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
        let mut sum = _mm_cvtss_f32(s1);
        while i < n {
            sum += a[i] * b[i];
            i += 1;
        }
        sum
    }

    /// `y[i] += a x[i]`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let (px, py) = (x.as_ptr(), y.as_mut_ptr());
        let va = _mm256_set1_ps(a);
        let mut i = 0;
        while i + 8 <= n {
            let r = _mm256_fmadd_ps(va, _mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(py.add(i)));
            _mm256_storeu_ps(py.add(i), r);
            i += 8;
        }
        while i < n {
            y[i] += a * x[i];
            i += 1;
        }
    }
}
