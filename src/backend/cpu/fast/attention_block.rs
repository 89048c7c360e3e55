//! Attention over long unmasked sequences (an audio encoder's 1500 frames) as
//! small matrix products: per block of queries and per head, scores = Q K^T by
//! a register-tiled AVX2/FMA kernel over keys packed in panels, a row softmax
//! with a vectorized exp, then P V by the same tiling. Other shapes, masks and
//! machines use [`super::attention::sdpa`].

use super::attention::SdpaArgs;
use crate::backend::op::Mask;

/// Query rows per register tile.
const MR: usize = 6;
/// Query rows per task (a multiple of [`MR`]).
const QB: usize = 24;
/// Key (or value) columns per register tile: two 8-lane vectors.
const NR: usize = 16;

/// Whether [`sdpa`] handles this call: no mask, at least one block of queries
/// and one tile of keys, head sizes in whole vectors, and AVX2+FMA present.
pub(super) fn applies(a: &SdpaArgs, queries: usize) -> bool {
    super::super::simd::has_avx2_fma()
        && matches!(a.mask, Mask::None)
        && queries >= QB
        && a.kv_len >= NR
        && a.d > 0
        && a.dv.is_multiple_of(NR)
        && a.dv > 0
        && a.kv_heads > 0
        && a.heads.is_multiple_of(a.kv_heads)
}

