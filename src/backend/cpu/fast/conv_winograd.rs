//! `Conv2d` with a 3x3 kernel, stride 1 and no dilation as Winograd's minimal filtering
//! F(2x2, 3x3) on AVX-512F (Lavin and Gray, "Fast Algorithms for Convolutional Neural
//! Networks", 2016): each 2x2 block of outputs `Y = A^T [sum_c (G g_c G^T) . (B^T d_c B)] A`
//! from the 4x4 input tile `d_c` under it, 16 multiplications per input channel instead of
//! 36. The sums over input channels are 16 matrix products (one per position `xi` of the
//! 4x4 transformed tile) of the transformed kernel `U[xi] [Cout, Cin]` with the
//! transformed tiles `V[xi] [Cin, tiles]`, run on blocks of tiles that stay in L2:
//!
//! ```text
//! B^T = | 1  0 -1  0 |    G = | 1    0    0   |    A^T = | 1  1  1  0 |
//!       | 0  1  1  0 |        | 1/2  1/2  1/2 |          | 0  1 -1 -1 |
//!       | 0 -1  1  0 |        | 1/2 -1/2  1/2 |
//!       | 0  1  0 -1 |        | 0    0    1   |
//! ```
//!
//! Tiles are taken 16 at a time along a row of tiles (a strip: one vector per transformed
//! value), the input read from the zero-padded planes of the direct kernel's copy.

use super::conv_direct::{pad_planes, Planes, PADDED};
use crate::backend::cpu::reference::image::Conv2dArgs;
use rayon::prelude::*;
use rayon::ThreadPool;
use std::arch::x86_64::*;

/// Tiles per strip (one 16-lane vector of each transformed value).
const LANES: usize = 16;
/// Output channels per register block of the products.
const OB: usize = 8;
/// Bytes of transformed tiles and products a block of strips keeps (half the L2).
const BLOCK_BYTES: usize = 512 * 1024;

/// Whether [`conv2d_add`] runs this convolution: 3x3, stride 1, no dilation, one group,
/// output channels a multiple of [`OB`], at least 8 input channels, output rows of at
/// least one strip of tiles (32 columns) and AVX-512F on this CPU.
pub(super) fn applies(a: &Conv2dArgs) -> bool {
    a.w_shape[2..] == [3, 3]
        && a.stride == [1, 1]
        && a.dilation == [1, 1]
        && a.groups == 1
        && a.w_shape[0].is_multiple_of(OB)
        && a.w_shape[1] >= 8
        && a.out_shape[3] >= 2 * LANES
        && a.out_shape[2] >= 1
        && crate::backend::cpu::kernels::avx512_detected()
}

/// The tiling of one batch entry.
struct Tiling {
    cin: usize,
    cout: usize,
    /// Output height and width.
    ho: usize,
    wo: usize,
    /// Strips per row of tiles, rows of tiles.
    strips: usize,
    rows: usize,
    /// Padded planes: row length and plane size.
    wq: usize,
    plane: usize,
    /// Strips per block, and tile slots per block (`LANES` per strip).
    per_block: usize,
    slots: usize,
}

impl Tiling {
    fn new(a: &Conv2dArgs) -> Tiling {
        let (cout, cin) = (a.w_shape[0], a.w_shape[1]);
        let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
        let strips = wo.div_ceil(2).div_ceil(LANES);
        let rows = ho.div_ceil(2);
        // A strip's last tile reads two columns past its 32: the planes are that much
        // wider than the strips (and than the input with its pads, as `wo + 2` is).
        let wq = 2 * LANES * strips + 2;
        let per_block = (BLOCK_BYTES / (16 * LANES * 4 * (cin + cout))).clamp(1, 12);
        Tiling {
            cin,
            cout,
            ho,
            wo,
            strips,
            rows,
            wq,
            plane: (2 * rows + 2) * wq,
            per_block,
            slots: per_block * LANES,
        }
    }
}

