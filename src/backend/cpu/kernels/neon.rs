//! NEON row kernels (aarch64). Same arithmetic as the portable kernels: integer dot products
//! per (sub-)block of signed bytes (weight codes, offsets taken off through the activation
//! sums as the portable kernels do), then one f32 multiply-add per block.
//!
//! Every integer kernel exists twice: with the `sdot` instruction (FEAT_DotProd, detected at
//! run time; path [`KernelPath::NeonDot`]) and with widening multiplies plus pairwise adds,
//! which any NEON CPU has ([`KernelPath::Neon`]). The float kernels are the same on both paths.
//! NEON itself is part of the aarch64 target, so only the `sdot` wrappers need a check.
//! `sdot` and the f16 conversions are written as inline assembly: their `std::arch` intrinsics
//! are not stable yet.
//!
//! It also holds the NEON micro-kernel of the float GEMM ([`gemm_micro`]).
//!
//! The module is private to the kernels, which select the `sdot` wrappers only after
//! detecting the feature.

use super::act::{Q8Block, Q8KBlock};
use super::gemm::{MR, NR};
use super::{Kernel, KernelPath};
use crate::dtype::DType;
use crate::quant::kquants::q3_k_scales;
use std::arch::aarch64::*;
use std::arch::asm;

/// How the products of 16 signed bytes are summed into four i32 lanes. Which lane gets which
/// product differs between the implementations; callers only use the total.
trait Dot {
    /// `acc` plus the products `a[i] * b[i]`.
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// The `sdot` instruction: only inside functions compiled with the `dotprod` feature.
struct Sdot;

impl Dot for Sdot {
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }
}

/// Widening multiplies to i16 and pairwise accumulation into i32 (baseline NEON).
struct Mull;

impl Dot for Mull {
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let hi = vmull_high_s8(a, b);
        vpadalq_s16(vpadalq_s16(acc, lo), hi)
    }
}

/// Two wrappers per integer kernel: `$name` (widening multiplies) and `$dot` (`sdot`, through
/// the `dotprod`-compiled `$imp_dot`), both over the generic `$imp`.
macro_rules! int_kernels {
    ($($name:ident, $dot:ident, $imp_dot:ident, $imp:ident, $args:ty, $ret:ty;)*) => {$(
        /// The kernel of the same name, any NEON CPU.
        fn $name(w: &[u8], a: $args) -> $ret {
            // SAFETY: NEON is part of the aarch64 target; the implementation reads only
            // inside `w` and `a` (whole blocks of each).
            unsafe { $imp::<Mull>(w, a) }
        }

        /// The kernel of the same name with `sdot`.
        fn $dot(w: &[u8], a: $args) -> $ret {
            debug_assert!(super::dotprod_detected());
            // SAFETY: the kernels select this path only when `dotprod` is detected; reads as
            // above.
            unsafe { $imp_dot(w, a) }
        }

        #[target_feature(enable = "dotprod")]
        unsafe fn $imp_dot(w: &[u8], a: $args) -> $ret {
            $imp::<Sdot>(w, a)
        }
    )*};
}

int_kernels! {
    q8_0, q8_0_dot, q8_0_sdot, q8_0_imp, &[Q8Block], f32;
    q4_0, q4_0_dot, q4_0_sdot, q4_0_imp, &[Q8Block], f32;
    q4_1, q4_1_dot, q4_1_sdot, q4_1_imp, &[Q8Block], f32;
    q5_0, q5_0_dot, q5_0_sdot, q5_0_imp, &[Q8Block], f32;
    q5_1, q5_1_dot, q5_1_sdot, q5_1_imp, &[Q8Block], f32;
    q8_0_rows4, q8_0_rows4_dot, q8_0_rows4_sdot, q8_0_rows4_imp, [&[Q8Block]; 4], [f32; 4];
    q4_0_rows4, q4_0_rows4_dot, q4_0_rows4_sdot, q4_0_rows4_imp, [&[Q8Block]; 4], [f32; 4];
    q4_1_rows4, q4_1_rows4_dot, q4_1_rows4_sdot, q4_1_rows4_imp, [&[Q8Block]; 4], [f32; 4];
    q5_0_rows4, q5_0_rows4_dot, q5_0_rows4_sdot, q5_0_rows4_imp, [&[Q8Block]; 4], [f32; 4];
    q5_1_rows4, q5_1_rows4_dot, q5_1_rows4_sdot, q5_1_rows4_imp, [&[Q8Block]; 4], [f32; 4];
    q2_k, q2_k_dot, q2_k_sdot, q2_k_imp, &[Q8KBlock], f32;
    q3_k, q3_k_dot, q3_k_sdot, q3_k_imp, &[Q8KBlock], f32;
    q4_k, q4_k_dot, q4_k_sdot, q4_k_imp, &[Q8KBlock], f32;
    q5_k, q5_k_dot, q5_k_sdot, q5_k_imp, &[Q8KBlock], f32;
    q6_k, q6_k_dot, q6_k_sdot, q6_k_imp, &[Q8KBlock], f32;
    q4_k_rows4, q4_k_rows4_dot, q4_k_rows4_sdot, q4_k_rows4_imp, [&[Q8KBlock]; 4], [f32; 4];
    q6_k_rows4, q6_k_rows4_dot, q6_k_rows4_sdot, q6_k_rows4_imp, [&[Q8KBlock]; 4], [f32; 4];
}

