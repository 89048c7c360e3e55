//! Matrix-vector kernels of the 32-value block encodings on AVX-512 VNNI + BW + VL (x86-64,
//! 256-bit vectors): four weight rows against one activation row per call, each activation
//! block loaded once for the four rows. Per block, `vpdpbusd` sums the products of four codes
//! and four activation bytes into each i32 lane (the AVX2 kernels take `maddubs` then `madd`
//! for the same sums), and the fifth bit of q5_0 / q5_1 codes is added under a byte mask
//! loaded straight from the block (the AVX2 kernels spread the bits with a shuffle and a
//! compare).
//!
//! Each row's arithmetic is that of its AVX2 row kernel, step for step: the same i32 lane
//! sums, the same f32 products of the two scales, even blocks into one accumulator and odd
//! blocks into another, the same horizontal sum, and for q4_1 / q5_1 the same scalar sum of
//! the offset terms. The outputs are equal to the AVX2 kernels' bit for bit.
//!
//! The kernels loop where a closure would do: a closure does not inherit the enclosing
//! function's target features, so the intrinsics inside it become calls.
//!
//! The public functions are safe to call only on a CPU with AVX2, FMA, F16C and AVX-512 VNNI,
//! BW and VL; the kernels select them only after detecting those.

use super::act::Q8Block;
use super::avx2::{f16_at, f16_table, hsum, nibbles32, prefetch, PREFETCH_AHEAD};
use super::MatvecRows4;
use crate::dtype::DType;
use std::arch::x86_64::*;

/// The four-row matrix-vector kernel of a 32-value block encoding, where there is one.
pub(super) fn block_matvec4(dtype: DType) -> Option<MatvecRows4<Q8Block>> {
    match dtype {
        DType::Q8_0 => Some(q8_0),
        DType::Q4_0 => Some(q4_0),
        DType::Q4_1 => Some(q4_1),
        DType::Q5_0 => Some(q5_0),
        DType::Q5_1 => Some(q5_1),
        _ => None,
    }
}

/// One encoding's kernel: `$name(w, row_bytes, a)` runs the four rows of `row_bytes` at the
/// start of `w` against `a`; `$imp` holds the arithmetic.
macro_rules! wrapper {
    ($(#[$doc:meta])* $name:ident, $imp:ident) => {
        $(#[$doc])*
        fn $name(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
            debug_assert!(super::avx2_detected() && super::vnni_detected());
            assert!(w.len() >= 4 * row_bytes, "vnni: four rows of {row_bytes} bytes");
            // SAFETY: selected only where AVX2, FMA, F16C and AVX-512 VNNI/BW/VL are
            // detected; the implementation reads whole blocks inside the four rows of `w`
            // and inside `a`.
            unsafe { $imp(w, row_bytes, a) }
        }
    };
}

wrapper!(/** q8_0 weights. */ q8_0, q8_0_imp);
wrapper!(/** q4_0 weights. */ q4_0, q4_0_imp);
wrapper!(/** q4_1 weights. */ q4_1, q4_1_imp);
wrapper!(/** q5_0 weights. */ q5_0, q5_0_imp);
wrapper!(/** q5_1 weights. */ q5_1, q5_1_imp);

/// Sums `d * s` over the blocks of four rows (`$bb` bytes per block) against one activation
/// row, as the AVX2 `sum_blocks32` does per row: even blocks into one accumulator per row, odd
/// blocks into another, then `hsum(even + odd)`. `$dot` maps (block pointer, activation block,
/// activation bytes) to the block's i32 lane sums; the scale is the f16 at the block's start
/// times the activation's `d`. Where `$m_at` is `Some(at)` (q4_1 / q5_1), each row's sum also
/// takes the offset terms `m * s` (the f16 `m` at byte `at` of each block, `s` of the
/// activation block), summed in block order in f32 and added at the end, as the AVX2 kernels
/// do.
macro_rules! matvec4_blocks32 {
    ($w:expr, $row_bytes:expr, $a:expr, $bb:expr, $m_at:expr,
     |$p:ident, $q:ident, $qs:ident| $dot:expr) => {{
        let nb = ($row_bytes / $bb).min($a.len());
        let table = f16_table();
        let base = $w.as_ptr();
        let rows = [
            base,
            base.add($row_bytes),
            base.add(2 * $row_bytes),
            base.add(3 * $row_bytes),
        ];
        let lead = (4 * $row_bytes).max(PREFETCH_AHEAD);
        let mut even = [_mm256_setzero_ps(); 4];
        let mut odd = [_mm256_setzero_ps(); 4];
        let mut offsets = [0.0f32; 4];
        for i in (0..nb).step_by(2) {
            block4!(
                rows,
                lead,
                table,
                $a,
                $bb,
                i,
                even,
                $m_at,
                offsets,
                |$p, $q, $qs| $dot
            );
            if i + 1 < nb {
                block4!(
                    rows,
                    lead,
                    table,
                    $a,
                    $bb,
                    i + 1,
                    odd,
                    $m_at,
                    offsets,
                    |$p, $q, $qs| $dot
                );
            }
        }
        let mut sums = [0.0f32; 4];
        for r in 0..4 {
            sums[r] = hsum(_mm256_add_ps(even[r], odd[r]));
            if $m_at.is_some() {
                sums[r] += offsets[r];
            }
        }
        sums
    }};
}

/// Adds block `$i` of the four `$rows` (against activation block `$i`) into `$acc`, one
/// accumulator per row, and its offset terms into `$offsets` where `$m_at` is some. The four
/// rows lie end to end, so the prefetch sweeps one span `$lead` bytes ahead of the first row,
/// `4 * $bb` bytes per block: the next four rows while these run, or [`PREFETCH_AHEAD`] bytes
/// where four rows are shorter. (A prefetch per row instead runs four interleaved streams,
/// which measured a third slower from memory; sweeping a fixed 4 KiB ahead left the last
/// rows of long groups unfetched, about 10% slower on rows of 2048 values.)
macro_rules! block4 {
    ($rows:expr, $lead:expr, $table:expr, $a:expr, $bb:expr, $i:expr, $acc:ident, $m_at:expr,
     $offsets:ident, |$p:ident, $q:ident, $qs:ident| $dot:expr) => {{
        let $q = &$a[$i];
        let $qs = _mm256_loadu_si256($q.qs.as_ptr() as *const __m256i);
        let ad = _mm256_broadcast_ss(&$q.d);
        let ahead = $rows[0].wrapping_add($lead + 4 * $i * $bb);
        let mut o = 0;
        while o < 4 * $bb {
            prefetch(ahead.wrapping_add(o));
            o += 64;
        }
        for r in 0..4 {
            let $p = $rows[r].add($i * $bb);
            let s: __m256i = $dot;
            let bits = ($p as *const u16).read_unaligned();
            let d = _mm256_mul_ps(_mm256_broadcast_ss(&*$table.add(bits as usize)), ad);
            $acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), $acc[r]);
            if let Some(at) = $m_at {
                $offsets[r] += f16_at($p.add(at)) * $q.s;
            }
        }
    }};
}