thread_local! {
    /// A block's transformed tiles and products on this thread, reused.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `Conv2d` (see [`crate::backend::Op::Conv2d`]) of `[leaky(x), w]` plus `residual` where
/// given (`LeakyRelu`, `Conv2d`, `Add`; see the direct kernel's `conv2d_add`), where
/// [`applies`] holds: per batch entry, blocks of strips in parallel on `pool`. Each output
/// is `b[o]` plus the F(2x2, 3x3) sums, then the residual: the same convolution as the
/// direct sums up to f32 rounding (the transforms add and halve, the products are summed
/// over input channels in order).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_add(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    [x, w]: [&[f32]; 2],
    leaky: Option<f32>,
    b: Option<&[f32]>,
    residual: Option<&[f32]>,
    y: &mut [f32],
) {
    assert!(applies(a), "conv_winograd: not a Winograd convolution");
    let t = Tiling::new(a);
    let (n, h, wd) = (a.x_shape[0], a.x_shape[2], a.x_shape[3]);
    let spatial = t.ho * t.wo;
    assert!(
        x.len() >= n * t.cin * h * wd
            && w.len() >= t.cout * t.cin * 9
            && y.len() >= n * t.cout * spatial
            && residual.is_none_or(|r| r.len() >= n * t.cout * spatial)
            && b.is_none_or(|b| b.len() >= t.cout),
        "conv_winograd: operand sizes"
    );
    let u = transform_kernel(w, t.cout, t.cin);
    let bias: Vec<f32> = b.map_or_else(|| vec![0.0; t.cout], |b| b[..t.cout].to_vec());
    let mut padded = PADDED.take();
    padded.resize(t.cin * t.plane, 0.0);
    let planes = Planes {
        cg: t.cin,
        plane: t.plane,
        wp: t.wq,
    };
    let blocks = (t.rows * t.strips).div_ceil(t.per_block);
    for bi in 0..n {
        let input = &x[bi * t.cin * h * wd..][..t.cin * h * wd];
        pad_planes(
            pool,
            &planes,
            [a.pads[0], a.pads[1]],
            (input, leaky),
            [h, wd],
            &mut padded,
        );
        let out = Out {
            y: y[bi * t.cout * spatial..][..t.cout * spatial].as_mut_ptr(),
            residual: residual.map(|r| r[bi * t.cout * spatial..].as_ptr()),
        };
        let run = |blk: usize| {
            let mut scratch = SCRATCH.take();
            scratch.resize(16 * (t.cin + t.cout) * t.slots, 0.0);
            let (v, m) = scratch.split_at_mut(16 * t.cin * t.slots);
            let first = blk * t.per_block;
            let count = (t.rows * t.strips - first).min(t.per_block);
            // SAFETY: AVX-512F is on (`applies`); the strips `first..first + count` are
            // inside the tiling, whose reads stay inside `padded` (`Tiling::new`) and whose
            // writes are this block's outputs only, inside `y` (sizes asserted above).
            unsafe {
                transform_input(&t, &padded, first, count, v);
                multiply(&t, &u, v, count, m);
                transform_output(&t, m, first, count, &bias, &out);
            }
            SCRATCH.set(scratch);
        };
        pool.install(|| (0..blocks).into_par_iter().for_each(run));
    }
    PADDED.set(padded);
}

/// Where a batch entry's outputs go: `[Cout, Ho, Wo]` from `y`, each value plus the
/// residual at the same index where given.
struct Out {
    y: *mut f32,
    residual: Option<*const f32>,
}
// SAFETY: the blocks write disjoint outputs (their own strips) and only read the residual.
unsafe impl Sync for Out {}