/// The kernels for f32 / f16 / bf16 weights on `path`, if it is a NEON path.
pub(super) fn float_kernel(path: KernelPath, dtype: DType) -> Option<Kernel<f32>> {
    if !matches!(path, KernelPath::Neon | KernelPath::NeonDot) {
        return None;
    }
    let (one, four): (super::RowDot<f32>, super::RowDot4<f32>) = match dtype {
        DType::F32 => (f32_row, f32_rows4),
        DType::F16 => (f16_row, f16_rows4),
        _ => (bf16_row, bf16_rows4),
    };
    Some(Kernel::with_four(one, four))
}

/// Whether `path` is a NEON path, and if so whether it uses `sdot`.
fn uses_sdot(path: KernelPath) -> Option<bool> {
    match path {
        KernelPath::Neon => Some(false),
        KernelPath::NeonDot => Some(true),
        _ => None,
    }
}

/// The [`Kernel`] of `$one` / `$four` (their `sdot` versions `$one_dot` / `$four_dot` if
/// `$sdot`).
macro_rules! pick {
    ($sdot:expr, $one:ident / $one_dot:ident, $four:ident / $four_dot:ident) => {
        if $sdot {
            Kernel::with_four($one_dot, $four_dot)
        } else {
            Kernel::with_four($one, $four)
        }
    };
}

/// The kernels for the 32-value block encodings on `path`, if it is a NEON path.
pub(super) fn block_kernel(path: KernelPath, dtype: DType) -> Option<Kernel<Q8Block>> {
    let sdot = uses_sdot(path)?;
    Some(match dtype {
        DType::Q8_0 => pick!(sdot, q8_0 / q8_0_dot, q8_0_rows4 / q8_0_rows4_dot),
        DType::Q4_0 => pick!(sdot, q4_0 / q4_0_dot, q4_0_rows4 / q4_0_rows4_dot),
        DType::Q4_1 => pick!(sdot, q4_1 / q4_1_dot, q4_1_rows4 / q4_1_rows4_dot),
        DType::Q5_0 => pick!(sdot, q5_0 / q5_0_dot, q5_0_rows4 / q5_0_rows4_dot),
        _ => pick!(sdot, q5_1 / q5_1_dot, q5_1_rows4 / q5_1_rows4_dot),
    })
}

/// The kernels for the k-quants on `path`, if it is a NEON path.
pub(super) fn k_kernel(path: KernelPath, dtype: DType) -> Option<Kernel<Q8KBlock>> {
    let sdot = uses_sdot(path)?;
    let one = |plain: super::RowDot<Q8KBlock>, dot: super::RowDot<Q8KBlock>| {
        Kernel::one(if sdot { dot } else { plain })
    };
    Some(match dtype {
        DType::Q2K => one(q2_k, q2_k_dot),
        DType::Q3K => one(q3_k, q3_k_dot),
        DType::Q4K => pick!(sdot, q4_k / q4_k_dot, q4_k_rows4 / q4_k_rows4_dot),
        DType::Q5K => one(q5_k, q5_k_dot),
        _ => pick!(sdot, q6_k / q6_k_dot, q6_k_rows4 / q6_k_rows4_dot),
    })
}

/// The little-endian f16 at `p` as f32.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned() as i16;
    let out: f32;
    asm!(
        "fcvt {out:s}, {h:h}",
        out = lateout(vreg) out,
        h = in(vreg) bits,
        options(pure, nomem, nostack, preserves_flags)
    );
    out
}

/// The 16 bytes at `p`.
#[inline(always)]
unsafe fn bytes(p: *const u8) -> uint8x16_t {
    vld1q_u8(p)
}

/// The 16 signed bytes at `p`.
#[inline(always)]
unsafe fn sbytes(p: *const i8) -> int8x16_t {
    vld1q_s8(p)
}

/// Unsigned codes (< 128) as signed bytes.
#[inline(always)]
unsafe fn s8(v: uint8x16_t) -> int8x16_t {
    vreinterpretq_s8_u8(v)
}

