//! AVX2 + FMA + F16C row kernels (x86-64). Same arithmetic as the portable kernels: integer
//! dot products per (sub-)block through `maddubs` (unsigned weight codes times signed 8-bit
//! activations, or the sign trick for signed codes), then one f32 FMA per block. The f16
//! scales of the 32-value blocks come from a 256 KiB table (a load instead of a conversion),
//! and every loop prefetches the weights 4 KiB ahead.
//!
//! The public wrappers are safe to call only on a CPU with AVX2, FMA and F16C; the module is
//! private to the kernels, which select it only after detecting them.

use super::act::{Q8Block, Q8KBlock};
use super::RowDot4;
use crate::dtype::DType;
use std::arch::x86_64::*;
use std::sync::OnceLock;

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

macro_rules! wrapper4 {
    ($(#[$doc:meta])* $name:ident, $imp:ident) => {
        wrapper4!($(#[$doc])* $name, $imp, f32);
    };
    ($(#[$doc:meta])* $name:ident, $imp:ident, $act:ty) => {
        $(#[$doc])*
        pub(super) fn $name(w: &[u8], x: [&[$act]; 4]) -> [f32; 4] {
            debug_assert!(super::avx2_detected());
            // SAFETY: as for `wrapper!`.
            unsafe { $imp(w, x) }
        }
    };
}

wrapper4!(/** f32 weights, four activation rows. */ f32_rows4, f32_rows4_imp);
wrapper4!(/** f16 weights, four activation rows. */ f16_rows4, f16_rows4_imp);
wrapper4!(/** bf16 weights, four activation rows. */ bf16_rows4, bf16_rows4_imp);
wrapper4!(/** q4_1 weights, four activation rows. */ q4_1_rows4, q4_1_rows4_imp, Q8Block);
wrapper4!(/** q4_k weights, four activation rows. */ q4_k_rows4, q4_k_rows4_imp, Q8KBlock);
wrapper4!(/** q8_0 weights, four activation rows. */ q8_0_rows4, q8_0_rows4_imp, Q8Block);
wrapper4!(/** q4_0 weights, four activation rows. */ q4_0_rows4, q4_0_rows4_imp, Q8Block);
wrapper4!(/** q5_0 weights, four activation rows. */ q5_0_rows4, q5_0_rows4_imp, Q8Block);
wrapper4!(/** q5_k weights, four activation rows. */ q5_k_rows4, q5_k_rows4_imp, Q8KBlock);
wrapper4!(/** q6_k weights, four activation rows. */ q6_k_rows4, q6_k_rows4_imp, Q8KBlock);
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

/// The four-row kernel of a 32-value block encoding, where there is one.
pub(super) fn block_rows4(dtype: DType) -> Option<RowDot4<Q8Block>> {
    match dtype {
        DType::Q8_0 => Some(q8_0_rows4),
        DType::Q4_0 => Some(q4_0_rows4),
        DType::Q4_1 => Some(q4_1_rows4),
        DType::Q5_0 => Some(q5_0_rows4),
        _ => None,
    }
}

/// The four-row kernel of a k-quant encoding, where there is one.
pub(super) fn k_rows4(dtype: DType) -> Option<RowDot4<Q8KBlock>> {
    match dtype {
        DType::Q4K => Some(q4_k_rows4),
        DType::Q5K => Some(q5_k_rows4),
        DType::Q6K => Some(q6_k_rows4),
        _ => None,
    }
}

#[inline(always)]
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The little-endian f16 at `p` as f32. (Broadcast first: inserting into a register would
/// make the conversion wait for that register's last writer.)
#[inline(always)]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(bits as i16)))
}

/// Every f16 bit pattern as f32: the per-block scales of the 32-value encodings are looked up
/// (one load) rather than converted (a conversion plus broadcasts, on the busiest ports).
pub(super) fn f16_table() -> *const f32 {
    static TABLE: OnceLock<Box<[f32]>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            (0..=u16::MAX)
                .map(|b| half::f16::from_bits(b).to_f32())
                .collect()
        })
        .as_ptr()
}

/// The little-endian f16 at `p` (looked up in `table`, see [`f16_table`]) times `d`, in all
/// eight lanes.
#[inline(always)]
unsafe fn f16_times(p: *const u8, d: &f32, table: *const f32) -> __m256 {
    let bits = (p as *const u16).read_unaligned();
    _mm256_mul_ps(
        _mm256_broadcast_ss(&*table.add(bits as usize)),
        _mm256_broadcast_ss(d),
    )
}

/// How far ahead of the block being read the weights are prefetched. The hardware prefetcher
/// alone leaves these loops waiting on memory: with about 4 KiB requested ahead, measured
/// matvec rates rose 30 to 60 %.
pub(super) const PREFETCH_AHEAD: usize = 4096;

/// Asks for the cache line at `p` (any address: prefetches do not fault).
#[inline(always)]
pub(super) unsafe fn prefetch(p: *const u8) {
    _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
}

/// Prefetches the lines of the block `pf` bytes after the one at `p` (`bb` bytes long).
#[inline(always)]
pub(super) unsafe fn prefetch_block(p: *const u8, pf: usize, bb: usize) {
    let mut o = 0;
    while o < bb {
        prefetch(p.wrapping_add(pf + o));
        o += 64;
    }
}

/// Sums `d * s` over the 32-value blocks of a row, two blocks per step (two accumulators).
/// `$body` maps (block pointer, activation block, [`f16_table`]) to (scale vector, i32 sums).
macro_rules! sum_blocks32 {
    ($w:expr, $a:expr, $bb:expr, |$p:ident, $q:ident, $t:ident| $body:expr) => {{
        let nb = ($w.len() / $bb).min($a.len());
        let $t = f16_table();
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        let pf = PREFETCH_AHEAD;
        while i + 2 <= nb {
            prefetch($w.as_ptr().wrapping_add(i * $bb + pf));
            let ($p, $q) = ($w.as_ptr().add(i * $bb), &$a[i]);
            let (d0, s0): (__m256, __m256i) = $body;
            let ($p, $q) = ($w.as_ptr().add((i + 1) * $bb), &$a[i + 1]);
            let (d1, s1): (__m256, __m256i) = $body;
            acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(s0), acc0);
            acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(s1), acc1);
            i += 2;
        }
        if i < nb {
            let ($p, $q) = ($w.as_ptr().add(i * $bb), &$a[i]);
            let (d0, s0): (__m256, __m256i) = $body;
            acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(s0), acc0);
        }
        hsum(_mm256_add_ps(acc0, acc1))
    }};
}

/// Sums `d * s` over the 32-value blocks of a row for four activation rows: each weight block
/// is decoded once (`$decode` maps the block pointer and [`f16_table`] to the weight scale and
/// the decoded codes), then `$dot` maps (codes, activation block) to the i32 sums of one row.
macro_rules! rows4_blocks32 {
    ($w:expr, $a:expr, $bb:expr, |$p:ident, $t:ident| $decode:expr, |$c:ident, $q:ident| $dot:expr) => {{
        let a = $a;
        let nb = a
            .iter()
            .map(|r| r.len())
            .min()
            .unwrap_or(0)
            .min($w.len() / $bb);
        let $t = f16_table();
        let mut acc = [_mm256_setzero_ps(); 4];
        for i in 0..nb {
            let $p = $w.as_ptr().add(i * $bb);
            prefetch($p.wrapping_add(PREFETCH_AHEAD));
            let (d, $c): (f32, _) = $decode;
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let $q = &a[r][i];
                let s: __m256i = $dot;
                *acc_r = _mm256_fmadd_ps(_mm256_set1_ps(d * $q.d), _mm256_cvtepi32_ps(s), *acc_r);
            }
        }
        acc.map(|v| hsum(v))
    }};
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

