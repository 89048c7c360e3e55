//! AVX2 + FMA + F16C row kernels (x86-64). Same arithmetic as the portable kernels: integer
//! dot products per (sub-)block through `maddubs` (unsigned weight codes times signed 8-bit
//! activations, or the sign trick for signed codes), then one f32 FMA per block.
//!
//! The public wrappers are safe to call only on a CPU with AVX2, FMA and F16C; the module is
//! private to the kernels, which select it only after detecting them.

use super::act::{Q8Block, Q8KBlock};
use crate::quant::kquants::{q3_k_scales, scale_min_k4};
use std::arch::x86_64::*;

macro_rules! wrapper {
    ($(#[$doc:meta])* $name:ident, $imp:ident, $act:ty) => {
        $(#[$doc])*
        pub(super) fn $name(w: &[u8], a: &[$act]) -> f32 {
            debug_assert!(super::avx2_detected());
            // SAFETY: the kernels select this path only when AVX2, FMA and F16C are detected;
            // the implementation reads only inside `w` and `a` (whole blocks of each).
            unsafe { $imp(w, a) }
        }
    };
}

wrapper!(/** f32 weights. */ f32_row, f32_imp, f32);
wrapper!(/** f16 weights. */ f16_row, f16_imp, f32);
wrapper!(/** bf16 weights. */ bf16_row, bf16_imp, f32);
wrapper!(/** q8_0 weights. */ q8_0, q8_0_imp, Q8Block);
wrapper!(/** q4_0 weights. */ q4_0, q4_0_imp, Q8Block);
wrapper!(/** q4_1 weights. */ q4_1, q4_1_imp, Q8Block);
wrapper!(/** q5_0 weights. */ q5_0, q5_0_imp, Q8Block);
wrapper!(/** q5_1 weights. */ q5_1, q5_1_imp, Q8Block);
wrapper!(/** q2_k weights. */ q2_k, q2_k_imp, Q8KBlock);
wrapper!(/** q3_k weights. */ q3_k, q3_k_imp, Q8KBlock);
wrapper!(/** q4_k weights. */ q4_k, q4_k_imp, Q8KBlock);
wrapper!(/** q5_k weights. */ q5_k, q5_k_imp, Q8KBlock);
wrapper!(/** q6_k weights. */ q6_k, q6_k_imp, Q8KBlock);

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The little-endian f16 at `p` as f32.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// Eight i32 sums of products of signed bytes (`w` may be -128, `a` must not).
#[inline(always)]
unsafe fn dot_i8(w: __m256i, a: __m256i) -> __m256i {
    let p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Eight i32 sums of products of unsigned codes `q` (< 64) and signed bytes `a`.
#[inline(always)]
unsafe fn dot_u8(q: __m256i, a: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1))
}

/// `maddubs(q, a)` summed in pairs with i16 weights `sc` (per 16-bit lane).
#[inline(always)]
unsafe fn dot_u8_scaled(q: __m256i, a: __m256i, sc: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), sc)
}

/// Scale `lo` for bytes 0..16, `hi` for bytes 16..32 (as i16 lanes for [`dot_u8_scaled`]).
#[inline(always)]
unsafe fn scale_pair(lo: i32, hi: i32) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi as i16), _mm_set1_epi16(lo as i16))
}

/// The 32 nibbles of the 16 bytes at `p`: low nibbles in bytes 0..16, high in 16..32.
#[inline(always)]
unsafe fn nibbles32(p: *const u8) -> __m256i {
    let t = _mm_loadu_si128(p as *const __m128i);
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(t, 4), t),
        _mm256_set1_epi8(15),
    )
}

/// 0xFF in byte `t` where bit `t` of the little-endian u32 at `p` is set, else 0.
#[inline(always)]
unsafe fn bits32(p: *const u8) -> __m256i {
    let x = (p as *const u32).read_unaligned();
    let spread = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), spread);
    let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi64x(-1))
}

/// `value` in bytes where bit `bit` of the corresponding byte of `v` is set, else 0.
#[inline(always)]
unsafe fn bit_to(v: __m256i, bit: u32, value: i8) -> __m256i {
    let m = _mm256_set1_epi8((1u32 << bit) as u8 as i8);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(v, m), m);
    _mm256_and_si256(set, _mm256_set1_epi8(value))
}