/// Eight weights at value offset `o` of a float row, as two vectors of four f32.
trait FloatLoad {
    /// Bytes per weight.
    const SIZE: usize;
    /// Weights `o..o + 8` of the row at `w`.
    unsafe fn load8(w: *const u8, o: usize) -> (float32x4_t, float32x4_t);
    /// Weight `i` of the row at `w`.
    unsafe fn one(w: *const u8, i: usize) -> f32;
}

struct F32;
struct F16;
struct Bf16;

impl FloatLoad for F32 {
    const SIZE: usize = 4;
    #[inline(always)]
    unsafe fn load8(w: *const u8, o: usize) -> (float32x4_t, float32x4_t) {
        let p = w.add(4 * o);
        (
            vreinterpretq_f32_u8(bytes(p)),
            vreinterpretq_f32_u8(bytes(p.add(16))),
        )
    }
    #[inline(always)]
    unsafe fn one(w: *const u8, i: usize) -> f32 {
        (w.add(4 * i) as *const f32).read_unaligned()
    }
}

impl FloatLoad for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load8(w: *const u8, o: usize) -> (float32x4_t, float32x4_t) {
        let h = bytes(w.add(2 * o));
        let (lo, hi): (float32x4_t, float32x4_t);
        asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            lo = out(vreg) lo,
            hi = lateout(vreg) hi,
            h = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
        (lo, hi)
    }
    #[inline(always)]
    unsafe fn one(w: *const u8, i: usize) -> f32 {
        f16_at(w.add(2 * i))
    }
}

impl FloatLoad for Bf16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load8(w: *const u8, o: usize) -> (float32x4_t, float32x4_t) {
        let h = vreinterpretq_u16_u8(bytes(w.add(2 * o)));
        (
            vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h))),
            vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h)),
        )
    }
    #[inline(always)]
    unsafe fn one(w: *const u8, i: usize) -> f32 {
        f32::from_bits(((w.add(2 * i) as *const u16).read_unaligned() as u32) << 16)
    }
}

/// The length of the shortest of four activation rows, at most `cap`.
fn shortest<A>(rows: [&[A]; 4], cap: usize) -> usize {
    rows.iter().map(|r| r.len()).fold(cap, usize::min)
}

/// One float weight row against one activation row, 16 values per step.
#[inline(always)]
unsafe fn float_row<L: FloatLoad>(w: &[u8], x: &[f32]) -> f32 {
    let n = x.len().min(w.len() / L::SIZE);
    let (wp, xp) = (w.as_ptr(), x.as_ptr());
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        let (a, b) = L::load8(wp, i);
        let (c, d) = L::load8(wp, i + 8);
        acc[0] = vfmaq_f32(acc[0], a, vld1q_f32(xp.add(i)));
        acc[1] = vfmaq_f32(acc[1], b, vld1q_f32(xp.add(i + 4)));
        acc[2] = vfmaq_f32(acc[2], c, vld1q_f32(xp.add(i + 8)));
        acc[3] = vfmaq_f32(acc[3], d, vld1q_f32(xp.add(i + 12)));
        i += 16;
    }
    if i + 8 <= n {
        let (a, b) = L::load8(wp, i);
        acc[0] = vfmaq_f32(acc[0], a, vld1q_f32(xp.add(i)));
        acc[1] = vfmaq_f32(acc[1], b, vld1q_f32(xp.add(i + 4)));
        i += 8;
    }
    let mut s = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    for (j, &xj) in x.iter().enumerate().take(n).skip(i) {
        s += L::one(wp, j) * xj;
    }
    s
}

/// One float weight row against four activation rows: each weight is converted once.
#[inline(always)]
unsafe fn float_rows4<L: FloatLoad>(w: &[u8], x: [&[f32]; 4]) -> [f32; 4] {
    let n = shortest(x, w.len() / L::SIZE);
    let wp = w.as_ptr();
    let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
    let mut i = 0;
    while i + 8 <= n {
        let (a, b) = L::load8(wp, i);
        for (acc, r) in acc.iter_mut().zip(&x) {
            let xp = r.as_ptr().add(i);
            acc[0] = vfmaq_f32(acc[0], a, vld1q_f32(xp));
            acc[1] = vfmaq_f32(acc[1], b, vld1q_f32(xp.add(4)));
        }
        i += 8;
    }
    let mut out = [0.0f32; 4];
    for ((y, acc), r) in out.iter_mut().zip(&acc).zip(&x) {
        *y = vaddvq_f32(vaddq_f32(acc[0], acc[1]));
        for (j, &xj) in r.iter().enumerate().take(n).skip(i) {
            *y += L::one(wp, j) * xj;
        }
    }
    out
}