/// The 32 nibbles of the 16 bytes at `p`: low nibbles in bytes 0..16, high in 16..32.
#[inline(always)]
pub(super) unsafe fn nibbles32(p: *const u8) -> __m256i {
    let t = _mm256_broadcastsi128_si256(_mm_loadu_si128(p as *const __m128i));
    let shifted = _mm256_srlv_epi32(t, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    _mm256_and_si256(shifted, _mm256_set1_epi8(15))
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

/// One float weight row against four activation rows: `$load` gives the eight weights at
/// value offset `$o` as f32 (pointer `$wp` to the row), `$scalar` the weight at value `$i`.
macro_rules! float_rows4 {
    ($w:ident, $x:ident, $size:expr, |$wp:ident, $o:ident| $load:expr, |$i:ident| $scalar:expr) => {{
        let n = $x.iter().map(|r| r.len()).min().unwrap_or(0).min($w.len() / $size);
        let $wp = $w.as_ptr();
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut o = 0;
        while o + 8 <= n {
            let wv: __m256 = {
                let $o = o;
                $load
            };
            for (a, r) in acc.iter_mut().zip(&$x) {
                *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(r.as_ptr().add(o)), *a);
            }
            o += 8;
        }
        let mut out = [0.0f32; 4];
        for ((y, a), r) in out.iter_mut().zip(&acc).zip(&$x) {
            *y = hsum(*a);
            for $i in o..n {
                *y += $scalar * r[$i];
            }
        }
        out
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_rows4_imp(w: &[u8], x: [&[f32]; 4]) -> [f32; 4] {
    float_rows4!(
        w,
        x,
        4,
        |wp, o| _mm256_loadu_ps((wp as *const f32).add(o)),
        |i| { (wp as *const f32).add(i).read_unaligned() }
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_rows4_imp(w: &[u8], x: [&[f32]; 4]) -> [f32; 4] {
    float_rows4!(
        w,
        x,
        2,
        |wp, o| _mm256_cvtph_ps(_mm_loadu_si128(wp.add(2 * o) as *const __m128i)),
        |i| f16_at(wp.add(2 * i))
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_rows4_imp(w: &[u8], x: [&[f32]; 4]) -> [f32; 4] {
    float_rows4!(
        w,
        x,
        2,
        |wp, o| {
            let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(wp.add(2 * o) as *const __m128i));
            _mm256_castsi256_ps(_mm256_slli_epi32(h, 16))
        },
        |i| f32::from_bits(((wp.add(2 * i) as *const u16).read_unaligned() as u32) << 16)
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
        prefetch_block((wp as *const u8).wrapping_add(4 * i), PREFETCH_AHEAD, 128);
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
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        prefetch(wp.wrapping_add(2 * i + PREFETCH_AHEAD));
        for (u, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * u;
            let wv = _mm256_cvtph_ps(_mm_loadu_si128(wp.add(2 * o) as *const __m128i));
            *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(o)), *a);
        }
        i += 32;
    }
    let mut s = hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
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
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        prefetch(wp.wrapping_add(2 * i + PREFETCH_AHEAD));
        for (u, a) in acc.iter_mut().enumerate() {
            let o = i + 8 * u;
            let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(wp.add(2 * o) as *const __m128i));
            let wv = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
            *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(o)), *a);
        }
        i += 32;
    }
    let mut s = hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    while i < n {
        let bits = (wp.add(2 * i) as *const u16).read_unaligned();
        s += f32::from_bits((bits as u32) << 16) * x[i];
        i += 1;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    sum_blocks32!(w, a, 34, |p, q, table| {
        let s = dot_i8(load(p.add(2)), load(q.qs.as_ptr() as *const u8));
        (f16_times(p, &q.d, table), s)
    })
}

/// q8_0 against four activation rows: the weight signs are applied to each row's bytes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_rows4_imp(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32!(
        w,
        a,
        34,
        |p, table| {
            let v = load(p.add(2));
            (
                *table.add((p as *const u16).read_unaligned() as usize),
                (v, _mm256_sign_epi8(v, v)),
            )
        },
        |c, q| {
            let p =
                _mm256_maddubs_epi16(c.1, _mm256_sign_epi8(load(q.qs.as_ptr() as *const u8), c.0));
            _mm256_madd_epi16(p, _mm256_set1_epi16(1))
        }
    )
}

/// q4_0 against four activation rows: each block's nibbles are decoded once.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_rows4_imp(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32!(
        w,
        a,
        18,
        |p, table| (
            *table.add((p as *const u16).read_unaligned() as usize),
            nibbles32(p.add(2))
        ),
        |c, q| {
            let s = dot_u8(c, load(q.qs.as_ptr() as *const u8));
            _mm256_sub_epi32(s, _mm256_set1_epi32(q.sum))
        }
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    // sum (q - 8) a = sum q a - 8 sum a: the 8 lanes each take off sum a.
    sum_blocks32!(w, a, 18, |p, q, table| {
        let s = dot_u8(nibbles32(p.add(2)), load(q.qs.as_ptr() as *const u8));
        (
            f16_times(p, &q.d, table),
            _mm256_sub_epi32(s, _mm256_set1_epi32(q.sum)),
        )
    })
}

/// `sum m * d_a * sum(qs)`: the offset term of q4_1 / q5_1 (`m` at byte 2 of each block).
#[inline(always)]
unsafe fn offsets32(w: &[u8], a: &[Q8Block], bb: usize) -> f32 {
    let mut s = 0.0f32;
    for (b, q) in w.chunks_exact(bb).zip(a) {
        s += f16_at(b.as_ptr().add(2)) * q.s;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let dots = sum_blocks32!(w, a, 20, |p, q, table| {
        let s = dot_u8(nibbles32(p.add(4)), load(q.qs.as_ptr() as *const u8));
        (f16_times(p, &q.d, table), s)
    });
    dots + offsets32(w, a, 20)
}

/// q4_1 against four activation rows: each block's nibbles and scales are decoded once.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_rows4_imp(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    let nb = a
        .iter()
        .map(|r| r.len())
        .min()
        .unwrap_or(0)
        .min(w.len() / 20);
    let table = f16_table();
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut off = [0.0f32; 4];
    for i in 0..nb {
        let p = w.as_ptr().add(i * 20);
        prefetch(p.wrapping_add(PREFETCH_AHEAD));
        let nib = nibbles32(p.add(4));
        let d = *table.add((p as *const u16).read_unaligned() as usize);
        let m = *table.add((p.add(2) as *const u16).read_unaligned() as usize);
        for r in 0..4 {
            let q = &a[r][i];
            let s = dot_u8(nib, load(q.qs.as_ptr() as *const u8));
            let dd = _mm256_set1_ps(d * q.d);
            acc[r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(s), acc[r]);
            off[r] += m * q.s;
        }
    }
    let mut out = [0.0f32; 4];
    for r in 0..4 {
        out[r] = hsum(acc[r]) + off[r];
    }
    out
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    // sum (q - 16) a: the 8 lanes each take off 2 sum a.
    let sixteen = _mm256_set1_epi8(16);
    sum_blocks32!(w, a, 22, |p, q, table| {
        let v = _mm256_or_si256(
            nibbles32(p.add(6)),
            _mm256_and_si256(bits32(p.add(2)), sixteen),
        );
        let s = dot_u8(v, load(q.qs.as_ptr() as *const u8));
        (
            f16_times(p, &q.d, table),
            _mm256_sub_epi32(s, _mm256_set1_epi32(2 * q.sum)),
        )
    })
}