/// `out [Sq, H, dv]` from `q [Sq, H, d]`, `k [.., Hkv, d]`, `v [.., Hkv, dv]`;
/// callers check [`applies`] first.
pub(super) fn sdpa(
    pool: &rayon::ThreadPool,
    a: &SdpaArgs,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        use rayon::prelude::*;
        let panels = a.kv_len.div_ceil(NR);
        let kv_pad = panels * NR;
        // Keys of each kv head as panels [panel][d][NR] (zero padded).
        let mut kt = vec![0.0f32; a.kv_heads * kv_pad * a.d];
        let (kv_heads, d) = (a.kv_heads, a.d);
        pool.install(|| {
            kt.par_chunks_mut(kv_pad * d)
                .enumerate()
                .for_each(|(kh, t)| {
                    for j in 0..a.kv_len {
                        let row = &k[(j * kv_heads + kh) * d..][..d];
                        let (panel, c) = (j / NR, j % NR);
                        for (p, &x) in row.iter().enumerate() {
                            t[(panel * d + p) * NR + c] = x;
                        }
                    }
                });
            out.par_chunks_mut(QB * a.heads * a.dv)
                .enumerate()
                .for_each_init(
                    || (vec![0.0f32; QB * d], vec![0.0f32; QB * kv_pad]),
                    |(qp, s), (blk, o)| {
                        let bufs = Bufs {
                            qp,
                            s,
                            kt: &kt,
                            kv_pad,
                        };
                        // SAFETY: `applies` checked AVX2+FMA; every pointer the
                        // kernels form stays inside the buffers sized above.
                        unsafe { avx2::block(a, blk * QB, q, v, o, bufs) }
                    },
                );
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    super::attention::sdpa(pool, a, q, k, v, out);
}

/// Per-task scratch and the packed keys.
#[cfg(target_arch = "x86_64")]
struct Bufs<'a> {
    /// Scaled queries of one head, `[QB, d]`.
    qp: &'a mut [f32],
    /// Scores, then probabilities, `[QB, kv_pad]`.
    s: &'a mut [f32],
    /// Keys as panels, `[Hkv][kv_pad / NR][d][NR]`.
    kt: &'a [f32],
    kv_pad: usize,
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Bufs, SdpaArgs, MR, NR};
    use std::arch::x86_64::*;

    /// One block of queries starting at row `i0`, all heads; `o` is its output rows.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block(
        a: &SdpaArgs,
        i0: usize,
        q: &[f32],
        v: &[f32],
        o: &mut [f32],
        b: Bufs,
    ) {
        let (d, dv, kv_pad) = (a.d, a.dv, b.kv_pad);
        let rows = o.len() / (a.heads * dv);
        let rows_pad = rows.div_ceil(MR) * MR;
        let group = a.heads / a.kv_heads;
        let mut inv = [0.0f32; super::QB];
        for h in 0..a.heads {
            let kh = h / group;
            for r in 0..rows_pad {
                let dst = &mut b.qp[r * d..][..d];
                if r < rows {
                    let src = &q[((i0 + r) * a.heads + h) * d..][..d];
                    for (x, &y) in dst.iter_mut().zip(src) {
                        *x = y * a.scale;
                    }
                } else {
                    dst.fill(0.0);
                }
            }
            let kth = &b.kt[kh * kv_pad * d..][..kv_pad * d];
            for r0 in (0..rows_pad).step_by(MR) {
                for panel in 0..kv_pad / NR {
                    qk_tile(
                        &b.qp[r0 * d..][..MR * d],
                        d,
                        &kth[panel * d * NR..][..d * NR],
                        &mut b.s[r0 * kv_pad + panel * NR..],
                        kv_pad,
                    );
                }
            }
            for (r, iv) in inv.iter_mut().enumerate().take(rows) {
                *iv = softmax_row(&mut b.s[r * kv_pad..][..a.kv_len]);
            }
            let vh = &v[kh * dv..];
            let ldv = a.kv_heads * dv;
            for r0 in (0..rows_pad).step_by(MR) {
                for c0 in (0..dv).step_by(NR) {
                    let acc = pv_tile(&b.s[r0 * kv_pad..], kv_pad, &vh[c0..], ldv, a.kv_len);
                    for (r, lanes) in acc.iter().enumerate() {
                        let i = r0 + r;
                        if i < rows {
                            let dst = o[(i * a.heads + h) * dv + c0..][..NR].as_mut_ptr();
                            let w = _mm256_set1_ps(inv[i]);
                            _mm256_storeu_ps(dst, _mm256_mul_ps(lanes[0], w));
                            _mm256_storeu_ps(dst.add(8), _mm256_mul_ps(lanes[1], w));
                        }
                    }
                }
            }
        }
    }

    /// `s[r, 0..NR] = sum_p qp[r, p] kp[p, 0..NR]` for `MR` rows (row stride `lds`).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn qk_tile(qp: &[f32], d: usize, kp: &[f32], s: &mut [f32], lds: usize) {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let (qptr, kptr) = (qp.as_ptr(), kp.as_ptr());
        for p in 0..d {
            let k0 = _mm256_loadu_ps(kptr.add(p * NR));
            let k1 = _mm256_loadu_ps(kptr.add(p * NR + 8));
            for (r, lanes) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*qptr.add(r * d + p));
                lanes[0] = _mm256_fmadd_ps(x, k0, lanes[0]);
                lanes[1] = _mm256_fmadd_ps(x, k1, lanes[1]);
            }
        }
        for (r, lanes) in acc.iter().enumerate() {
            let dst = s[r * lds..][..NR].as_mut_ptr();
            _mm256_storeu_ps(dst, lanes[0]);
            _mm256_storeu_ps(dst.add(8), lanes[1]);
        }
    }

    /// `sum_j p[r, j] v[j, 0..NR]` for `MR` rows of `p` (row stride `ldp`) and
    /// `n` keys of `v` (row stride `ldv`).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pv_tile(p: &[f32], ldp: usize, v: &[f32], ldv: usize, n: usize) -> [[__m256; 2]; MR] {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        assert!(p.len() >= (MR - 1) * ldp + n && v.len() >= (n - 1) * ldv + NR);
        let (pptr, vptr) = (p.as_ptr(), v.as_ptr());
        for j in 0..n {
            let v0 = _mm256_loadu_ps(vptr.add(j * ldv));
            let v1 = _mm256_loadu_ps(vptr.add(j * ldv + 8));
            for (r, lanes) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*pptr.add(r * ldp + j));
                lanes[0] = _mm256_fmadd_ps(x, v0, lanes[0]);
                lanes[1] = _mm256_fmadd_ps(x, v1, lanes[1]);
            }
        }
        acc
    }

    /// Replaces `x` by `exp(x - max x)` and returns `1 / sum`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_row(x: &mut [f32]) -> f32 {
        let chunks = x.len() / 8;
        let mut m8 = _mm256_set1_ps(f32::NEG_INFINITY);
        for c in 0..chunks {
            m8 = _mm256_max_ps(m8, _mm256_loadu_ps(x.as_ptr().add(c * 8)));
        }
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), m8);
        let m = lanes
            .iter()
            .chain(&x[chunks * 8..])
            .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let mv = _mm256_set1_ps(m);
        let mut s8 = _mm256_setzero_ps();
        for c in 0..chunks {
            let ptr = x.as_mut_ptr().add(c * 8);
            let e = exp(_mm256_sub_ps(_mm256_loadu_ps(ptr), mv));
            _mm256_storeu_ps(ptr, e);
            s8 = _mm256_add_ps(s8, e);
        }
        _mm256_storeu_ps(lanes.as_mut_ptr(), s8);
        let mut sum: f32 = lanes.iter().sum();
        for t in &mut x[chunks * 8..] {
            *t = (*t - m).exp();
            sum += *t;
        }
        1.0 / sum
    }

    /// `exp(x)` to about 2 ulp (Cephes' range reduction and polynomial);
    /// inputs below -87.3 give about 1e-38, not 0.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp(x: __m256) -> __m256 {
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(-87.336_55)),
            _mm256_set1_ps(88.376_26),
        );
        let n = _mm256_round_ps(
            _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut p = _mm256_set1_ps(1.987_569_1e-4);
        for c in [
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            0.166_666_65,
            0.5,
        ] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let y = _mm256_add_ps(
            _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
            _mm256_set1_ps(1.0),
        );
        let e = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvtps_epi32(n),
            _mm256_set1_epi32(127),
        ));
        _mm256_mul_ps(y, _mm256_castsi256_ps(e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::attention::{self, SdpaArgs};
    use super::{applies, sdpa};
    use crate::backend::op::Mask;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 4.0 - 2.0
            })
            .collect()
    }

    #[test]
    fn blocked_attention_matches_the_online_softmax_kernel() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        // Ragged sizes: 53 queries (a partial block), 37 keys (a partial tile), GQA 4/2.
        for (sq, kv, heads, kv_heads, d, dv) in [(53, 37, 4, 2, 12, 16), (30, 70, 2, 2, 64, 32)] {
            let (q, k, v) = (
                values(sq * heads * d, 1),
                values(kv * kv_heads * d, 2),
                values(kv * kv_heads * dv, 3),
            );
            let args = SdpaArgs {
                heads,
                kv_heads,
                d,
                dv,
                scale: 1.0 / (d as f32).sqrt(),
                mask: &Mask::None,
                q_pos: 0,
                kv_len: kv,
            };
            assert_eq!(
                applies(&args, sq),
                crate::backend::cpu::simd::has_avx2_fma()
            );
            let mut want = vec![0.0f32; sq * heads * dv];
            attention::sdpa(&pool, &args, &q, &k, &v, &mut want);
            let mut got = vec![f32::NAN; sq * heads * dv];
            sdpa(&pool, &args, &q, &k, &v, &mut got);
            let worst = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "max abs diff {worst}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_exp_is_within_a_few_ulp() {
        assert!(
            crate::backend::cpu::simd::has_avx2_fma(),
            "x86-64 test machines have AVX2+FMA"
        );
        use std::arch::x86_64::*;
        for i in -870..=0 {
            let x = i as f32 / 10.0 + 0.037;
            let mut out = [0.0f32; 8];
            // SAFETY: AVX2+FMA checked above.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), super::avx2::exp(_mm256_set1_ps(x))) };
            let want = (x as f64).exp();
            let rel = ((out[0] as f64 - want) / want).abs();
            assert!(rel < 5e-7, "exp({x}) = {} want {want}", out[0]);
        }
    }
}
