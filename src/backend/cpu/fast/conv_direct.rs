//! A direct `Conv2d` for stride 1 on AVX-512F or AVX2+FMA, without a patch matrix: the input of a
//! group is copied once into zero-padded planes of width `Wp = W + pads`, where output
//! position `(r, s)` is flat position `p = r Wp + s` and each tap `(u, v)` reads the
//! planes at the constant offset `u dh Wp + v dw` from `p`. Register blocks of
//! [`OB`] output channels by [`TILE`] flat positions accumulate over input channels
//! and taps; flat positions with `s >= Wo` (between two rows) are computed and dropped.
//! This covers the 3x3 convolutions of a UNet and the dilated 1-D convolutions of
//! HiFi-GAN (a height of 1) alike.

use super::par::PAR_MIN_WORK;
use crate::backend::cpu::reference::image::Conv2dArgs;
use crate::backend::cpu::simd;
use rayon::prelude::*;
use rayon::ThreadPool;
use std::arch::x86_64::*;

/// Output channels per block.
const OB: usize = 8;
/// Flat output positions per block (three 16-lane vectors; six 8-lane ones on AVX2).
const TILE: usize = 48;
/// Parallel tasks per pool thread (tiles are handed out in this many chunks per thread).
const TASKS_PER_THREAD: usize = 4;

/// Whether [`conv2d`] runs this convolution: stride 1, AVX2 and FMA on this CPU, and
/// groups of at least [`OB`] output channels (or a single group).
pub(super) fn applies(a: &Conv2dArgs) -> bool {
    let og = a.w_shape[0] / a.groups.max(1);
    a.stride == [1, 1] && (a.groups == 1 || og >= OB) && simd::has_avx2_fma()
}

/// The geometry of one group's padded planes and flat output positions.
struct Plan {
    /// Input channels of a group.
    cg: usize,
    /// Values per padded plane (`Hp Wp`).
    plane: usize,
    /// Padded width.
    wp: usize,
    /// Output height and width.
    ho: usize,
    wo: usize,
    /// Flat positions computed: `(Ho - 1) Wp + Wo`.
    positions: usize,
    /// The flat offset of each tap, `(u, v)` in row-major order.
    offsets: Vec<usize>,
    /// Whether the blocks run on AVX-512F (else AVX2+FMA).
    wide: bool,
}

impl Plan {
    fn new(a: &Conv2dArgs, wide: bool) -> Plan {
        let (h, wd) = (a.x_shape[2], a.x_shape[3]);
        let (cg, kh, kw) = (a.w_shape[1], a.w_shape[2], a.w_shape[3]);
        let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
        let (hp, wp) = (h + a.pads[0] + a.pads[2], wd + a.pads[1] + a.pads[3]);
        let offsets = (0..kh * kw)
            .map(|t| (t / kw) * a.dilation[0] * wp + (t % kw) * a.dilation[1])
            .collect();
        Plan {
            cg,
            plane: hp * wp,
            wp,
            ho,
            wo,
            positions: (ho.max(1) - 1) * wp + wo,
            offsets,
            wide,
        }
    }
}

/// `Conv2d` (see [`crate::backend::Op::Conv2d`]) where [`applies`] holds, per batch entry
/// and group, tiles of flat positions in parallel on `pool`, the blocks on AVX-512F when
/// `wide` and the CPU has it, else on AVX2+FMA. Each output value is `b[o]` plus the
/// f32 sum over input channels, then taps, in that order, of `w x`.
pub(super) fn conv2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    wide: bool,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let cout = a.w_shape[0];
    assert!(
        applies(a),
        "conv_direct: not a direct convolution on this CPU"
    );
    let plan = Plan::new(a, wide);
    let og = cout / a.groups;
    let taps = plan.offsets.len();
    let blocks = og.div_ceil(OB);
    // Per group and channel block: [c][tap][OB], channels past the group's end zero.
    let mut packed = vec![0.0f32; a.groups * blocks * plan.cg * taps * OB];
    for (o, kernel) in w.chunks(plan.cg * taps).enumerate() {
        let (g, ol) = (o / og, o % og);
        let block = &mut packed[(g * blocks + ol / OB) * plan.cg * taps * OB..];
        for (i, &v) in kernel.iter().enumerate() {
            block[i * OB + ol % OB] = v;
        }
    }
    let mut bias = vec![0.0f32; a.groups * blocks * OB];
    for o in 0..cout {
        bias[(o / og) * blocks * OB + o % og] = b.map_or(0.0, |b| b[o]);
    }
    let spatial = plan.ho * plan.wo;
    // Taken out, not borrowed: rayon may run another `Conv2d` on this thread while it
    // waits inside `run_group` (a concurrent session's), which then finds it empty.
    let mut padded = PADDED.take();
    padded.clear();
    padded.resize(plan.cg * plan.plane + TILE, 0.0);
    for bi in 0..n {
        for g in 0..a.groups {
            let planes = &x[(bi * cin + g * plan.cg) * h * wd..][..plan.cg * h * wd];
            pad_planes(a, &plan, planes, h, wd, &mut padded);
            let out = &mut y[(bi * cout + g * og) * spatial..][..og * spatial];
            let group = Group {
                plan: &plan,
                padded: &padded,
                weights: &packed[g * blocks * plan.cg * taps * OB..]
                    [..blocks * plan.cg * taps * OB],
                bias: &bias[g * blocks * OB..][..blocks * OB],
                channels: og,
            };
            run_group(pool, &group, out);
        }
    }
    PADDED.set(padded);
}