/// q5_0 against four activation rows: each block's 5-bit codes are decoded once.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_rows4_imp(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    let sixteen = _mm256_set1_epi8(16);
    rows4_blocks32!(
        w,
        a,
        22,
        |p, table| {
            let v = _mm256_or_si256(
                nibbles32(p.add(6)),
                _mm256_and_si256(bits32(p.add(2)), sixteen),
            );
            (*table.add((p as *const u16).read_unaligned() as usize), v)
        },
        |c, q| {
            let s = dot_u8(c, load(q.qs.as_ptr() as *const u8));
            _mm256_sub_epi32(s, _mm256_set1_epi32(2 * q.sum))
        }
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_imp(w: &[u8], a: &[Q8Block]) -> f32 {
    let sixteen = _mm256_set1_epi8(16);
    let dots = sum_blocks32!(w, a, 24, |p, q, table| {
        let v = _mm256_or_si256(
            nibbles32(p.add(8)),
            _mm256_and_si256(bits32(p.add(4)), sixteen),
        );
        let s = dot_u8(v, load(q.qs.as_ptr() as *const u8));
        (f16_times(p, &q.d, table), s)
    });
    dots + offsets32(w, a, 24)
}

/// `PAIR[j]`: byte shuffle that puts i16 lane `j` of a 128-bit half into every i16 lane.
static PAIR: [[u8; 32]; 8] = pair_masks();
/// `QUAD[u]`: i16 lane `2u` into the low half, lane `2u + 1` into the high half.
static QUAD: [[u8; 32]; 4] = quad_masks();

const fn pair_masks() -> [[u8; 32]; 8] {
    let mut m = [[0u8; 32]; 8];
    let mut j = 0;
    while j < 8 {
        let mut i = 0;
        while i < 32 {
            m[j][i] = (2 * j + (i & 1)) as u8;
            i += 1;
        }
        j += 1;
    }
    m
}

const fn quad_masks() -> [[u8; 32]; 4] {
    let mut m = [[0u8; 32]; 4];
    let mut u = 0;
    while u < 4 {
        let mut i = 0;
        while i < 32 {
            m[u][i] = (4 * u + if i < 16 { 0 } else { 2 } + (i & 1)) as u8;
            i += 1;
        }
        u += 1;
    }
    m
}

#[inline(always)]
unsafe fn mask(m: &[u8; 32]) -> __m256i {
    load(m.as_ptr())
}

#[inline(always)]
unsafe fn u32_at(p: *const u8) -> u32 {
    (p as *const u32).read_unaligned()
}

/// Eight i16 values (from eight bytes, zero- or sign-extended already) in both 128-bit halves.
#[inline(always)]
unsafe fn both_halves(v: __m128i) -> __m256i {
    _mm256_broadcastsi128_si256(v)
}

/// Sixteen signed 8-bit scales as i16 pairs: (scales 0..8, scales 8..16), both halves each.
#[inline(always)]
unsafe fn scales16_i8(scb: __m128i) -> (__m256i, __m256i) {
    (
        both_halves(_mm_cvtepi8_epi16(scb)),
        both_halves(_mm_cvtepi8_epi16(_mm_srli_si128(scb, 8))),
    )
}

/// `sum_j scale[j] * bsums[j]` per lane (16 signed 8-bit scales), as eight i32 lanes.
#[inline(always)]
unsafe fn scale_bsums_i8(scb: __m128i, q: &Q8KBlock) -> __m256i {
    let bs = q.bsums.as_ptr() as *const u8;
    _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_cvtepi8_epi32(scb), load(bs)),
        _mm256_mullo_epi32(
            _mm256_cvtepi8_epi32(_mm_srli_si128(scb, 8)),
            load(bs.add(32)),
        ),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    let m4 = _mm_set1_epi8(15);
    let pf = PREFETCH_AHEAD;
    for (b, q) in w.chunks_exact(84).zip(a) {
        let p = b.as_ptr();
        prefetch_block(p, pf, 84);
        let raw = _mm_loadu_si128(p as *const __m128i);
        let scb = _mm_and_si128(raw, m4);
        let mnb = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        let dmin = _mm256_set1_ps(f16_at(p.add(82)) * q.d);
        acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(scale_bsums_i8(mnb, q)), acc_m);
        let (sc_a, sc_b) = scales16_i8(scb);
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..2 {
            let v = load(p.add(16 + 32 * c));
            let sc = if c == 0 { sc_a } else { sc_b };
            for (s, quad) in QUAD.iter().enumerate() {
                let t = 4 * c + s;
                let pair = _mm256_shuffle_epi8(sc, mask(quad));
                let x = dot_u8_scaled(field(v, 2 * s as u32, 3), load(qa.add(32 * t)), pair);
                sumi = _mm256_add_epi32(sumi, x);
            }
        }
        let d = _mm256_set1_ps(f16_at(p.add(80)) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - hsum(acc_m)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let (lo4, lo2) = (0x0f0f_0f0fu32, 0x0303_0303u32);
    let pf = PREFETCH_AHEAD;
    for (b, q) in w.chunks_exact(110).zip(a) {
        let p = b.as_ptr();
        prefetch_block(p, pf, 110);
        let (a0, a1, a2) = (u32_at(p.add(96)), u32_at(p.add(100)), u32_at(p.add(104)));
        let words = [
            (a0 & lo4) | ((a2 & lo2) << 4),
            (a1 & lo4) | (((a2 >> 2) & lo2) << 4),
            ((a0 >> 4) & lo4) | (((a2 >> 4) & lo2) << 4),
            ((a1 >> 4) & lo4) | (((a2 >> 6) & lo2) << 4),
        ];
        let packed = _mm_loadu_si128(words.as_ptr() as *const __m128i);
        let scb = _mm_sub_epi8(packed, _mm_set1_epi8(32));
        // sum (q - 4 [bit clear]) = sum q' - 4 sum a with q' = low | 4 bit: 4 sc.bsums off.
        let mut sumi = _mm256_sub_epi32(
            _mm256_setzero_si256(),
            _mm256_slli_epi32(scale_bsums_i8(scb, q), 2),
        );
        let (sc_a, sc_b) = scales16_i8(scb);
        let hm = load(p);
        let qa = q.qs.as_ptr() as *const u8;
        for c in 0..2 {
            let v = load(p.add(32 + 32 * c));
            let sc = if c == 0 { sc_a } else { sc_b };
            for (s, quad) in QUAD.iter().enumerate() {
                let t = 4 * c + s;
                let codes = _mm256_or_si256(field(v, 2 * s as u32, 3), bit_to(hm, t as u32, 4));
                let pair = _mm256_shuffle_epi8(sc, mask(quad));
                sumi = _mm256_add_epi32(sumi, dot_u8_scaled(codes, load(qa.add(32 * t)), pair));
            }
        }
        let d = _mm256_set1_ps(f16_at(p.add(108)) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc)
}

/// The eight 6-bit scales (as i16 in both halves) and mins (as i32) of q4_k / q5_k.
#[inline(always)]
unsafe fn k4_scales(p: *const u8) -> (__m256i, __m256i) {
    let (u0, u1, u2) = (u32_at(p), u32_at(p.add(4)), u32_at(p.add(8)));
    let (lo6, lo4, lo2) = (0x3f3f_3f3fu32, 0x0f0f_0f0fu32, 0x0303_0303u32);
    let sc_hi = (u2 & lo4) | (((u0 >> 6) & lo2) << 4);
    let mn_hi = ((u2 >> 4) & lo4) | (((u1 >> 6) & lo2) << 4);
    let sc = (u0 & lo6) as u64 | ((sc_hi as u64) << 32);
    let mn = (u1 & lo6) as u64 | ((mn_hi as u64) << 32);
    (
        both_halves(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64))),
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mn as i64)),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(15);
    let pf = PREFETCH_AHEAD;
    for (b, q) in w.chunks_exact(144).zip(a) {
        let p = b.as_ptr();
        prefetch_block(p, pf, 144);
        let (sc, mn) = k4_scales(p.add(4));
        let msum = _mm256_mullo_epi32(mn, load(q.bsums32.as_ptr() as *const u8));
        let dmin = _mm256_set1_ps(f16_at(p.add(2)) * q.d);
        acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m);
        let qa = q.qs.as_ptr() as *const u8;
        let mut sumi = _mm256_setzero_si256();
        for c in 0..4 {
            let v = load(p.add(16 + 32 * c));
            let lo = _mm256_and_si256(v, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            let s_lo = _mm256_shuffle_epi8(sc, mask(&PAIR[2 * c]));
            let s_hi = _mm256_shuffle_epi8(sc, mask(&PAIR[2 * c + 1]));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(lo, load(qa.add(64 * c)), s_lo));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(hi, load(qa.add(64 * c + 32)), s_hi));
        }
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - hsum(acc_m)
}

