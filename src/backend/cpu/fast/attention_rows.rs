//! Unmasked attention of a few query rows against many keys with AVX-512F (a decoder
//! step's cross-attention: one new token against 1500 audio frames): per query
//! head, every score `q . k_j` in 16-lane multiply-adds, a softmax over all of them with
//! the vectorized exp, then `sum_j p_j v_j` accumulated in registers. No per-key calls
//! and no online rescaling, which [`super::attention::sdpa`] needs for any length.
//! x86-64 only (elsewhere [`super::attention::sdpa`] runs its general loop).

use super::attention::SdpaArgs;
use crate::backend::op::Mask;

/// Lanes of one vector.
const LANES: usize = 16;
/// Largest value head handled (accumulators kept in registers).
const MAX_DV: usize = 128;

/// Whether [`attend`] handles this call: AVX-512F, no mask, head sizes in whole vectors,
/// value heads of at most [`MAX_DV`].
pub(super) fn applies(a: &SdpaArgs) -> bool {
    super::super::kernels::avx512_detected()
        && matches!(a.mask, Mask::None)
        && a.d > 0
        && a.d.is_multiple_of(LANES)
        && a.dv > 0
        && a.dv.is_multiple_of(LANES)
        && a.dv <= MAX_DV
}

/// `o [group, dv]` for the query heads `qrows [group, d]` that share KV head `kh`, over the
/// keys `start..end` of `k [.., Hkv, d]` / `v [.., Hkv, dv]`; `scores` is scratch. Callers
/// check [`applies`] and give a non-empty range.
#[allow(clippy::too_many_arguments)]
pub(super) fn attend(
    a: &SdpaArgs,
    qrows: &[f32],
    k: &[f32],
    v: &[f32],
    kh: usize,
    keys: std::ops::Range<usize>,
    scores: &mut Vec<f32>,
    o: &mut [f32],
) {
    assert!(
        applies(a) && !keys.is_empty(),
        "attention rows: unsupported call"
    );
    let (d, dv, hkv) = (a.d, a.dv, a.kv_heads);
    assert!(
        k.len() >= (keys.end * hkv) * d && v.len() >= (keys.end * hkv) * dv,
        "attention rows: key range past the cache"
    );
    scores.resize(keys.len(), 0.0);
    for (qr, og) in qrows.chunks_exact(d).zip(o.chunks_exact_mut(dv)) {
        let k = &k[(keys.start * hkv + kh) * d..];
        let v = &v[(keys.start * hkv + kh) * dv..];
        // SAFETY: AVX-512F was checked by `applies`; the rows read stay inside `k` and `v`
        // (checked above) and `scores` holds one value per key.
        unsafe {
            let f = match dv / LANES {
                1 => avx512::head::<1>,
                2 => avx512::head::<2>,
                3 => avx512::head::<3>,
                4 => avx512::head::<4>,
                5 => avx512::head::<5>,
                6 => avx512::head::<6>,
                7 => avx512::head::<7>,
                _ => avx512::head::<8>,
            };
            f(qr, k, v, (d, hkv), a.scale, scores, og)
        }
    }
}

/// Keys per tile of [`attend_many`]: a tile's key and value rows (8 KiB each for 64-value
/// heads) stay in L1 while every query passes over them.
const TILE_KEYS: usize = 32;

/// `o [m, dv]` for `m` query rows `qs [m, d]` that all attend to KV head `kh` over the keys
/// `start..end` (several sequences' heads against one encoder output): the keys are taken
/// a tile at a time, each query keeping a running maximum and sum (online softmax), so every
/// key and value row is read from memory once for all the queries instead of once per query.
/// Callers check [`applies`] and give a non-empty range.
pub(super) fn attend_many(
    a: &SdpaArgs,
    qs: &[f32],
    k: &[f32],
    v: &[f32],
    kh: usize,
    keys: std::ops::Range<usize>,
    o: &mut [f32],
) {
    assert!(
        applies(a) && !keys.is_empty(),
        "attention rows: unsupported call"
    );
    let (d, dv, hkv) = (a.d, a.dv, a.kv_heads);
    let m = qs.len() / d;
    assert!(
        k.len() >= (keys.end * hkv) * d
            && v.len() >= (keys.end * hkv) * dv
            && qs.len() == m * d
            && o.len() == m * dv,
        "attention rows: key range past the cache, or queries and outputs of other sizes"
    );
    // SAFETY: AVX-512F was checked by `applies`; the rows read stay inside `k`, `v`, `qs` and
    // `o` (checked above).
    unsafe {
        let f = match dv / LANES {
            1 => avx512::many::<1>,
            2 => avx512::many::<2>,
            3 => avx512::many::<3>,
            4 => avx512::many::<4>,
            5 => avx512::many::<5>,
            6 => avx512::many::<6>,
            7 => avx512::many::<7>,
            _ => avx512::many::<8>,
        };
        f(qs, k, v, (d, hkv, kh), keys, a.scale, o)
    }
}