/// Safe wrappers of the float kernels (one and four activation rows) for one weight type.
macro_rules! float_kernels {
    ($($one:ident, $four:ident, $load:ty;)*) => {$(
        /// The float kernel of the same name.
        fn $one(w: &[u8], x: &[f32]) -> f32 {
            // SAFETY: NEON is part of the aarch64 target; reads stay inside `w` and `x`.
            unsafe { float_row::<$load>(w, x) }
        }

        /// The float kernel of the same name, four activation rows.
        fn $four(w: &[u8], x: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: as above.
            unsafe { float_rows4::<$load>(w, x) }
        }
    )*};
}

float_kernels! {
    f32_row, f32_rows4, F32;
    f16_row, f16_rows4, F16;
    bf16_row, bf16_rows4, Bf16;
}

/// The 32 signed activations of a block, as two vectors.
#[inline(always)]
unsafe fn acts32(q: &Q8Block) -> (int8x16_t, int8x16_t) {
    let p = q.qs.as_ptr();
    (sbytes(p), sbytes(p.add(16)))
}

/// `acc` plus the dot product of 32 codes (two vectors) with a block of activations.
#[inline(always)]
unsafe fn dot32<D: Dot>(acc: int32x4_t, c0: int8x16_t, c1: int8x16_t, q: &Q8Block) -> int32x4_t {
    let (a0, a1) = acts32(q);
    D::dot(D::dot(acc, c0, a0), c1, a1)
}

/// The 32 nibbles of the 16 bytes at `p`: low nibbles (values 0..16), high (16..32).
#[inline(always)]
unsafe fn nibbles32(p: *const u8) -> (int8x16_t, int8x16_t) {
    let v = bytes(p);
    (s8(vandq_u8(v, vdupq_n_u8(15))), s8(vshrq_n_u8::<4>(v)))
}

/// 16 in byte `j` where bit `j` of the little-endian u32 at `p` is set, else 0 (bytes 0..16,
/// 16..32).
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> (uint8x16_t, uint8x16_t) {
    const SPREAD: [[u8; 16]; 2] = [
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
        [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3],
    ];
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let h = vreinterpretq_u8_u32(vdupq_n_u32((p as *const u32).read_unaligned()));
    let bit = vld1q_u8(BIT.as_ptr());
    let sixteen = vdupq_n_u8(16);
    let pick = |s: &[u8; 16]| vandq_u8(vtstq_u8(vqtbl1q_u8(h, vld1q_u8(s.as_ptr())), bit), sixteen);
    (pick(&SPREAD[0]), pick(&SPREAD[1]))
}

/// The 32 five-bit codes of a q5 block: high bits at `qh`, nibbles at `qs`.
#[inline(always)]
unsafe fn fives32(qh: *const u8, qs: *const u8) -> (int8x16_t, int8x16_t) {
    let (lo, hi) = nibbles32(qs);
    let (b0, b1) = fifth_bits(qh);
    (
        s8(vorrq_u8(vreinterpretq_u8_s8(lo), b0)),
        s8(vorrq_u8(vreinterpretq_u8_s8(hi), b1)),
    )
}

/// Sums `d * s` over the 32-value blocks of a row, two blocks per step (two accumulators).
/// `$body` maps (block pointer, activation block) to (the f32 scale, four i32 sums).
macro_rules! sum_blocks32 {
    ($w:expr, $a:expr, $bb:expr, |$p:ident, $q:ident| $body:expr) => {{
        let nb = ($w.len() / $bb).min($a.len());
        let (mut acc0, mut acc1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        let mut i = 0;
        while i + 2 <= nb {
            let ($p, $q) = ($w.as_ptr().add(i * $bb), &$a[i]);
            let (d0, s0): (f32, int32x4_t) = $body;
            let ($p, $q) = ($w.as_ptr().add((i + 1) * $bb), &$a[i + 1]);
            let (d1, s1): (f32, int32x4_t) = $body;
            acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(s0), d0);
            acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(s1), d1);
            i += 2;
        }
        if i < nb {
            let ($p, $q) = ($w.as_ptr().add(i * $bb), &$a[i]);
            let (d0, s0): (f32, int32x4_t) = $body;
            acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(s0), d0);
        }
        vaddvq_f32(vaddq_f32(acc0, acc1))
    }};
}

#[inline(always)]
unsafe fn q8_0_imp<D: Dot>(w: &[u8], a: &[Q8Block]) -> f32 {
    sum_blocks32!(w, a, 34, |p, q| {
        let (c0, c1) = (
            sbytes(p.add(2) as *const i8),
            sbytes(p.add(18) as *const i8),
        );
        (f16_at(p) * q.d, dot32::<D>(vdupq_n_s32(0), c0, c1, q))
    })
}