/// The 256 codes (0..16) of the q4_k block at `p` as eight vectors of 32, in value order.
#[inline(always)]
unsafe fn q4k_codes(p: *const u8) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(15);
    let mut codes = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let v = load(p.add(16 + 32 * c));
        codes[2 * c] = _mm256_and_si256(v, m4);
        codes[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    codes
}

/// The 256 codes (0..32) of the q5_k block at `p` as eight vectors of 32, in value order.
#[inline(always)]
unsafe fn q5k_codes(p: *const u8) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(15);
    let qh = load(p.add(16));
    let mut codes = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let v = load(p.add(48 + 32 * c));
        let (lo, hi) = (2 * c as u32, 2 * c as u32 + 1);
        codes[2 * c] = _mm256_or_si256(_mm256_and_si256(v, m4), bit_to(qh, lo, 16));
        codes[2 * c + 1] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
            bit_to(qh, hi, 16),
        );
    }
    codes
}

/// The 256 codes (0..64, the stored `q + 32`) of the q6_k block at `p` as eight vectors of
/// 32, in value order.
#[inline(always)]
unsafe fn q6k_codes(p: *const u8) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(15);
    let mut codes = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let ql0 = load(p.add(64 * h));
        let ql1 = load(p.add(64 * h + 32));
        let qh = load(p.add(128 + 32 * h));
        codes[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, m4), high2(qh, 0));
        codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), high2(qh, 2));
        codes[4 * h + 2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
            high2(qh, 4),
        );
        codes[4 * h + 3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
            high2(qh, 6),
        );
    }
    codes
}

/// q4_k / q5_k (blocks of `bb` bytes, codes from `codes_at`) against four activation rows:
/// each block's codes and scales are decoded once.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn k4_rows4(
    w: &[u8],
    a: [&[Q8KBlock]; 4],
    bb: usize,
    codes_at: impl Fn(*const u8) -> [__m256i; 8],
) -> [f32; 4] {
    let nb = a
        .iter()
        .map(|r| r.len())
        .min()
        .unwrap_or(0)
        .min(w.len() / bb);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut acc_m = [_mm256_setzero_ps(); 4];
    for i in 0..nb {
        let p = w.as_ptr().add(i * bb);
        prefetch_block(p, PREFETCH_AHEAD, bb);
        let (sc, mn) = k4_scales(p.add(4));
        let (dw, dminw) = (f16_at(p), f16_at(p.add(2)));
        let codes = codes_at(p);
        let scales: [__m256i; 8] = std::array::from_fn(|j| _mm256_shuffle_epi8(sc, mask(&PAIR[j])));
        for r in 0..4 {
            let q = &a[r][i];
            let msum = _mm256_mullo_epi32(mn, load(q.bsums32.as_ptr() as *const u8));
            acc_m[r] = _mm256_fmadd_ps(
                _mm256_set1_ps(dminw * q.d),
                _mm256_cvtepi32_ps(msum),
                acc_m[r],
            );
            let qa = q.qs.as_ptr() as *const u8;
            let mut sumi = _mm256_setzero_si256();
            for j in 0..8 {
                sumi = _mm256_add_epi32(
                    sumi,
                    dot_u8_scaled(codes[j], load(qa.add(32 * j)), scales[j]),
                );
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * q.d), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    let mut out = [0.0f32; 4];
    for r in 0..4 {
        out[r] = hsum(acc[r]) - hsum(acc_m[r]);
    }
    out
}

/// q4_k against four activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_rows4_imp(w: &[u8], a: [&[Q8KBlock]; 4]) -> [f32; 4] {
    k4_rows4(w, a, 144, |p| q4k_codes(p))
}

/// q5_k against four activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_rows4_imp(w: &[u8], a: [&[Q8KBlock]; 4]) -> [f32; 4] {
    k4_rows4(w, a, 176, |p| q5k_codes(p))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(15);
    let pf = PREFETCH_AHEAD;
    for (b, q) in w.chunks_exact(176).zip(a) {
        let p = b.as_ptr();
        prefetch_block(p, pf, 176);
        let (sc, mn) = k4_scales(p.add(4));
        let msum = _mm256_mullo_epi32(mn, load(q.bsums32.as_ptr() as *const u8));
        let dmin = _mm256_set1_ps(f16_at(p.add(2)) * q.d);
        acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m);
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
            let s_lo = _mm256_shuffle_epi8(sc, mask(&PAIR[2 * c]));
            let s_hi = _mm256_shuffle_epi8(sc, mask(&PAIR[2 * c + 1]));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(lo, load(qa.add(64 * c)), s_lo));
            sumi = _mm256_add_epi32(sumi, dot_u8_scaled(hi, load(qa.add(64 * c + 32)), s_hi));
        }
        let d = _mm256_set1_ps(f16_at(p) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - hsum(acc_m)
}

/// Bits `s..s+2` of each byte of `qh`, moved to bits 4..6 (the high part of a q6_k code).
#[inline(always)]
unsafe fn high2(qh: __m256i, s: u32) -> __m256i {
    _mm256_slli_epi16(field(qh, s, 3), 4)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_imp(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(15);
    let pf = PREFETCH_AHEAD;
    for (b, q) in w.chunks_exact(210).zip(a) {
        let p = b.as_ptr();
        prefetch_block(p, pf, 210);
        let scb = _mm_loadu_si128(p.add(192) as *const __m128i);
        // sum (q - 32) a: 32 sc.bsums off.
        let mut sumi = _mm256_sub_epi32(
            _mm256_setzero_si256(),
            _mm256_slli_epi32(scale_bsums_i8(scb, q), 5),
        );
        let (sc_a, sc_b) = scales16_i8(scb);
        let qa = q.qs.as_ptr() as *const u8;
        for h in 0..2 {
            let ql0 = load(p.add(64 * h));
            let ql1 = load(p.add(64 * h + 32));
            let qh = load(p.add(128 + 32 * h));
            let sc = if h == 0 { sc_a } else { sc_b };
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
                let pair = _mm256_shuffle_epi8(sc, mask(&QUAD[t]));
                let x = dot_u8_scaled(v, load(qa.add(128 * h + 32 * t)), pair);
                sumi = _mm256_add_epi32(sumi, x);
            }
        }
        let d = _mm256_set1_ps(f16_at(p.add(208)) * q.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc)
}

/// q6_k against four activation rows: each block's codes and scales are decoded once.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_rows4_imp(w: &[u8], a: [&[Q8KBlock]; 4]) -> [f32; 4] {
    let nb = a
        .iter()
        .map(|r| r.len())
        .min()
        .unwrap_or(0)
        .min(w.len() / 210);
    let mut acc = [_mm256_setzero_ps(); 4];
    for i in 0..nb {
        let p = w.as_ptr().add(i * 210);
        prefetch_block(p, PREFETCH_AHEAD, 210);
        let scb = _mm_loadu_si128(p.add(192) as *const __m128i);
        let (sc_a, sc_b) = scales16_i8(scb);
        let codes = q6k_codes(p);
        let scales: [__m256i; 8] = std::array::from_fn(|j| {
            let sc = if j < 4 { sc_a } else { sc_b };
            _mm256_shuffle_epi8(sc, mask(&QUAD[j % 4]))
        });
        let dw = f16_at(p.add(208));
        for r in 0..4 {
            let q = &a[r][i];
            // sum (q - 32) a: 32 sc.bsums off.
            let mut sumi = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(scale_bsums_i8(scb, q), 5),
            );
            let qa = q.qs.as_ptr() as *const u8;
            for j in 0..8 {
                sumi = _mm256_add_epi32(
                    sumi,
                    dot_u8_scaled(codes[j], load(qa.add(32 * j)), scales[j]),
                );
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * q.d), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    acc.map(|v| hsum(v))
}

/// Weight rows of one panel of [`panel_matmul`] / [`k_panel_matmul`].
const PANEL: usize = 8;

/// Whether [`panel_matmul`] (32-value encodings) or [`k_panel_matmul`] (k-quants) runs `dtype`.
pub(super) fn has_panel(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q5_1
            | DType::Q4K
            | DType::Q5K
            | DType::Q6K
    )
}