/// `U[xi][o][c] = (G g[o][c] G^T)[xi]` for the 3x3 kernels `g` of `w [Cout, Cin, 3, 3]`.
fn transform_kernel(w: &[f32], cout: usize, cin: usize) -> Vec<f32> {
    let mut u = vec![0.0f32; 16 * cout * cin];
    for o in 0..cout {
        for c in 0..cin {
            let g = &w[(o * cin + c) * 9..][..9];
            // G g: 4 rows of 3.
            let mut gg = [[0.0f32; 3]; 4];
            for j in 0..3 {
                let (g0, g1, g2) = (g[j], g[3 + j], g[6 + j]);
                gg[0][j] = g0;
                gg[1][j] = 0.5 * (g0 + g1 + g2);
                gg[2][j] = 0.5 * (g0 - g1 + g2);
                gg[3][j] = g2;
            }
            // (G g) G^T: 4 by 4.
            for (r, row) in gg.iter().enumerate() {
                let [g0, g1, g2] = *row;
                let out = [g0, 0.5 * (g0 + g1 + g2), 0.5 * (g0 - g1 + g2), g2];
                for (col, &value) in out.iter().enumerate() {
                    u[((r * 4 + col) * cout + o) * cin + c] = value;
                }
            }
        }
    }
    u
}

/// The row of tiles and first tile column of strip `s` of a batch entry.
fn strip_at(t: &Tiling, s: usize) -> (usize, usize) {
    (s / t.strips, (s % t.strips) * LANES)
}

/// `v[xi][c][q LANES + j] = (B^T d B)[xi]` for the tiles `j` of the `count` strips from
/// `first` (`q` the strip's place in the block), `d` the 4x4 input tile of channel `c`.
///
/// # Safety
/// AVX-512F must be available; the strips must be inside the tiling of `padded`.
#[target_feature(enable = "avx512f")]
unsafe fn transform_input(t: &Tiling, padded: &[f32], first: usize, count: usize, v: &mut [f32]) {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for q in 0..count {
        let (row, col) = strip_at(t, first + q);
        for c in 0..t.cin {
            let base = c * t.plane + 2 * row * t.wq + 2 * col;
            // d[u][k]: the tiles' values at tile row u, column k.
            let mut d = [[_mm512_setzero_ps(); 4]; 4];
            for (u, du) in d.iter_mut().enumerate() {
                let at = &padded[base + u * t.wq..][..2 * LANES + 2];
                let p = at.as_ptr();
                let (a0, a1) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(LANES)));
                let (b0, b1) = (_mm512_loadu_ps(p.add(2)), _mm512_loadu_ps(p.add(LANES + 2)));
                du[0] = _mm512_permutex2var_ps(a0, even, a1);
                du[1] = _mm512_permutex2var_ps(a0, odd, a1);
                du[2] = _mm512_permutex2var_ps(b0, even, b1);
                du[3] = _mm512_permutex2var_ps(b0, odd, b1);
            }
            // B^T d, then (B^T d) B.
            let rows = bt(d);
            for (r, row) in rows.iter().enumerate() {
                let cols = bt(*row);
                for (k, value) in cols.iter().enumerate() {
                    let xi = r * 4 + k;
                    let dst = &mut v[(xi * t.cin + c) * t.slots + q * LANES..][..LANES];
                    _mm512_storeu_ps(dst.as_mut_ptr(), *value);
                }
            }
        }
    }
}

/// `B^T z` of four values (vectors, or rows of vectors): `[z0 - z2, z1 + z2, z2 - z1, z1 - z3]`.
#[inline(always)]
fn bt<T: Copy + AddSub>(z: [T; 4]) -> [T; 4] {
    [
        z[0].sub(z[2]),
        z[1].add(z[2]),
        z[2].sub(z[1]),
        z[1].sub(z[3]),
    ]
}

/// Element-wise sums and differences of vectors and of rows of vectors.
trait AddSub {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
}

impl AddSub for __m512 {
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: only called from the AVX-512F functions of this module.
        unsafe { _mm512_add_ps(self, o) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: as above.
        unsafe { _mm512_sub_ps(self, o) }
    }
}

impl AddSub for [__m512; 4] {
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i].add(o[i]))
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i].sub(o[i]))
    }
}