thread_local! {
    /// The padded planes of the last direct `Conv2d` on this thread, reused (a fresh
    /// buffer per call costs its page faults every time).
    static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Copies `planes` (`[Cg, H, W]`) into the interior of the zero-padded planes; the
/// borders stay zero from the buffer's fill.
fn pad_planes(
    a: &Conv2dArgs,
    plan: &Plan,
    planes: &[f32],
    h: usize,
    wd: usize,
    padded: &mut [f32],
) {
    let first = a.pads[0] * plan.wp + a.pads[1];
    for (c, src) in planes.chunks(h * wd).enumerate() {
        let dst = &mut padded[c * plan.plane + first..];
        for (r, line) in src.chunks(wd).enumerate() {
            dst[r * plan.wp..][..wd].copy_from_slice(line);
        }
    }
}

/// One group's operands for [`run_group`].
struct Group<'a> {
    plan: &'a Plan,
    /// `[Cg, Hp, Wp]` plus [`TILE`] zeros.
    padded: &'a [f32],
    /// Per channel block `[Cg, taps, OB]`.
    weights: &'a [f32],
    /// Per channel block `[OB]`.
    bias: &'a [f32],
    /// Output channels of the group.
    channels: usize,
}

/// The output of one group (`[Og, Ho, Wo]`): chunks of tiles in parallel, each chunk all
/// channel blocks (the block's weights stay in cache across its tiles).
fn run_group(pool: &ThreadPool, gr: &Group, out: &mut [f32]) {
    let plan = gr.plan;
    let tiles = plan.positions.div_ceil(TILE);
    let work = gr.channels * plan.positions * plan.cg * plan.offsets.len();
    let tasks = if work < PAR_MIN_WORK {
        1
    } else {
        pool.current_num_threads() * TASKS_PER_THREAD
    };
    let per_task = tiles.div_ceil(tasks.max(1)).max(1);
    let dst = OutPtr(out.as_mut_ptr(), out.len());
    let task = |i: usize| {
        let first = i * per_task;
        run_tiles(gr, first..(first + per_task).min(tiles), &dst);
    };
    let count = tiles.div_ceil(per_task);
    if count <= 1 {
        (0..count).for_each(task);
    } else {
        pool.install(|| (0..count).into_par_iter().for_each(task));
    }
}

/// The output buffer shared by the tasks of [`run_group`], which write disjoint positions.
struct OutPtr(*mut f32, usize);
// SAFETY: each task writes only the output positions of its own tiles (disjoint).
unsafe impl Sync for OutPtr {}