/// Eight weight rows decoded for [`panel_rows_with`]: per 32-value block, eight vectors of
/// unsigned codes (vector `s` holds values `4s..4s + 4` of the eight rows, one 32-bit lane per
/// row), and the rows' scales `d` and offsets `m` (a weight is `d * code + m`).
struct Panel {
    codes: Vec<__m256i>,
    d: Vec<f32>,
    m: Vec<f32>,
    /// The offset multiplies the activation block's `s` (q4_1 / q5_1, as ggml's
    /// `block_q8_1`), not the exact `d * sum` (q4_0 / q5_0, whose offset ggml applies to the
    /// integer codes).
    offset_by_s: bool,
}

/// The output pointer of the panel kernels, shared by their tasks (each writes its own
/// columns).
struct OutPtr(*mut f32);

// SAFETY: the tasks of `panel_batches` write disjoint columns of the output through it.
unsafe impl Sync for OutPtr {}
unsafe impl Send for OutPtr {}

impl OutPtr {
    fn get(&self) -> *mut f32 {
        self.0
    }
}

/// `Y[m, n] = X W^T` for the 32-value encodings of [`has_panel`], eight weight rows at a time:
/// each panel of eight rows is decoded once (codes interleaved so that one `maddubs` or
/// `vpdpbusd` serves all eight rows and one f32 FMA scales eight sums), then run against
/// every activation row; `vnni` selects [`panel_rows_vnni`] (only where detected). `acts`
/// holds `m` rows of `k / 32` blocks.
#[allow(clippy::too_many_arguments)]
pub(super) fn panel_matmul(
    dtype: DType,
    vnni: bool,
    w: &[u8],
    n: usize,
    k: usize,
    acts: &[Q8Block],
    m: usize,
    y: &mut [f32],
) {
    debug_assert!(super::avx2_detected() && has_panel(dtype));
    debug_assert!(!vnni || super::vnni_detected());
    let nb = k / 32;
    let row_bytes = nb * dtype.block_bytes();
    assert!(w.len() >= n * row_bytes && acts.len() >= m * nb && y.len() >= m * n);
    let out = OutPtr(y.as_mut_ptr());
    let new_panel = || Panel {
        // SAFETY: all-zero bits are a valid __m256i.
        codes: vec![unsafe { std::mem::zeroed::<__m256i>() }; nb * 8],
        d: vec![0.0; nb * PANEL],
        m: vec![0.0; nb * PANEL],
        offset_by_s: matches!(dtype, DType::Q4_1 | DType::Q5_1),
    };
    panel_batches(
        w,
        n,
        row_bytes,
        m,
        new_panel,
        // SAFETY: AVX2/FMA/F16C detected (the kernels' precondition); `rows_w` holds at most
        // PANEL rows of `nb` blocks.
        |panel, rows_w| unsafe { decode_panel(dtype, rows_w, nb, panel) },
        |panel, r0, r1, n0, rows| {
            // SAFETY: AVX2/FMA/F16C detected, AVX-512 VNNI + VL where `vnni`; `acts` holds `m`
            // rows of `nb` blocks (asserted above), and this task alone writes columns
            // `n0..n0 + rows` of the `m` rows of `n` outputs.
            unsafe {
                if vnni {
                    panel_rows_vnni(panel, nb, acts, r0, r1, out.get(), n, n0, rows);
                } else {
                    panel_rows(panel, nb, acts, r0, r1, out.get(), n, n0, rows);
                }
            }
        },
    );
}

/// Transposes eight vectors of eight 32-bit lanes.
#[inline(always)]
unsafe fn transpose8(v: &[__m256i; 8]) -> [__m256i; 8] {
    let t = |a, b| (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    let (t0, t1) = t(v[0], v[1]);
    let (t2, t3) = t(v[2], v[3]);
    let (t4, t5) = t(v[4], v[5]);
    let (t6, t7) = t(v[6], v[7]);
    let u = |a, b| (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    let (u0, u1) = u(t0, t2);
    let (u2, u3) = u(t1, t3);
    let (u4, u5) = u(t4, t6);
    let (u6, u7) = u(t5, t7);
    [
        _mm256_permute2x128_si256(u0, u4, 0x20),
        _mm256_permute2x128_si256(u1, u5, 0x20),
        _mm256_permute2x128_si256(u2, u6, 0x20),
        _mm256_permute2x128_si256(u3, u7, 0x20),
        _mm256_permute2x128_si256(u0, u4, 0x31),
        _mm256_permute2x128_si256(u1, u5, 0x31),
        _mm256_permute2x128_si256(u2, u6, 0x31),
        _mm256_permute2x128_si256(u3, u7, 0x31),
    ]
}

/// Decodes the rows of `w` (at most [`PANEL`], `nb` blocks each) into `panel`; missing rows
/// get zero codes, scales and offsets.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_panel(dtype: DType, w: &[u8], nb: usize, panel: &mut Panel) {
    let bb = dtype.block_bytes();
    let rows = w.len() / (nb * bb).max(1);
    let sixteen = _mm256_set1_epi8(16);
    for b in 0..nb {
        let mut v = [_mm256_setzero_si256(); 8];
        for (l, v) in v.iter_mut().enumerate().take(rows) {
            let p = w.as_ptr().add(l * nb * bb + b * bb);
            let d = f16_at(p);
            let (codes, off) = match dtype {
                DType::Q4_0 => (nibbles32(p.add(2)), -8.0 * d),
                DType::Q4_1 => (nibbles32(p.add(4)), f16_at(p.add(2))),
                DType::Q5_1 => (
                    _mm256_or_si256(
                        nibbles32(p.add(8)),
                        _mm256_and_si256(bits32(p.add(4)), sixteen),
                    ),
                    f16_at(p.add(2)),
                ),
                _ => (
                    _mm256_or_si256(
                        nibbles32(p.add(6)),
                        _mm256_and_si256(bits32(p.add(2)), sixteen),
                    ),
                    -16.0 * d,
                ),
            };
            *v = codes;
            panel.d[b * PANEL + l] = d;
            panel.m[b * PANEL + l] = off;
        }
        for l in rows..PANEL {
            panel.d[b * PANEL + l] = 0.0;
            panel.m[b * PANEL + l] = 0.0;
        }
        let t = transpose8(&v);
        panel.codes[b * 8..b * 8 + 8].copy_from_slice(&t);
    }
}

/// The eight outputs of a decoded panel for each of the `m` activation rows, written to
/// `y[r * n + n0 ..][..rows]`; `isum` maps a block's eight code vectors and its activation
/// bytes (as i32 groups of four) to the rows' i32 sums of code times activation. Then per
/// block, with f32 FMAs: `acc += m * off_a`, `acc += (d * d_a) * isum`, where `off_a` is the
/// activation block's `s` (q4_1 / q5_1) or `d_a * sum_a` (q4_0 / q5_0).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn panel_rows_with(
    panel: &Panel,
    nb: usize,
    acts: &[Q8Block],
    r0: usize,
    r1: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
    isum: impl Fn(*const __m256i, *const i32) -> __m256i + Copy,
) {
    let mut r = r0;
    while r + PANEL_ACT_ROWS <= r1 {
        panel_tile::<PANEL_ACT_ROWS>(panel, nb, acts, r, y, n, n0, rows, isum);
        r += PANEL_ACT_ROWS;
    }
    while r < r1 {
        panel_tile::<1>(panel, nb, acts, r, y, n, n0, rows, isum);
        r += 1;
    }
}