/// `m[xi][o][slot] = sum_c u[xi][o][c] v[xi][c][slot]` for the `count LANES` slots of a
/// block, [`OB`] output channels by up to three vectors of slots at a time.
///
/// # Safety
/// AVX-512F must be available.
#[target_feature(enable = "avx512f")]
unsafe fn multiply(t: &Tiling, u: &[f32], v: &[f32], count: usize, m: &mut [f32]) {
    let (cin, cout, slots) = (t.cin, t.cout, t.slots);
    assert!(
        u.len() >= 16 * cout * cin && v.len() >= 16 * cin * slots && m.len() >= 16 * cout * slots,
        "conv_winograd: product sizes"
    );
    for xi in 0..16 {
        let (uxi, vxi) = (&u[xi * cout * cin..], &v[xi * cin * slots..]);
        let mxi = m[xi * cout * slots..].as_mut_ptr();
        for o in (0..cout).step_by(OB) {
            let rows: [*const f32; OB] = std::array::from_fn(|i| uxi[(o + i) * cin..].as_ptr());
            let mut q = 0;
            while q < count {
                let nv = (count - q).min(3);
                let (b, out) = (vxi[q * LANES..].as_ptr(), mxi.add(o * slots + q * LANES));
                match nv {
                    1 => product::<1>(cin, &rows, b, slots, out),
                    2 => product::<2>(cin, &rows, b, slots, out),
                    _ => product::<3>(cin, &rows, b, slots, out),
                }
                q += nv;
            }
        }
    }
}

/// `out[o stride + j] = sum_c a[o][c] b[c stride + j]` for [`OB`] rows `a` and `16 NV`
/// columns `j`, in `8 NV` accumulators.
///
/// # Safety
/// AVX-512F must be available; `a` rows hold `k` values, `b` `k` rows of `16 NV` values
/// `stride` apart, `out` [`OB`] such rows.
#[target_feature(enable = "avx512f")]
unsafe fn product<const NV: usize>(
    k: usize,
    a: &[*const f32; OB],
    b: *const f32,
    stride: usize,
    out: *mut f32,
) {
    let mut sums = [[_mm512_setzero_ps(); NV]; OB];
    for c in 0..k {
        let bc = b.add(c * stride);
        let x: [__m512; NV] = std::array::from_fn(|i| _mm512_loadu_ps(bc.add(i * LANES)));
        for (row, &ao) in sums.iter_mut().zip(a) {
            let kv = _mm512_set1_ps(*ao.add(c));
            for (s, &xv) in row.iter_mut().zip(&x) {
                *s = _mm512_fmadd_ps(kv, xv, *s);
            }
        }
    }
    for (o, row) in sums.iter().enumerate() {
        for (i, s) in row.iter().enumerate() {
            _mm512_storeu_ps(out.add(o * stride + i * LANES), *s);
        }
    }
}