mod avx512 {
    use super::{LANES, TILE_KEYS};
    use std::arch::x86_64::*;

    /// [`super::attend_many`] with `dv = VECS * LANES`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn many<const VECS: usize>(
        qs: &[f32],
        k: &[f32],
        v: &[f32],
        (d, hkv, kh): (usize, usize, usize),
        keys: std::ops::Range<usize>,
        scale: f32,
        o: &mut [f32],
    ) {
        let dv = VECS * LANES;
        let m = qs.len() / d;
        let (kp, vp, qp, op) = (k.as_ptr(), v.as_ptr(), qs.as_ptr(), o.as_mut_ptr());
        let mut max = vec![f32::NEG_INFINITY; m];
        let mut sum = vec![0.0f32; m];
        let mut s = [0.0f32; TILE_KEYS];
        o.fill(0.0);
        let mut t0 = keys.start;
        while t0 < keys.end {
            let n = (keys.end - t0).min(TILE_KEYS);
            for qi in 0..m {
                let q = qp.add(qi * d);
                let mut tile_max = f32::NEG_INFINITY;
                for (j, sj) in s.iter_mut().enumerate().take(n) {
                    let kr = kp.add(((t0 + j) * hkv + kh) * d);
                    let mut acc = _mm512_setzero_ps();
                    for c in (0..d).step_by(LANES) {
                        acc = _mm512_fmadd_ps(
                            _mm512_loadu_ps(q.add(c)),
                            _mm512_loadu_ps(kr.add(c)),
                            acc,
                        );
                    }
                    *sj = _mm512_reduce_add_ps(acc) * scale;
                    tile_max = tile_max.max(*sj);
                }
                let new_max = max[qi].max(tile_max);
                // 0 on the first tile (the running maximum starts at -inf).
                let correction = (max[qi] - new_max).exp();
                max[qi] = new_max;
                let mv = _mm512_set1_ps(new_max);
                for c in 0..TILE_KEYS / LANES {
                    let ptr = s.as_mut_ptr().add(c * LANES);
                    let e = super::super::attention_block::avx512::exp(_mm512_sub_ps(
                        _mm512_loadu_ps(ptr),
                        mv,
                    ));
                    _mm512_storeu_ps(ptr, e);
                }
                sum[qi] = sum[qi] * correction + s[..n].iter().sum::<f32>();
                let out = op.add(qi * dv);
                let cv = _mm512_set1_ps(correction);
                let mut acc: [__m512; VECS] =
                    std::array::from_fn(|c| _mm512_mul_ps(_mm512_loadu_ps(out.add(c * LANES)), cv));
                for (j, &p) in s.iter().enumerate().take(n) {
                    let vr = vp.add(((t0 + j) * hkv + kh) * dv);
                    let pv = _mm512_set1_ps(p);
                    for (c, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(pv, _mm512_loadu_ps(vr.add(c * LANES)), *a);
                    }
                }
                for (c, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(out.add(c * LANES), *a);
                }
            }
            t0 += n;
        }
        for (qi, &l) in sum.iter().enumerate() {
            let inv = _mm512_set1_ps(1.0 / l);
            let out = op.add(qi * dv);
            for c in 0..VECS {
                let ptr = out.add(c * LANES);
                _mm512_storeu_ps(ptr, _mm512_mul_ps(_mm512_loadu_ps(ptr), inv));
            }
        }
    }

    /// One query head `q [d]` against `scores.len()` keys (row `j` of head at `k[j * hkv * d]`,
    /// `v[j * hkv * dv]`), into `o [dv]` with `dv = VECS * LANES`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn head<const VECS: usize>(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        (d, hkv): (usize, usize),
        scale: f32,
        scores: &mut [f32],
        o: &mut [f32],
    ) {
        let n = scores.len();
        let (kp, vp, qp) = (k.as_ptr(), v.as_ptr(), q.as_ptr());
        let mut max = f32::NEG_INFINITY;
        for (j, s) in scores.iter_mut().enumerate() {
            let kr = kp.add(j * hkv * d);
            let mut acc = _mm512_setzero_ps();
            for c in (0..d).step_by(LANES) {
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(qp.add(c)), _mm512_loadu_ps(kr.add(c)), acc);
            }
            *s = _mm512_reduce_add_ps(acc) * scale;
            max = max.max(*s);
        }
        let mv = _mm512_set1_ps(max);
        let chunks = n / LANES;
        let mut sv = _mm512_setzero_ps();
        for c in 0..chunks {
            let ptr = scores.as_mut_ptr().add(c * LANES);
            let e =
                super::super::attention_block::avx512::exp(_mm512_sub_ps(_mm512_loadu_ps(ptr), mv));
            _mm512_storeu_ps(ptr, e);
            sv = _mm512_add_ps(sv, e);
        }
        let mut sum = _mm512_reduce_add_ps(sv);
        for s in &mut scores[chunks * LANES..] {
            *s = (*s - max).exp();
            sum += *s;
        }
        let dv = VECS * LANES;
        let mut acc = [_mm512_setzero_ps(); VECS];
        for (j, &p) in scores.iter().enumerate() {
            let vr = vp.add(j * hkv * dv);
            let pv = _mm512_set1_ps(p);
            for (c, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(pv, _mm512_loadu_ps(vr.add(c * LANES)), *a);
            }
        }
        let inv = _mm512_set1_ps(1.0 / sum);
        for (c, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(o.as_mut_ptr().add(c * LANES), _mm512_mul_ps(*a, inv));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{applies, attend};
    use crate::backend::cpu::fast::attention::SdpaArgs;
    use crate::backend::op::Mask;

    /// Softmax attention of one query head in f64, straight from the definition.
    /// `k [n, d]` and `v [n, dv]` hold that head's rows only.
    fn reference(q: &[f32], k: &[f32], v: &[f32], n: usize, dv: usize) -> Vec<f64> {
        let d = q.len();
        let dot = |j: usize| -> f64 {
            (0..d)
                .map(|c| f64::from(q[c]) * f64::from(k[j * d + c]))
                .sum::<f64>()
                / (d as f64).sqrt()
        };
        let s: Vec<f64> = (0..n).map(dot).collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        (0..dv)
            .map(|c| (0..n).map(|j| e[j] * f64::from(v[j * dv + c])).sum::<f64>() / sum)
            .collect()
    }

    #[test]
    fn rows_match_the_f64_definition() {
        // 2 KV heads of 3 query heads each, d 32, dv 48, 1501 keys (a partial vector of scores).
        let (hkv, group, d, dv, n) = (2, 3, 32, 48, 1501);
        let mut s = 7u32;
        let mut val = || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 4.0 - 2.0
        };
        let q: Vec<f32> = (0..hkv * group * d).map(|_| val()).collect();
        let k: Vec<f32> = (0..n * hkv * d).map(|_| val()).collect();
        let v: Vec<f32> = (0..n * hkv * dv).map(|_| val()).collect();
        let a = SdpaArgs {
            heads: hkv * group,
            kv_heads: hkv,
            d,
            dv,
            scale: 1.0 / (d as f32).sqrt(),
            mask: &Mask::None,
            q_pos: 0,
            kv_len: n,
        };
        if !applies(&a) {
            eprintln!("AVX-512F not detected: the rows kernel is not tested here");
            return;
        }
        let mut scores = Vec::new();
        for kh in 0..hkv {
            let qrows = &q[kh * group * d..(kh + 1) * group * d];
            let mut o = vec![f32::NAN; group * dv];
            attend(&a, qrows, &k, &v, kh, 0..n, &mut scores, &mut o);
            for g in 0..group {
                let kk: Vec<f32> = (0..n)
                    .flat_map(|j| k[(j * hkv + kh) * d..][..d].to_vec())
                    .collect();
                let vv: Vec<f32> = (0..n)
                    .flat_map(|j| v[(j * hkv + kh) * dv..][..dv].to_vec())
                    .collect();
                let want = reference(&qrows[g * d..][..d], &kk, &vv, n, dv);
                for (c, w) in want.iter().enumerate() {
                    let got = f64::from(o[g * dv + c]);
                    assert!(
                        (got - w).abs() < 1e-5,
                        "head {kh}/{g} col {c}: {got} vs {w}"
                    );
                }
            }
        }
    }
}