/// Activation rows [`panel_rows_with`] runs together, so that each block's code vectors are
/// loaded once for all of them.
const PANEL_ACT_ROWS: usize = 4;

/// [`panel_rows_with`] for the `R` activation rows from `r0`; each row's arithmetic is the
/// same, step for step, whatever `R`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn panel_tile<const R: usize>(
    panel: &Panel,
    nb: usize,
    acts: &[Q8Block],
    r0: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
    isum: impl Fn(*const __m256i, *const i32) -> __m256i,
) {
    let codes = panel.codes.as_ptr();
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let dv = _mm256_loadu_ps(panel.d.as_ptr().add(b * PANEL));
        let mv = _mm256_loadu_ps(panel.m.as_ptr().add(b * PANEL));
        for (i, acc) in acc.iter_mut().enumerate() {
            let q = &acts[(r0 + i) * nb + b];
            let s = isum(codes.add(b * 8), q.qs.as_ptr() as *const i32);
            let offset = if panel.offset_by_s {
                q.s
            } else {
                q.d * q.sum as f32
            };
            *acc = _mm256_fmadd_ps(mv, _mm256_set1_ps(offset), *acc);
            let dd = _mm256_mul_ps(dv, _mm256_set1_ps(q.d));
            *acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(s), *acc);
        }
    }
    for (i, acc) in acc.into_iter().enumerate() {
        store_rows(acc, y.add((r0 + i) * n + n0), rows);
    }
}

/// [`panel_rows_with`] through `maddubs`: codes are below 32, so four `maddubs` results add
/// up in i16 without saturating (4 * 2 * 31 * 127 < 32768).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn panel_rows(
    panel: &Panel,
    nb: usize,
    acts: &[Q8Block],
    r0: usize,
    r1: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
) {
    let ones = _mm256_set1_epi16(1);
    panel_rows_with(panel, nb, acts, r0, r1, y, n, n0, rows, |c, qp| {
        let step = |s: usize| {
            _mm256_maddubs_epi16(*c.add(s), _mm256_set1_epi32(qp.add(s).read_unaligned()))
        };
        let s0 = _mm256_add_epi16(
            _mm256_add_epi16(step(0), step(1)),
            _mm256_add_epi16(step(2), step(3)),
        );
        let s1 = _mm256_add_epi16(
            _mm256_add_epi16(step(4), step(5)),
            _mm256_add_epi16(step(6), step(7)),
        );
        _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones))
    });
}

/// [`panel_rows_with`] through AVX-512 VNNI's `vpdpbusd` (i32 sums of four unsigned-times-
/// signed byte products, no i16 step), in two chains of four: the same i32 sums as
/// [`panel_rows`], so the same outputs bit for bit.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn panel_rows_vnni(
    panel: &Panel,
    nb: usize,
    acts: &[Q8Block],
    r0: usize,
    r1: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
) {
    panel_rows_with(panel, nb, acts, r0, r1, y, n, n0, rows, |c, qp| {
        let mut s = [_mm256_setzero_si256(); 2];
        for i in 0..8 {
            let a = _mm256_set1_epi32(qp.add(i).read_unaligned());
            s[i % 2] = _mm256_dpbusd_epi32(s[i % 2], *c.add(i), a);
        }
        _mm256_add_epi32(s[0], s[1])
    });
}

/// Writes the first `rows` lanes of `acc` to `dst`.
#[inline(always)]
unsafe fn store_rows(acc: __m256, dst: *mut f32, rows: usize) {
    if rows == PANEL {
        _mm256_storeu_ps(dst, acc);
    } else {
        let mut tmp = [0.0f32; PANEL];
        _mm256_storeu_ps(tmp.as_mut_ptr(), acc);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, rows);
    }
}

/// Eight k-quant weight rows decoded for [`k_panel_rows`]. Per 256-value block: 64 vectors
/// of codes (vector `c` holds values `4c..4c + 4` of the eight rows, one 32-bit lane per row,
/// as in [`Panel`]); per group of `256 / G` values a vector of the rows' scales (each as an
/// i16 in both halves of the row's lane); `P` vectors of min pairs (lane: two i16 mins, of
/// the values summed in the activation block's `bsums32` pair (q4_k / q5_k) or `bsums` pair
/// (q6_k)); and the rows' `d` and `dmin`.
struct KPanel {
    codes: Vec<__m256i>,
    scales: Vec<i32>,
    mins: Vec<i32>,
    d: Vec<f32>,
    dmin: Vec<f32>,
}

/// The k-quant panel's shape for `dtype`: (block bytes, scale groups `G`, min pairs `P`).
/// `G` is as many groups as keep the i16 sums of `maddubs` from saturating: 256 / G values of
/// codes below 16 (q4_k), 32 (q5_k) or 64 (q6_k) times activations up to 127 in magnitude.
fn k_panel_shape(dtype: DType) -> (usize, usize, usize) {
    match dtype {
        DType::Q4K => (144, 8, 4),
        DType::Q5K => (176, 16, 4),
        _ => (210, 32, 8),
    }
}