#[inline(always)]
unsafe fn q4_0_imp<D: Dot>(w: &[u8], a: &[Q8Block]) -> f32 {
    // sum (q - 8) a = sum q a - 8 sum a: each of the four lanes starts at -2 sum a.
    sum_blocks32!(w, a, 18, |p, q| {
        let (c0, c1) = nibbles32(p.add(2));
        let s = dot32::<D>(vdupq_n_s32(-2 * q.sum), c0, c1, q);
        (f16_at(p) * q.d, s)
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

#[inline(always)]
unsafe fn q4_1_imp<D: Dot>(w: &[u8], a: &[Q8Block]) -> f32 {
    let dots = sum_blocks32!(w, a, 20, |p, q| {
        let (c0, c1) = nibbles32(p.add(4));
        (f16_at(p) * q.d, dot32::<D>(vdupq_n_s32(0), c0, c1, q))
    });
    dots + offsets32(w, a, 20)
}

/// One row of 32-value blocks (`bb` bytes each) against four activation rows, each block
/// decoded once: `codes` gives a block's 32 codes, each lane of a row's sums starts at
/// `bias * sum(qs)` (the code offset), and `min_at` is the byte offset of an f16 min, if any.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn rows4_blocks32<D: Dot>(
    w: &[u8],
    a: [&[Q8Block]; 4],
    bb: usize,
    codes: impl Fn(*const u8) -> (int8x16_t, int8x16_t),
    bias: i32,
    min_at: Option<usize>,
) -> [f32; 4] {
    let nb = shortest(a, w.len() / bb);
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut off = [0.0f32; 4];
    for i in 0..nb {
        let p = w.as_ptr().add(i * bb);
        let (c0, c1) = codes(p);
        let d = f16_at(p);
        for r in 0..4 {
            let q = &a[r][i];
            let s = dot32::<D>(vdupq_n_s32(bias * q.sum), c0, c1, q);
            acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s), d * q.d);
        }
        if let Some(o) = min_at {
            let m = f16_at(p.add(o));
            for r in 0..4 {
                off[r] += m * a[r][i].s;
            }
        }
    }
    let mut out = [0.0f32; 4];
    for r in 0..4 {
        out[r] = vaddvq_f32(acc[r]) + off[r];
    }
    out
}

#[inline(always)]
unsafe fn q8_0_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    let codes = |p: *const u8| {
        (
            sbytes(p.add(2) as *const i8),
            sbytes(p.add(18) as *const i8),
        )
    };
    rows4_blocks32::<D>(w, a, 34, codes, 0, None)
}

#[inline(always)]
unsafe fn q4_0_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32::<D>(w, a, 18, |p| nibbles32(p.add(2)), -2, None)
}

#[inline(always)]
unsafe fn q4_1_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32::<D>(w, a, 20, |p| nibbles32(p.add(4)), 0, Some(2))
}

#[inline(always)]
unsafe fn q5_0_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32::<D>(w, a, 22, |p| fives32(p.add(2), p.add(6)), -4, None)
}

#[inline(always)]
unsafe fn q5_1_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8Block]; 4]) -> [f32; 4] {
    rows4_blocks32::<D>(w, a, 24, |p| fives32(p.add(4), p.add(8)), 0, Some(2))
}

#[inline(always)]
unsafe fn q5_0_imp<D: Dot>(w: &[u8], a: &[Q8Block]) -> f32 {
    // sum (q - 16) a: each of the four lanes starts at -4 sum a.
    sum_blocks32!(w, a, 22, |p, q| {
        let (c0, c1) = fives32(p.add(2), p.add(6));
        let s = dot32::<D>(vdupq_n_s32(-4 * q.sum), c0, c1, q);
        (f16_at(p) * q.d, s)
    })
}

#[inline(always)]
unsafe fn q5_1_imp<D: Dot>(w: &[u8], a: &[Q8Block]) -> f32 {
    let dots = sum_blocks32!(w, a, 24, |p, q| {
        let (c0, c1) = fives32(p.add(4), p.add(8));
        (f16_at(p) * q.d, dot32::<D>(vdupq_n_s32(0), c0, c1, q))
    });
    dots + offsets32(w, a, 24)
}

/// `sum_j sc[j] * bsums[j]` for 16 signed 8-bit scales.
#[inline(always)]
unsafe fn scale_bsums16(sc: int8x16_t, bsums: &[i32; 16]) -> i32 {
    let bs = bsums.as_ptr();
    let (lo, hi) = (vmovl_s8(vget_low_s8(sc)), vmovl_high_s8(sc));
    let mut acc = vmulq_s32(vmovl_s16(vget_low_s16(lo)), vld1q_s32(bs));
    acc = vmlaq_s32(acc, vmovl_high_s16(lo), vld1q_s32(bs.add(4)));
    acc = vmlaq_s32(acc, vmovl_s16(vget_low_s16(hi)), vld1q_s32(bs.add(8)));
    acc = vmlaq_s32(acc, vmovl_high_s16(hi), vld1q_s32(bs.add(12)));
    vaddvq_s32(acc)
}