/// The outputs of the `count` strips from `first`: `Y = A^T m A + bias[o]` of each tile's
/// products, interleaved back into output rows (two rows of 32 columns per strip), the
/// residual added, columns past `Wo` and rows past `Ho` not written.
///
/// # Safety
/// AVX-512F must be available; `out` must hold the batch entry's `[Cout, Ho, Wo]` outputs
/// (and residual), the strips be inside the tiling.
#[target_feature(enable = "avx512f")]
unsafe fn transform_output(
    t: &Tiling,
    m: &[f32],
    first: usize,
    count: usize,
    bias: &[f32],
    out: &Out,
) {
    let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let mask = |c0: usize| -> u16 {
        let valid = t.wo.saturating_sub(c0).min(LANES);
        (1u32 << valid).wrapping_sub(1) as u16
    };
    for q in 0..count {
        let (row, col) = strip_at(t, first + q);
        let (c0, r0) = (2 * col, 2 * row);
        let masks = [mask(c0), mask(c0 + LANES)];
        for o in 0..t.cout {
            let mv: [__m512; 16] = std::array::from_fn(|xi| {
                _mm512_loadu_ps(m[(xi * t.cout + o) * t.slots + q * LANES..][..LANES].as_ptr())
            });
            let rows: [[__m512; 4]; 4] =
                std::array::from_fn(|r| std::array::from_fn(|k| mv[r * 4 + k]));
            // A^T m: two rows of four, then each row times A: two values.
            let s = [
                rows[0].add(rows[1]).add(rows[2]),
                rows[1].sub(rows[2]).sub(rows[3]),
            ];
            let b = _mm512_set1_ps(bias[o]);
            for (a, sa) in s.iter().enumerate() {
                let r = r0 + a;
                if r >= t.ho {
                    break;
                }
                let y0 = _mm512_add_ps(sa[0].add(sa[1]).add(sa[2]), b);
                let y1 = _mm512_add_ps(sa[1].sub(sa[2]).sub(sa[3]), b);
                let halves = [
                    _mm512_permutex2var_ps(y0, lo, y1),
                    _mm512_permutex2var_ps(y0, hi, y1),
                ];
                for (hlf, (&value, &k)) in halves.iter().zip(&masks).enumerate() {
                    if k == 0 {
                        continue;
                    }
                    let at = (o * t.ho + r) * t.wo + c0 + hlf * LANES;
                    let mut value = value;
                    if let Some(res) = out.residual {
                        value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(k, res.add(at)));
                    }
                    _mm512_mask_storeu_ps(out.y.add(at), k, value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::image::tests::{check_fused, Case, Geometry};
    use super::*;

    /// Shapes the Winograd kernel runs: odd output sizes (a last tile row and column half
    /// outside), a strip partly past the row's end, no or asymmetric padding, batch 2,
    /// input channels not a multiple of the block, blocks of several strips.
    #[rustfmt::skip]
    const CASES: [Case; 6] = [
        ([1, 8, 32, 32], 8, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        ([1, 9, 7, 33], 16, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        ([2, 12, 10, 70], 24, [3, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ([1, 16, 9, 40], 8, [3, 3], [1, 1], [2, 0, 1, 1], [1, 1], 1, [0, 0]),
        ([1, 64, 20, 64], 32, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        ([1, 40, 1, 100], 8, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
    ];

    /// With bias and without, with a residual and a `LeakyRelu` on the input, against the
    /// reference loops of `LeakyRelu`, `Conv2d` and `Add`; every case runs on 2 threads.
    #[test]
    fn winograd_conv2d_matches_the_reference_loops() {
        if !crate::backend::cpu::kernels::avx512_detected() {
            // Without AVX-512F the direct kernel runs these (its own tests cover it).
            for case in &CASES {
                assert!(!applies(&Geometry::conv(case).args()), "{case:?}");
            }
            return;
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in &CASES {
            let geometry = Geometry::conv(case);
            let (args, operands) = (geometry.args(), geometry.operands());
            assert!(applies(&args), "{case:?}");
            let [x, w, _] = &operands;
            check_fused(
                &args,
                &operands,
                &format!("{case:?}"),
                &mut |leaky, bias, res, y| conv2d_add(&pool, &args, [x, w], leaky, bias, res, y),
            );
        }
    }

    /// Narrow outputs, a single input channel, 5 output channels, stride 2 and dilation
    /// stay with the other kernels.
    #[test]
    fn winograd_applies_only_where_it_runs() {
        #[rustfmt::skip]
        let others: [Case; 5] = [
            ([1, 8, 32, 30], 8, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
            ([1, 1, 32, 64], 8, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
            ([1, 8, 32, 64], 5, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
            ([1, 8, 32, 64], 8, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
            ([1, 8, 32, 64], 8, [3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1, [0, 0]),
        ];
        for case in &others {
            assert!(!applies(&Geometry::conv(case).args()), "{case:?}");
        }
    }
}