/// `Y[m, n] = X W^T` for the k-quants of [`has_panel`] (q4_k, q5_k, q6_k), eight weight rows
/// at a time, as [`panel_matmul`]. Per block and output: the exact i32 sums `isum =
/// sum_j sc_j * sum(code * a over group j)` and `msum = sum_j mn_j * bsum_j` (q6_k: `mn_j = 32
/// sc_j`), then in f32, in block order, as the portable kernels (bit for bit):
/// `acc += (d * d_a) * isum - (dmin * d_a) * msum` (q4_k / q5_k) or
/// `acc += (d * d_a) * (isum - msum)` (q6_k). `acts` holds `m` rows of `k / 256` blocks.
/// Batched as [`panel_batches`] says (llama-1b shape pp512 on an Intel Xeon, 2 threads: +8-10%
/// over one panel at a time).
#[allow(clippy::too_many_arguments)]
pub(super) fn k_panel_matmul(
    dtype: DType,
    vnni: bool,
    w: &[u8],
    n: usize,
    k: usize,
    acts: &[Q8KBlock],
    m: usize,
    y: &mut [f32],
) {
    debug_assert!(super::avx2_detected() && has_panel(dtype));
    let (bb, g, p) = k_panel_shape(dtype);
    let nb = k / 256;
    let row_bytes = nb * bb;
    assert!(w.len() >= n * row_bytes && acts.len() >= m * nb && y.len() >= m * n);
    let out = OutPtr(y.as_mut_ptr());
    let new_panel = || KPanel {
        // SAFETY: all-zero bits are a valid __m256i.
        codes: vec![unsafe { std::mem::zeroed::<__m256i>() }; nb * 64],
        scales: vec![0; nb * g * PANEL],
        mins: vec![0; nb * p * PANEL],
        d: vec![0.0; nb * PANEL],
        dmin: vec![0.0; nb * PANEL],
    };
    let run: KPanelRows = match (dtype, vnni) {
        (DType::Q4K, false) => k_panel_rows::<8, 4, false>,
        (DType::Q5K, false) => k_panel_rows::<16, 4, false>,
        (_, false) => k_panel_rows::<32, 8, true>,
        (DType::Q4K, true) => k_panel_rows_vnni::<8, 4, false>,
        (DType::Q5K, true) => k_panel_rows_vnni::<16, 4, false>,
        (_, true) => k_panel_rows_vnni::<32, 8, true>,
    };
    panel_batches(
        w,
        n,
        row_bytes,
        m,
        new_panel,
        // SAFETY: as in `panel_matmul`.
        |panel, rows_w| unsafe { decode_k_panel(dtype, rows_w, nb, vnni, panel) },
        // SAFETY: as in `panel_matmul`.
        |panel, r0, r1, n0, rows| unsafe { run(panel, nb, acts, r0, r1, out.get(), n, n0, rows) },
    );
}

/// Panels of eight weight rows that [`panel_batches`] decodes together and runs against each
/// chunk of activation rows.
const PANEL_BATCH: usize = 8;

/// Activation rows per chunk in [`panel_batches`] (for the k-quants, batches of 4, 8, 16
/// panels and chunks of 8 to 64 rows measured within 3% of each other; one panel against all
/// rows 8-10% slower).
const PANEL_CHUNK_ROWS: usize = 32;

/// Runs the panels of [`PANEL`] rows of the `n` weight rows of `row_bytes` in `w` against the
/// `m` activation rows, the work spread over the rayon pool in batches of [`PANEL_BATCH`]
/// panels: a task makes its scratch panels once with `new`, `decode`s each panel of a batch
/// (its weight rows, at most [`PANEL`]), then calls `run(panel, r0, r1, n0, rows)` for each
/// chunk `r0..r1` of [`PANEL_CHUNK_ROWS`] activation rows and each panel (rows `n0..n0 +
/// rows`), so that a chunk stays in cache while the whole batch runs against it (one panel at
/// a time against all `m` rows read the activations from memory once per eight weight rows).
fn panel_batches<P>(
    w: &[u8],
    n: usize,
    row_bytes: usize,
    m: usize,
    new: impl Fn() -> P + Sync + Send,
    decode: impl Fn(&mut P, &[u8]) + Sync + Send,
    run: impl Fn(&P, usize, usize, usize, usize) + Sync + Send,
) {
    use rayon::prelude::*;
    let rows_per_batch = PANEL_BATCH * PANEL;
    let batches = n.div_ceil(rows_per_batch);
    let threads = rayon::current_num_threads().max(1);
    let per_task = batches.div_ceil(threads * 4).max(1);
    (0..batches.div_ceil(per_task))
        .into_par_iter()
        .for_each_init(
            || (0..PANEL_BATCH).map(|_| new()).collect::<Vec<P>>(),
            |panels, t| {
                for b in t * per_task..((t + 1) * per_task).min(batches) {
                    let n0 = b * rows_per_batch;
                    let count = (n - n0).div_ceil(PANEL).min(PANEL_BATCH);
                    for (j, panel) in panels[..count].iter_mut().enumerate() {
                        let first = n0 + j * PANEL;
                        let rows = (n - first).min(PANEL);
                        decode(panel, &w[first * row_bytes..(first + rows) * row_bytes]);
                    }
                    let mut r0 = 0;
                    while r0 < m {
                        let r1 = (r0 + PANEL_CHUNK_ROWS).min(m);
                        for (j, panel) in panels[..count].iter().enumerate() {
                            let first = n0 + j * PANEL;
                            run(panel, r0, r1, first, (n - first).min(PANEL));
                        }
                        r0 = r1;
                    }
                }
            },
        );
}

/// Two i16 as one i32 lane (`lo` in the low half).
fn i16_pair(lo: i32, hi: i32) -> i32 {
    (lo as u16 as u32 | ((hi as u16 as u32) << 16)) as i32
}

/// Decodes the rows of `w` (at most [`PANEL`], `nb` k-quant blocks each) into `panel`;
/// missing rows get zero codes, scales and mins. `paired`: each two consecutive code vectors
/// `v` (even) and `v + 1` are stored with their i32 lanes interleaved (`v`'s lane `l` at
/// lane `2 l`, `v + 1`'s at `2 l + 1` of the 64 bytes), as [`k_panel_rows_vnni`] reads them.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn decode_k_panel(dtype: DType, w: &[u8], nb: usize, paired: bool, panel: &mut KPanel) {
    let (bb, g, pairs) = k_panel_shape(dtype);
    let rows = w.len() / (nb * bb).max(1);
    for b in 0..nb {
        let mut codes = [[_mm256_setzero_si256(); 8]; PANEL];
        for (l, codes) in codes.iter_mut().enumerate() {
            // Per 16 values the scale, the mins of the `bsums32` (q4_k / q5_k) or `bsums`
            // (q6_k) entries, and d, dmin; zero for missing rows.
            let (mut sc16, mut mins, mut d, mut dmin) = ([0i32; 16], [0i32; 16], 0.0, 0.0);
            if l < rows {
                let blk = &w[l * nb * bb + b * bb..][..bb];
                let p = blk.as_ptr();
                if dtype == DType::Q6K {
                    *codes = q6k_codes(p);
                    for j in 0..16 {
                        sc16[j] = blk[192 + j] as i8 as i32;
                        mins[j] = 32 * sc16[j];
                    }
                    d = f16_at(p.add(208));
                } else {
                    *codes = if dtype == DType::Q4K {
                        q4k_codes(p)
                    } else {
                        q5k_codes(p)
                    };
                    for j in 0..8 {
                        let (sc, mn) = crate::quant::kquants::scale_min_k4(j, &blk[4..16]);
                        (sc16[2 * j], sc16[2 * j + 1]) = (sc as i32, sc as i32);
                        mins[j] = mn as i32;
                    }
                    (d, dmin) = (f16_at(p), f16_at(p.add(2)));
                }
            }
            for gi in 0..g {
                let s = sc16[gi * 16 / g];
                panel.scales[(b * g + gi) * PANEL + l] = i16_pair(s, s);
            }
            for t in 0..pairs {
                panel.mins[(b * pairs + t) * PANEL + l] = i16_pair(mins[2 * t], mins[2 * t + 1]);
            }
            panel.d[b * PANEL + l] = d;
            panel.dmin[b * PANEL + l] = dmin;
        }
        let dst = panel.codes[b * 64..b * 64 + 64].chunks_exact_mut(8);
        for (j, dst) in dst.enumerate() {
            let mut v = transpose8(&std::array::from_fn(|l| codes[l][j]));
            if paired {
                for p in v.chunks_exact_mut(2) {
                    let (lo, hi) = (
                        _mm256_unpacklo_epi32(p[0], p[1]),
                        _mm256_unpackhi_epi32(p[0], p[1]),
                    );
                    p[0] = _mm256_permute2x128_si256(lo, hi, 0x20);
                    p[1] = _mm256_permute2x128_si256(lo, hi, 0x31);
                }
            }
            dst.copy_from_slice(&v);
        }
    }
}