/// Every channel block of tiles `range`, written into the output.
fn run_tiles(gr: &Group, range: std::ops::Range<usize>, dst: &OutPtr) {
    let plan = gr.plan;
    let spatial = plan.ho * plan.wo;
    let block_len = plan.cg * plan.offsets.len() * OB;
    let mut acc = [0.0f32; OB * TILE];
    for (blk, weights) in gr.weights.chunks(block_len).enumerate() {
        let bias = &gr.bias[blk * OB..][..OB];
        let channels = (gr.channels - blk * OB).min(OB);
        for tile in range.clone() {
            let p0 = tile * TILE;
            block(plan, gr.padded, p0, weights, bias, &mut acc);
            // Row segments of the tile's valid positions, one copy per channel each.
            let end = (p0 + TILE).min(plan.positions);
            let mut p = p0;
            while p < end {
                let (r, s) = (p / plan.wp, p % plan.wp);
                let next = (p - s + plan.wp).min(end);
                let stop = (p - s + plan.wo).min(next);
                if stop > p {
                    let (j, len) = (p - p0, stop - p);
                    for o in 0..channels {
                        let at = (blk * OB + o) * spatial + r * plan.wo + s;
                        debug_assert!(at + len <= dst.1);
                        // SAFETY: `at..at + len` is inside the output, and these (channel,
                        // position) pairs belong to this task's tiles only.
                        let row = unsafe { std::slice::from_raw_parts_mut(dst.0.add(at), len) };
                        row.copy_from_slice(&acc[o * TILE + j..][..len]);
                    }
                }
                p = next;
            }
        }
    }
}

/// `acc[o][j] = bias[o] + sum_c sum_t w[c][t][o] padded[c][p0 + j + offset t]` for the
/// [`OB`] channels of one block and the [`TILE`] positions from `p0`, on AVX-512F where
/// the plan says so, else AVX2+FMA (which [`applies`] requires).
fn block(
    plan: &Plan,
    padded: &[f32],
    p0: usize,
    weights: &[f32],
    bias: &[f32],
    acc: &mut [f32; OB * TILE],
) {
    let last = (plan.cg - 1) * plan.plane + p0 + plan.offsets.last().copied().unwrap_or(0);
    assert!(
        last + TILE <= padded.len()
            && weights.len() >= plan.cg * plan.offsets.len() * OB
            && bias.len() >= OB,
        "conv_direct: block bounds"
    );
    // SAFETY: every read is inside `padded` and `weights` (checked above: the largest
    // flat index read is `last + TILE - 1`); AVX-512F is checked here, AVX2 and FMA by
    // `conv2d`'s assertion of `applies`.
    unsafe {
        if plan.wide && crate::backend::cpu::kernels::avx512_detected() {
            block_avx512(
                plan,
                padded.as_ptr().add(p0),
                weights.as_ptr(),
                bias,
                acc,
                0,
            );
        } else {
            for q in 0..4 {
                let (half, sub) = (q / 2 * 4, q % 2 * 24);
                let x = padded.as_ptr().add(p0 + sub);
                block_avx2(
                    plan,
                    x,
                    weights.as_ptr().add(half),
                    &bias[half..],
                    acc,
                    half * TILE + sub,
                );
            }
        }
    }
}

/// Defines a register-blocked piece of [`block`]: `$ch` channels (weights `w[o]` of stride
/// [`OB`], `bias[o]`) by three vectors of `$lanes` positions from `x`, in `3 $ch`
/// accumulators (per input channel and tap three loads, `$ch` broadcasts and `3 $ch`
/// FMAs), stored from `acc[at]` in rows of [`TILE`].
macro_rules! block_kernel {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $ch:literal, $lanes:literal,
     $set1:ident, $load:ident, $fma:ident, $store:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU must support the target features; `x` and `w` must hold every value read.
        #[target_feature(enable = $feature)]
        unsafe fn $name(
            plan: &Plan,
            x: *const f32,
            w: *const f32,
            bias: &[f32],
            acc: &mut [f32; OB * TILE],
            at: usize,
        ) {
            let mut sums: [[_; 3]; $ch] = std::array::from_fn(|o| [$set1(bias[o]); 3]);
            let mut wp = w;
            for c in 0..plan.cg {
                let xc = x.add(c * plan.plane);
                for &off in &plan.offsets {
                    let xt = xc.add(off);
                    let v = [$load(xt), $load(xt.add($lanes)), $load(xt.add(2 * $lanes))];
                    for (o, row) in sums.iter_mut().enumerate() {
                        let k = $set1(*wp.add(o));
                        for (s, &xv) in row.iter_mut().zip(&v) {
                            *s = $fma(k, xv, *s);
                        }
                    }
                    wp = wp.add(OB);
                }
            }
            for (o, row) in sums.iter().enumerate() {
                for (i, s) in row.iter().enumerate() {
                    $store(acc.as_mut_ptr().add(at + o * TILE + i * $lanes), *s);
                }
            }
        }
    };
}