/// `sum_j sc[j] * bsums32[j]` for 8 unsigned 8-bit scales.
#[inline(always)]
unsafe fn scale_bsums8(sc: uint8x8_t, bsums32: &[i32; 8]) -> i32 {
    let bs = bsums32.as_ptr();
    let s = vreinterpretq_s16_u16(vmovl_u8(sc));
    let acc = vmulq_s32(vmovl_s16(vget_low_s16(s)), vld1q_s32(bs));
    vaddvq_s32(vmlaq_s32(acc, vmovl_high_s16(s), vld1q_s32(bs.add(4))))
}

/// Bits `2s..2s+2` of every byte of `v`.
#[inline(always)]
unsafe fn twos(v: uint8x16_t, s: usize) -> uint8x16_t {
    vandq_u8(vshlq_u8(v, vdupq_n_s8(-2 * s as i8)), vdupq_n_u8(3))
}

/// `value` in bytes of `v` where bit `bit` is set, else 0.
#[inline(always)]
unsafe fn bit_to(v: uint8x16_t, bit: usize, value: u8) -> uint8x16_t {
    vandq_u8(vtstq_u8(v, vdupq_n_u8(1 << bit)), vdupq_n_u8(value))
}

/// `sum_j sc[j] * (codes[j] . a[16j..16j + 16])` over the sixteen 16-value sub-blocks of a
/// q2_k / q3_k / q6_k block (four i32 lanes).
#[inline(always)]
unsafe fn k16_dots<D: Dot>(codes: &[int8x16_t; 16], sc: &[i8; 16], q: &Q8KBlock) -> int32x4_t {
    let qa = q.qs.as_ptr();
    let zero = vdupq_n_s32(0);
    let mut sumi = zero;
    for (j, &c) in codes.iter().enumerate() {
        sumi = vmlaq_n_s32(sumi, D::dot(zero, c, sbytes(qa.add(16 * j))), sc[j] as i32);
    }
    sumi
}

/// The 2-bit fields of the 64 bytes at `p` by 16-value sub-block (value `c*128 + s*32 + l` is
/// bits `2s..2s+2` of byte `32c + l`), with `high(t, half)` ORed into sub-block `2t + half`.
#[inline(always)]
unsafe fn k2_codes(p: *const u8, high: impl Fn(usize, usize) -> uint8x16_t) -> [int8x16_t; 16] {
    let mut codes = [vdupq_n_s8(0); 16];
    for c in 0..2 {
        let v = [bytes(p.add(32 * c)), bytes(p.add(32 * c + 16))];
        for s in 0..4 {
            let t = 4 * c + s;
            for (half, &v) in v.iter().enumerate() {
                codes[2 * t + half] = s8(vorrq_u8(twos(v, s), high(t, half)));
            }
        }
    }
    codes
}

#[inline(always)]
unsafe fn q2_k_imp<D: Dot>(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(84).zip(a) {
        let p = b.as_ptr();
        let m = scale_bsums16(s8(vshrq_n_u8::<4>(bytes(p))), &q.bsums);
        let sc: [i8; 16] = std::array::from_fn(|j| (b[j] & 15) as i8);
        let codes = k2_codes(p.add(16), |_, _| vdupq_n_u8(0));
        let s = vaddvq_s32(k16_dots::<D>(&codes, &sc, q));
        acc += f16_at(p.add(80)) * q.d * s as f32 - f16_at(p.add(82)) * q.d * m as f32;
    }
    acc
}

#[inline(always)]
unsafe fn q3_k_imp<D: Dot>(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(110).zip(a) {
        let p = b.as_ptr();
        let sc = q3_k_scales(&b[96..108]);
        // sum (q - 4 [bit clear]) a = sum q' a - 4 sum a with q' = low | 4 bit: 4 sc.bsums off.
        let offset = scale_bsums16(sbytes(sc.as_ptr()), &q.bsums);
        let hm = [bytes(p), bytes(p.add(16))];
        let codes = k2_codes(p.add(32), |t, half| bit_to(hm[half], t, 4));
        let s = vaddvq_s32(k16_dots::<D>(&codes, &sc, q)) - 4 * offset;
        acc += f16_at(p.add(108)) * q.d * s as f32;
    }
    acc
}