/// Bytes of `v` shifted right by `s` bits, keeping the low `mask` bits.
#[inline(always)]
unsafe fn field(v: __m256i, s: u32, mask: i8) -> __m256i {
    _mm256_and_si256(
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(s as i32)),
        _mm256_set1_epi8(mask),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_imp(w: &[u8], x: &[f32]) -> f32 {
    let n = x.len().min(w.len() / 4);
    let wp = w.as_ptr() as *const f32;
    let xp = x.as_ptr();
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (u, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * u;
            *a = _mm256_fmadd_ps(_mm256_loadu_ps(wp.add(o)), _mm256_loadu_ps(xp.add(o)), *a);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(wp.add(i)),
            _mm256_loadu_ps(xp.add(i)),
            acc[0],
        );
        i += 8;
    }
    let mut s = hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    while i < n {
        s += wp.add(i).read_unaligned() * x[i];
        i += 1;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_imp(w: &[u8], x: &[f32]) -> f32 {
    let n = x.len().min(w.len() / 2);
    let wp = w.as_ptr();
    let xp = x.as_ptr();
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        for (u, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * u;
            let wv = _mm256_cvtph_ps(_mm_loadu_si128(wp.add(2 * o) as *const __m128i));
            *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(o)), *a);
        }
        i += 16;
    }
    let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
    while i < n {
        s += f16_at(wp.add(2 * i)) * x[i];
        i += 1;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_imp(w: &[u8], x: &[f32]) -> f32 {
    let n = x.len().min(w.len() / 2);
    let wp = w.as_ptr();
    let xp = x.as_ptr();
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        for (u, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * u;
            let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(wp.add(2 * o) as *const __m128i));
            let wv = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
            *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(o)), *a);
        }
        i += 16;
    }
    let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
    while i < n {
        let bits = (wp.add(2 * i) as *const u16).read_unaligned();
        s += f32::from_bits((bits as u32) << 16) * x[i];
        i += 1;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (b, q) in w.chunks_exact(34).zip(a) {
        let p = b.as_ptr();
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        let s = dot_i8(load(p.add(2)), load(q.qs.as_ptr() as *const u8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    hsum(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let eight = _mm256_set1_epi8(8);
    for (b, q) in w.chunks_exact(18).zip(a) {
        let p = b.as_ptr();
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        let v = _mm256_sub_epi8(nibbles32(p.add(2)), eight);
        let s = dot_i8(v, load(q.qs.as_ptr() as *const u8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    hsum(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    for (b, q) in w.chunks_exact(20).zip(a) {
        let p = b.as_ptr();
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        mins += f16_at(p.add(2)) * q.d * q.sum as f32;
        let s = dot_u8(nibbles32(p.add(4)), load(q.qs.as_ptr() as *const u8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    hsum(acc) + mins
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let f0 = _mm256_set1_epi8(0xF0u8 as i8);
    for (b, q) in w.chunks_exact(22).zip(a) {
        let p = b.as_ptr();
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        // q - 16: the nibble with the high bits all set (as i8) where the fifth bit is clear.
        let v = _mm256_or_si256(
            nibbles32(p.add(6)),
            _mm256_andnot_si256(bits32(p.add(2)), f0),
        );
        let s = dot_i8(v, load(q.qs.as_ptr() as *const u8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    hsum(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    let sixteen = _mm256_set1_epi8(16);
    for (b, q) in w.chunks_exact(24).zip(a) {
        let p = b.as_ptr();
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        mins += f16_at(p.add(2)) * q.d * q.sum as f32;
        let v = _mm256_or_si256(
            nibbles32(p.add(8)),
            _mm256_and_si256(bits32(p.add(4)), sixteen),
        );
        let s = dot_u8(v, load(q.qs.as_ptr() as *const u8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    hsum(acc) + mins
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    for (b, q) in w.chunks_exact(84).zip(a) {
        let p = b.as_ptr();
        let scales = &b[0..16];
        let msum: i32 = scales
            .iter()
            .zip(&q.bsums)
            .map(|(&s, &bs)| (s >> 4) as i32 * bs)
            .sum();
        mins += f16_at(p.add(82)) * q.d * msum as f32;
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..2 {
            let v = load(p.add(16 + 32 * c));
            for s in 0..4 {
                let t = 4 * c + s;
                let sc = scale_pair((scales[2 * t] & 15) as i32, (scales[2 * t + 1] & 15) as i32);
                let x = dot_u8_scaled(field(v, 2 * s as u32, 3), load(qa.add(32 * t)), sc);
                sumi = _mm256_add_epi32(sumi, x);
            }
        }
        let d = _mm256_set1_ps(f16_at(p.add(80)) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut offsets = 0.0f32;
    for (b, q) in w.chunks_exact(110).zip(a) {
        let p = b.as_ptr();
        let sc = q3_k_scales(&b[96..108]);
        let offset: i32 = sc.iter().zip(&q.bsums).map(|(&s, &bs)| s as i32 * bs).sum();
        let d = f16_at(p.add(108)) * q.d;
        offsets += d * (4 * offset) as f32;
        let hm = load(p);
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..2 {
            let v = load(p.add(32 + 32 * c));
            for s in 0..4 {
                let t = 4 * c + s;
                let codes = _mm256_or_si256(field(v, 2 * s as u32, 3), bit_to(hm, t as u32, 4));
                let pair = scale_pair(sc[2 * t] as i32, sc[2 * t + 1] as i32);
                sumi = _mm256_add_epi32(sumi, dot_u8_scaled(codes, load(qa.add(32 * t)), pair));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - offsets
}

/// The eight 6-bit scales of q4_k / q5_k as i32 and their min term against the bsums.
#[inline(always)]
fn k4_scales(scales: &[u8], q: &Q8KBlock) -> ([i32; 8], i32) {
    let mut sc = [0i32; 8];
    let mut mins = 0;
    for (j, s) in sc.iter_mut().enumerate() {
        let (d, m) = scale_min_k4(j, scales);
        *s = d as i32;
        mins += m as i32 * (q.bsums[2 * j] + q.bsums[2 * j + 1]);
    }
    (sc, mins)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    let m4 = _mm256_set1_epi8(15);
    for (b, q) in w.chunks_exact(144).zip(a) {
        let p = b.as_ptr();
        let (sc, msum) = k4_scales(&b[4..16], q);
        mins += f16_at(p.add(2)) * q.d * msum as f32;
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let v = load(p.add(16 + 32 * c));
            let lo = _mm256_and_si256(v, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            let s_lo = _mm256_set1_epi16(sc[2 * c] as i16);
            let s_hi = _mm256_set1_epi16(sc[2 * c + 1] as i16);
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(lo, load(qa.add(64 * c)), s_lo));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(hi, load(qa.add(64 * c + 32)), s_hi));
        }
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    let m4 = _mm256_set1_epi8(15);
    for (b, q) in w.chunks_exact(176).zip(a) {
        let p = b.as_ptr();
        let (sc, msum) = k4_scales(&b[4..16], q);
        mins += f16_at(p.add(2)) * q.d * msum as f32;
        let qh = load(p.add(16));
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let v = load(p.add(48 + 32 * c));
            let lo = _mm256_or_si256(_mm256_and_si256(v, m4), bit_to(qh, 2 * c as u32, 16));
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                bit_to(qh, 2 * c as u32 + 1, 16),
            );
            let s_lo = _mm256_set1_epi16(sc[2 * c] as i16);
            let s_hi = _mm256_set1_epi16(sc[2 * c + 1] as i16);
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(lo, load(qa.add(64 * c)), s_lo));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(hi, load(qa.add(64 * c + 32)), s_hi));
        }
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

/// Bits `s..s+2` of each byte of `qh`, moved to bits 4..6 (the high part of a q6_k code).
#[inline(always)]
unsafe fn high2(qh: __m256i, s: u32) -> __m256i {
    _mm256_slli_epi16(field(qh, s, 3), 4)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut offsets = 0.0f32;
    let m4 = _mm256_set1_epi8(15);
    for (b, q) in w.chunks_exact(210).zip(a) {
        let p = b.as_ptr();
        let sc: [i32; 16] = std::array::from_fn(|j| b[192 + j] as i8 as i32);
        let offset: i32 = sc.iter().zip(&q.bsums).map(|(&s, &bs)| s * bs).sum();
        let d = f16_at(p.add(208)) * q.d;
        offsets += d * (32 * offset) as f32;
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for h in 0..2 {
            let ql0 = load(p.add(64 * h));
            let ql1 = load(p.add(64 * h + 32));
            let qh = load(p.add(128 + 32 * h));
            let codes = [
                _mm256_or_si256(_mm256_and_si256(ql0, m4), high2(qh, 0)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), high2(qh, 2)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                    high2(qh, 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    high2(qh, 6),
                ),
            ];
            for (t, &v) in codes.iter().enumerate() {
                let j = 8 * h + 2 * t;
                let pair = scale_pair(sc[j], sc[j + 1]);
                let x = dot_u8_scaled(v, load(qa.add(128 * h + 32 * t)), pair);
                sumi = _mm256_add_epi32(sumi, x);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - offsets
}