block_kernel!(
    /// A whole [`block`] on AVX-512F: 8 channels by 48 positions in 24 accumulators.
    block_avx512, "avx512f", 8, 16,
    _mm512_set1_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

block_kernel!(
    /// A quarter of a [`block`] on AVX2+FMA: 4 channels by 24 positions in 12 accumulators.
    block_avx2, "avx2,fma", 4, 8,
    _mm256_set1_ps, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_storeu_ps
);

#[cfg(test)]
mod tests {
    use super::super::image::tests::{assert_close, Case, Geometry};
    use super::*;
    use crate::backend::cpu::reference::image as reference;

    /// The fast `Conv2d` (direct where it applies, else im2col) against the reference
    /// loops; `direct` says which cases must take the direct kernel.
    fn check(cases: &[Case], direct: bool) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for &(xs, og, k, stride, pads, dilation, groups, _) in cases {
            let cout = og * groups;
            let len = |i: usize, s: usize, kk: usize, d: usize, p: usize| {
                (i + p - d * (kk - 1) - 1) / s + 1
            };
            let out = [
                xs[0],
                cout,
                len(xs[2], stride[0], k[0], dilation[0], pads[0] + pads[2]),
                len(xs[3], stride[1], k[1], dilation[1], pads[1] + pads[3]),
            ];
            let ws = [cout, xs[1] / groups, k[0], k[1]];
            let geometry = Geometry([xs, ws, out], stride, pads, dilation, groups);
            let (args, [x, w, b]) = (geometry.args(), geometry.operands());
            assert_eq!(applies(&args), direct && simd::has_avx2_fma(), "{xs:?}");
            let wide = crate::backend::cpu::kernels::avx512_detected();
            // The dispatcher, then the AVX2 blocks on an AVX-512 CPU.
            for (bias, avx2) in [(Some(&b[..]), false), (None, false), (Some(&b[..]), wide)] {
                let want = reference::conv2d(&args, &x, &w, bias);
                let mut got = vec![f32::NAN; want.len()];
                if avx2 && direct {
                    conv2d(&pool, &args, false, &x, &w, bias, &mut got);
                } else {
                    super::super::image::conv2d(&pool, &args, &x, &w, bias, &mut got);
                }
                let what = format!("{xs:?} cout {cout} k {k:?} pads {pads:?} dil {dilation:?} groups {groups} avx2 {avx2}");
                assert_close(&want, &got, &what);
            }
        }
    }

    /// Shapes the direct kernel runs.
    #[rustfmt::skip]
    const DIRECT: [Case; 8] = [
        // 3x3, same padding, channels not a multiple of the block, rows ending inside a tile.
        ([1, 5, 9, 13], 7, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        // Batch 2, wide enough for several parallel tasks.
        ([2, 16, 20, 37], 12, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        // 1-D dilated (HiFi-GAN), uneven pads, a single output channel.
        ([1, 6, 1, 300], 1, [1, 7], [1, 1], [0, 9, 0, 6], [1, 3], 1, [0, 0]),
        ([1, 32, 1, 1000], 32, [1, 5], [1, 1], [0, 12, 0, 12], [1, 6], 1, [0, 0]),
        // No padding, 1x1; 2-D dilation with asymmetric pads.
        ([1, 3, 4, 5], 9, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ([1, 4, 11, 10], 5, [3, 2], [1, 1], [2, 0, 1, 3], [2, 3], 1, [0, 0]),
        // Groups of at least a block of output channels.
        ([1, 6, 7, 8], 10, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2, [0, 0]),
        // An output of one position.
        ([1, 2, 3, 3], 4, [3, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
    ];

    /// Shapes left to im2col: stride 2, and groups of fewer output channels than a block.
    #[rustfmt::skip]
    const OTHERS: [Case; 2] = [
        ([1, 5, 9, 12], 6, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        ([1, 6, 1, 40], 1, [1, 3], [1, 1], [0, 3, 0, 3], [1, 3], 6, [0, 0]),
    ];

    #[test]
    fn direct_conv2d_matches_the_reference_loops() {
        check(&DIRECT, true);
    }

    #[test]
    fn conv2d_outside_the_direct_kernel_matches_the_reference_loops() {
        check(&OTHERS, false);
    }
}