/// The eight 6-bit scales and mins of q4_k / q5_k from the 12 bytes at `p`.
#[inline(always)]
unsafe fn k4_scales(p: *const u8) -> ([u8; 8], uint8x8_t) {
    let u = |o: usize| (p.add(o) as *const u32).read_unaligned();
    let (u0, u1, u2) = (u(0), u(4), u(8));
    let (lo6, lo4, lo2) = (0x3f3f_3f3fu32, 0x0f0f_0f0fu32, 0x0303_0303u32);
    let sc_hi = (u2 & lo4) | (((u0 >> 6) & lo2) << 4);
    let mn_hi = ((u2 >> 4) & lo4) | (((u1 >> 6) & lo2) << 4);
    let sc = (u0 & lo6) as u64 | ((sc_hi as u64) << 32);
    let mn = (u1 & lo6) as u64 | ((mn_hi as u64) << 32);
    (sc.to_le_bytes(), vcreate_u8(mn))
}

/// `sumi` plus the scaled dot products of the eight 32-value sub-blocks of a q4_k / q5_k
/// block: `codes[j]` the 32 codes of sub-block `j` (two vectors), `sc` their scales.
#[inline(always)]
unsafe fn k4_dots<D: Dot>(
    codes: &[(int8x16_t, int8x16_t); 8],
    sc: &[u8; 8],
    q: &Q8KBlock,
) -> int32x4_t {
    let qa = q.qs.as_ptr();
    let zero = vdupq_n_s32(0);
    let mut sumi = zero;
    for (j, &(c0, c1)) in codes.iter().enumerate() {
        let a = qa.add(32 * j);
        let d = D::dot(D::dot(zero, c0, sbytes(a)), c1, sbytes(a.add(16)));
        sumi = vmlaq_n_s32(sumi, d, sc[j] as i32);
    }
    sumi
}

/// The 256 nibbles of a q4_k / q5_k block (128 bytes at `p`) by sub-block, with `high(j)` ORed
/// into sub-block `j` (two vectors: values 0..16 and 16..32 of the sub-block).
#[inline(always)]
unsafe fn k4_codes(
    p: *const u8,
    high: impl Fn(usize) -> (uint8x16_t, uint8x16_t),
) -> [(int8x16_t, int8x16_t); 8] {
    let m4 = vdupq_n_u8(15);
    let mut codes = [(vdupq_n_s8(0), vdupq_n_s8(0)); 8];
    for c in 0..4 {
        let (v0, v1) = (bytes(p.add(32 * c)), bytes(p.add(32 * c + 16)));
        let (h0, h1) = high(2 * c);
        codes[2 * c] = (
            s8(vorrq_u8(vandq_u8(v0, m4), h0)),
            s8(vorrq_u8(vandq_u8(v1, m4), h1)),
        );
        let (h0, h1) = high(2 * c + 1);
        codes[2 * c + 1] = (
            s8(vorrq_u8(vshrq_n_u8::<4>(v0), h0)),
            s8(vorrq_u8(vshrq_n_u8::<4>(v1), h1)),
        );
    }
    codes
}

/// `d_a * (d * sum_j sc[j] q . a - dmin * sum_j mn[j] bsums32[j])` of one q4_k / q5_k block
/// (codes decoded, scales and mins from [`k4_scales`]).
#[inline(always)]
unsafe fn k4_block<D: Dot>(
    p: *const u8,
    codes: &[(int8x16_t, int8x16_t); 8],
    (sc, mn): ([u8; 8], uint8x8_t),
    q: &Q8KBlock,
) -> f32 {
    let m = scale_bsums8(mn, &q.bsums32);
    let s = vaddvq_s32(k4_dots::<D>(codes, &sc, q));
    f16_at(p) * q.d * s as f32 - f16_at(p.add(2)) * q.d * m as f32
}

/// The codes of the q4_k block at `p`.
#[inline(always)]
unsafe fn q4_codes(p: *const u8) -> [(int8x16_t, int8x16_t); 8] {
    k4_codes(p.add(16), |_| (vdupq_n_u8(0), vdupq_n_u8(0)))
}

#[inline(always)]
unsafe fn q4_k_imp<D: Dot>(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(144).zip(a) {
        let p = b.as_ptr();
        acc += k4_block::<D>(p, &q4_codes(p), k4_scales(p.add(4)), q);
    }
    acc
}

/// q4_k against four activation rows: each block's codes and scales are decoded once.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn q4_k_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8KBlock]; 4]) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    for i in 0..shortest(a, w.len() / 144) {
        let p = w.as_ptr().add(i * 144);
        let (codes, scales) = (q4_codes(p), k4_scales(p.add(4)));
        for r in 0..4 {
            out[r] += k4_block::<D>(p, &codes, scales, &a[r][i]);
        }
    }
    out
}

#[inline(always)]
unsafe fn q5_k_imp<D: Dot>(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(176).zip(a) {
        let p = b.as_ptr();
        let (qh0, qh1) = (bytes(p.add(16)), bytes(p.add(32)));
        let codes = k4_codes(p.add(48), |j| (bit_to(qh0, j, 16), bit_to(qh1, j, 16)));
        acc += k4_block::<D>(p, &codes, k4_scales(p.add(4)), q);
    }
    acc
}