/// [`k_panel_rows`] or [`k_panel_rows_vnni`] for one k-quant and scale layout.
type KPanelRows =
    unsafe fn(&KPanel, usize, &[Q8KBlock], usize, usize, *mut f32, usize, usize, usize);

/// Defines `$name`, [`k_panel_all_rows`] compiled for `$features` with `VNNI = $vnni`.
macro_rules! k_panel_entry {
    ($(#[$doc:meta])* $name:ident, $features:literal, $vnni:literal) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        unsafe fn $name<const G: usize, const P: usize, const INT_OFFSET: bool>(
            panel: &KPanel,
            nb: usize,
            acts: &[Q8KBlock],
            r0: usize,
            r1: usize,
            y: *mut f32,
            n: usize,
            n0: usize,
            rows: usize,
        ) {
            k_panel_all_rows::<G, P, INT_OFFSET, $vnni>(panel, nb, acts, r0, r1, y, n, n0, rows);
        }
    };
}

k_panel_entry!(
    /// The eight outputs of a decoded k-quant panel for activation rows `r0..r1`, written to `y[r * n + n0 ..][..rows]` (arithmetic: [`k_panel_matmul`]). `G` scale groups
    /// of `64 / G` code vectors each are summed in i16 (see [`k_panel_shape`]), then scaled to
    /// i32 by one `madd`; `P` min pairs; `INT_OFFSET`: the mins share the scale `d` (q6_k).
    k_panel_rows,
    "avx2,fma,f16c",
    false
);

k_panel_entry!(
    /// [`k_panel_rows`] through AVX-512 VNNI's `vpdpbusd` on 512-bit vectors: the products of
    /// each of the block's true scale groups (8 for q4_k / q5_k, 16 for q6_k) summed straight
    /// into i32, then scaled by one `vpmulld`. The same i32 sums, so the same outputs bit for
    /// bit.
    k_panel_rows_vnni,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vnni,avx512vl",
    true
);

/// [`k_panel_rows`] (or, `VNNI`, [`k_panel_rows_vnni`]) for activation rows `r0..r1`, four
/// at a time.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn k_panel_all_rows<
    const G: usize,
    const P: usize,
    const INT_OFFSET: bool,
    const VNNI: bool,
>(
    panel: &KPanel,
    nb: usize,
    acts: &[Q8KBlock],
    r0: usize,
    r1: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
) {
    let mut r = r0;
    while r + K_PANEL_ACT_ROWS <= r1 {
        k_panel_tile::<G, P, INT_OFFSET, K_PANEL_ACT_ROWS, VNNI>(
            panel, nb, acts, r, y, n, n0, rows,
        );
        r += K_PANEL_ACT_ROWS;
    }
    while r < r1 {
        k_panel_tile::<G, P, INT_OFFSET, 1, VNNI>(panel, nb, acts, r, y, n, n0, rows);
        r += 1;
    }
}

/// Activation rows [`k_panel_rows`] runs together: each code vector loaded once serves them
/// all (one row at a time spends two loads per multiply).
const K_PANEL_ACT_ROWS: usize = 4;

/// [`k_panel_rows`] for the `R` activation rows from `r0`; each row's arithmetic is the same,
/// step for step, whatever `R`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn k_panel_tile<
    const G: usize,
    const P: usize,
    const INT_OFFSET: bool,
    const R: usize,
    const VNNI: bool,
>(
    panel: &KPanel,
    nb: usize,
    acts: &[Q8KBlock],
    r0: usize,
    y: *mut f32,
    n: usize,
    n0: usize,
    rows: usize,
) {
    let steps = 64 / G;
    let codes = panel.codes.as_ptr();
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let q: [&Q8KBlock; R] = std::array::from_fn(|i| &acts[(r0 + i) * nb + b]);
        let c = codes.add(b * 64);
        let scales = panel.scales.as_ptr().add(b * G * PANEL);
        let mut isum = [_mm256_setzero_si256(); R];
        if VNNI {
            // G / true groups consecutive groups share one scale (G was raised above the
            // true count only to keep the i16 sums from saturating). Two code vectors per
            // 512-bit product: lanes 2 l and 2 l + 1 hold row l's sums over the even and the
            // odd vectors (the panel is decoded `paired`), against the two activation words
            // broadcast as one i64; the halves are added once per block. The same i32 sums.
            let merged = G / if INT_OFFSET { 16 } else { 8 };
            let twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
            let mut wide = [_mm512_setzero_si512(); R];
            for t in 0..G / merged {
                let mut s32 = [_mm512_setzero_si512(); R];
                for v in (t * merged * steps..(t + 1) * merged * steps).step_by(2) {
                    let code = _mm512_loadu_si512(c.add(v) as *const __m512i);
                    for i in 0..R {
                        let qp = q[i].qs.as_ptr().add(4 * v) as *const i64;
                        let a = _mm512_set1_epi64(qp.read_unaligned());
                        s32[i] = _mm512_dpbusd_epi32(s32[i], code, a);
                    }
                }
                // The scale is the low i16 of each lane's pair, once per row of the pair.
                let pair = load(scales.add(t * merged * PANEL) as *const u8);
                let sc = _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
                let sc = _mm512_permutexvar_epi32(twice, _mm512_castsi256_si512(sc));
                for i in 0..R {
                    wide[i] = _mm512_add_epi32(wide[i], _mm512_mullo_epi32(s32[i], sc));
                }
            }
            for i in 0..R {
                let halves = _mm512_add_epi32(wide[i], _mm512_srli_epi64(wide[i], 32));
                isum[i] = _mm512_cvtepi64_epi32(halves);
            }
        } else {
            for g in 0..G {
                let mut s16 = [_mm256_setzero_si256(); R];
                for s in 0..steps {
                    let code = *c.add(g * steps + s);
                    for i in 0..R {
                        let qp = q[i].qs.as_ptr() as *const i32;
                        let a = _mm256_set1_epi32(qp.add(g * steps + s).read_unaligned());
                        let prod = _mm256_maddubs_epi16(code, a);
                        s16[i] = if s == 0 {
                            prod
                        } else {
                            _mm256_add_epi16(s16[i], prod)
                        };
                    }
                }
                let sc = load(scales.add(g * PANEL) as *const u8);
                for i in 0..R {
                    isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(s16[i], sc));
                }
            }
        }
        let mins = panel.mins.as_ptr().add(b * P * PANEL);
        for i in 0..R {
            let bsums: &[i32] = if P == 4 { &q[i].bsums32 } else { &q[i].bsums };
            let mut msum = _mm256_setzero_si256();
            for t in 0..P {
                let bs = _mm256_set1_epi32(i16_pair(bsums[2 * t], bsums[2 * t + 1]));
                let mn = load(mins.add(t * PANEL) as *const u8);
                msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mn, bs));
            }
            let da = _mm256_set1_ps(q[i].d);
            let dd = _mm256_mul_ps(_mm256_loadu_ps(panel.d.as_ptr().add(b * PANEL)), da);
            let term = if INT_OFFSET {
                _mm256_mul_ps(dd, _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[i], msum)))
            } else {
                let dm = _mm256_mul_ps(_mm256_loadu_ps(panel.dmin.as_ptr().add(b * PANEL)), da);
                _mm256_sub_ps(
                    _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum[i])),
                    _mm256_mul_ps(dm, _mm256_cvtepi32_ps(msum)),
                )
            };
            acc[i] = _mm256_add_ps(acc[i], term);
        }
    }
    for (i, acc) in acc.into_iter().enumerate() {
        store_rows(acc, y.add((r0 + i) * n + n0), rows);
    }
}