/// The 32 codes of a 5-bit block: the nibbles at `nib` plus 16 where the bit of the
/// little-endian u32 at `high` is set.
#[inline(always)]
unsafe fn five_bit_codes(nib: *const u8, high: *const u8) -> __m256i {
    let k = _cvtu32_mask32((high as *const u32).read_unaligned());
    let n = nibbles32(nib);
    _mm256_mask_add_epi8(n, k, n, _mm256_set1_epi8(16))
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q8_0_imp(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
    // Signed codes: |w| times the activation with w's sign, as the AVX2 kernel's sign trick.
    matvec4_blocks32!(w, row_bytes, a, 34, None::<usize>, |p, q, qs| {
        let v = _mm256_loadu_si256(p.add(2) as *const __m256i);
        _mm256_dpbusd_epi32(
            _mm256_setzero_si256(),
            _mm256_abs_epi8(v),
            _mm256_sign_epi8(qs, v),
        )
    })
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4_0_imp(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
    // sum (q - 8) a: the 8 lanes each take off sum a.
    matvec4_blocks32!(w, row_bytes, a, 18, None::<usize>, |p, q, qs| {
        _mm256_dpbusd_epi32(_mm256_set1_epi32(-q.sum), nibbles32(p.add(2)), qs)
    })
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4_1_imp(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
    matvec4_blocks32!(w, row_bytes, a, 20, Some(2), |p, q, qs| {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), nibbles32(p.add(4)), qs)
    })
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q5_0_imp(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
    // sum (q - 16) a: the 8 lanes each take off 2 sum a.
    matvec4_blocks32!(w, row_bytes, a, 22, None::<usize>, |p, q, qs| {
        let codes = five_bit_codes(p.add(6), p.add(2));
        _mm256_dpbusd_epi32(_mm256_set1_epi32(-2 * q.sum), codes, qs)
    })
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q5_1_imp(w: &[u8], row_bytes: usize, a: &[Q8Block]) -> [f32; 4] {
    matvec4_blocks32!(w, row_bytes, a, 24, Some(2), |p, q, qs| {
        _mm256_dpbusd_epi32(
            _mm256_setzero_si256(),
            five_bit_codes(p.add(8), p.add(4)),
            qs,
        )
    })
}