/// The 256 six-bit codes of the q6_k block at `p` by 16-value sub-block.
#[inline(always)]
unsafe fn q6_codes(p: *const u8) -> [int8x16_t; 16] {
    let (m4, m30) = (vdupq_n_u8(15), vdupq_n_u8(0x30));
    let mut codes = [vdupq_n_s8(0); 16];
    for h in 0..2 {
        for half in 0..2 {
            let l0 = bytes(p.add(64 * h + 16 * half));
            let l1 = bytes(p.add(64 * h + 32 + 16 * half));
            let qh = bytes(p.add(128 + 32 * h + 16 * half));
            // Value 128h + 32t + l: nibble t / 2 of ql[64h + 32 (t % 2) + l], with bits
            // 2t..2t+2 of qh[32h + l] above it.
            let parts = [
                (vandq_u8(l0, m4), vandq_u8(vshlq_n_u8::<4>(qh), m30)),
                (vandq_u8(l1, m4), vandq_u8(vshlq_n_u8::<2>(qh), m30)),
                (vshrq_n_u8::<4>(l0), vandq_u8(qh, m30)),
                (
                    vshrq_n_u8::<4>(l1),
                    vshrq_n_u8::<2>(vandq_u8(qh, vdupq_n_u8(0xc0))),
                ),
            ];
            for (t, (lo, hi)) in parts.into_iter().enumerate() {
                codes[8 * h + 2 * t + half] = s8(vorrq_u8(lo, hi));
            }
        }
    }
    codes
}

/// `d_a * d * sum_j sc[j] * (q - 32) . a` of one q6_k block (codes decoded, scales at `p + 192`).
#[inline(always)]
unsafe fn q6_block<D: Dot>(p: *const u8, codes: &[int8x16_t; 16], q: &Q8KBlock) -> f32 {
    let sc = &*(p.add(192) as *const [i8; 16]);
    // sum (q - 32) a: 32 sc.bsums off.
    let offset = scale_bsums16(sbytes(sc.as_ptr()), &q.bsums);
    let s = vaddvq_s32(k16_dots::<D>(codes, sc, q)) - 32 * offset;
    f16_at(p.add(208)) * q.d * s as f32
}

#[inline(always)]
unsafe fn q6_k_imp<D: Dot>(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(210).zip(a) {
        let p = b.as_ptr();
        acc += q6_block::<D>(p, &q6_codes(p), q);
    }
    acc
}

/// q6_k against four activation rows: each block's codes are decoded once.
// Block `i` of all four activation rows is read in step with weight block `i`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn q6_k_rows4_imp<D: Dot>(w: &[u8], a: [&[Q8KBlock]; 4]) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    for i in 0..shortest(a, w.len() / 210) {
        let p = w.as_ptr().add(i * 210);
        let codes = q6_codes(p);
        for r in 0..4 {
            out[r] += q6_block::<D>(p, &codes, &a[r][i]);
        }
    }
    out
}

/// [`super::gemm::MicroKernel`] with NEON: the `MR x NR` tile in four-lane accumulators; per
/// step `NR / 4` loads of packed activations and one multiply-add per accumulator.
pub(super) fn gemm_micro(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * NR]) {
    assert!(
        a.len() >= (MR - 1) * lda + k && b.len() >= k * NR,
        "gemm: micro-tile bounds"
    );
    // SAFETY: the bounds were checked above; NEON is part of the aarch64 target.
    unsafe { gemm_micro_imp(a.as_ptr(), lda, b.as_ptr(), k, acc) }
}

unsafe fn gemm_micro_imp(
    a: *const f32,
    lda: usize,
    b: *const f32,
    k: usize,
    acc: &mut [f32; MR * NR],
) {
    let rows: [*const f32; MR] = std::array::from_fn(|i| a.add(i * lda));
    let mut c = [[vdupq_n_f32(0.0); NR / 4]; MR];
    for kk in 0..k {
        let bp = b.add(kk * NR);
        let bv: [float32x4_t; NR / 4] = std::array::from_fn(|j| vld1q_f32(bp.add(4 * j)));
        for (ci, row) in c.iter_mut().zip(&rows) {
            let v = *row.add(kk);
            for (cij, &bj) in ci.iter_mut().zip(&bv) {
                *cij = vfmaq_n_f32(*cij, bj, v);
            }
        }
    }
    for (dst, ci) in acc.chunks_exact_mut(NR).zip(&c) {
        for (d, &v) in dst.chunks_exact_mut(4).zip(ci) {
            vst1q_f32(d.as_mut_ptr(), v);
        }
    }
}
