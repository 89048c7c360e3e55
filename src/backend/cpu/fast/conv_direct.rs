//! A direct `Conv2d` for stride 1 on AVX-512F or AVX2+FMA, without a patch matrix: the input of a
//! group is copied once into zero-padded planes of width `Wp = W + pads`, where output
//! position `(r, s)` is flat position `p = r Wp + s` and each tap `(u, v)` reads the
//! planes at the constant offset `u dh Wp + v dw` from `p`. Register blocks of
//! [`OB`] output channels by up to [`TILE`] flat positions accumulate over input channels
//! and taps, the weights broadcast from their own `[Cout, Cg, kh, kw]` rows (nothing is
//! repacked per call). On AVX-512F a tile's vectors lie in single output rows (row tiles,
//! masked at a row's end) and are stored straight into the output; elsewhere tiles run over
//! flat positions, those with `s >= Wo` (between two rows) computed and dropped. This covers
//! the 3x3 convolutions of a UNet and the dilated 1-D convolutions of HiFi-GAN (a height of
//! 1) alike; long 1-D rows run in chunks, each padded privately by the task that runs it.
//!
//! A 1-D `ConvTranspose2d` of stride `s` is `s` such convolutions, one per output phase
//! `t mod s`: each output `t` gets the taps `k = (t + pl) mod s + j s` of the input
//! positions `(t + pl) div s - j`, a stride-1 convolution of the input with the phase's
//! taps reversed (read in place from the kernel). A task computes every phase of its tile
//! into a scratch tile, then writes the outputs interleaved, each output line once.

use super::elementwise::{leaky_relu, vectorized};
use super::par::PAR_MIN_WORK;
use crate::backend::cpu::reference::image::Conv2dArgs;
use crate::backend::cpu::simd;
use rayon::prelude::*;
use rayon::ThreadPool;
use std::arch::x86_64::*;
use std::ops::Range;

/// Output channels per block.
const OB: usize = 8;
/// Flat output positions per block at most (three 16-lane vectors; six 8-lane ones on AVX2).
const TILE: usize = 48;
/// Flat positions of one 16-lane vector (a tile is 1 to 3 of them).
const VEC: usize = 16;
/// Parallel tasks per pool thread (tiles and channel blocks are handed out in this many
/// parts per thread).
const TASKS_PER_THREAD: usize = 4;

/// Whether [`conv2d`] runs this convolution: stride 1, AVX2 and FMA on this CPU, and
/// groups of at least [`OB`] output channels (or a single group).
pub(super) fn applies(a: &Conv2dArgs) -> bool {
    let og = a.w_shape[0] / a.groups.max(1);
    a.stride == [1, 1] && (a.groups == 1 || og >= OB) && simd::has_avx2_fma()
}

/// The geometry of one group's padded planes and flat output positions.
#[derive(Clone)]
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
    /// Where the weight of output channel `o`, input channel `c` and tap `t` is in the
    /// group's weights: `o weight_row + c weight_channel + weight_taps[t]`.
    weight_row: usize,
    weight_channel: usize,
    weight_taps: Vec<usize>,
    /// Row tiles: the vectors of `VEC` positions each output row is cut into (the last
    /// one masked to the row's end), where tiles are made of whole-row vectors instead of
    /// flat positions; see [`Plan::row_tiles`].
    row_vectors: Option<usize>,
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
            weight_row: cg * kh * kw,
            weight_channel: kh * kw,
            weight_taps: (0..kh * kw).collect(),
            row_vectors: None,
        }
    }

    /// Whether each kernel row lists its weights in (input channel, tap) order:
    /// `weight_channel` is the taps, `weight_taps` counts from 0 (a convolution's rows).
    fn weights_in_order(&self) -> bool {
        self.weight_channel == self.weight_taps.len()
            && self.weight_taps.iter().enumerate().all(|(i, &t)| i == t)
    }

    /// One past the largest index of the group's weights that channel block `blk` of
    /// `channels` output channels reads.
    fn weights_end(&self, blk: usize, channels: usize) -> usize {
        let last_tap = self.weight_taps.iter().max().copied().unwrap_or(0);
        (blk * OB + channels - 1) * self.weight_row
            + (self.cg - 1) * self.weight_channel
            + last_tap
            + 1
    }

    /// The kernel rows of channel block `blk` (of `channels` output channels; rows past
    /// the last repeat it, their sums dropped) in the group's `weights`.
    fn weight_rows(&self, weights: &[f32], blk: usize, channels: usize) -> [*const f32; OB] {
        assert!(
            self.weights_end(blk, channels) <= weights.len(),
            "conv_direct: weight bounds"
        );
        std::array::from_fn(|o| {
            weights[(blk * OB + o.min(channels - 1)) * self.weight_row..].as_ptr()
        })
    }

    /// This plan with row tiles where they apply: AVX-512F blocks (masked stores) and rows
    /// of at least one vector, or a single row. A row tile's vectors each cover up to
    /// [`VEC`] positions of one output row, so the sums go straight into the output (no
    /// padding columns computed, no copy through a scratch tile).
    fn row_tiles(mut self) -> Plan {
        let avx512 = self.wide && crate::backend::cpu::kernels::avx512_detected();
        if avx512 && (self.wo >= VEC || self.ho == 1) && self.wo > 0 {
            self.row_vectors = Some(self.wo.div_ceil(VEC));
        }
        self
    }

    /// One past the largest flat index a block reads from the first plane: the end of its
    /// last vector plus the last tap's offset.
    fn reach(&self) -> usize {
        let end = match self.row_vectors {
            Some(rv) => (self.ho.max(1) - 1) * self.wp + rv * VEC,
            None => self.positions.next_multiple_of(VEC),
        };
        end + self.offsets.last().copied().unwrap_or(0)
    }

    /// Tiles of the group's output: row tiles of up to `TILE / VEC` vectors, or flat tiles
    /// of [`TILE`] positions.
    fn tiles(&self) -> usize {
        match self.row_vectors {
            Some(rv) => (self.ho * rv).div_ceil(TILE / VEC),
            None => self.positions.div_ceil(TILE),
        }
    }
}

/// Where output `(channel o, row r, column s)` of a group lands:
/// `o channel + r row + s step + first`.
#[derive(Clone, Copy)]
struct OutMap {
    channel: usize,
    row: usize,
    step: usize,
    first: usize,
}

/// `Conv2d` (see [`crate::backend::Op::Conv2d`]) where [`applies`] holds, per batch entry
/// and group, tiles of flat positions and blocks of channels in parallel on `pool`, the
/// blocks on AVX-512F when `wide` and the CPU has it, else on AVX2+FMA. Each output value
/// is `b[o]` plus the f32 sum over input channels, then taps, in that order, of `w x`.
pub(super) fn conv2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    wide: bool,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    conv2d_add(pool, a, wide, [x, w], None, b, [None, None], y);
}

/// [`conv2d`] of `[leaky(x), w]` (`leaky`: the slope of a `LeakyRelu` applied to each
/// input value as it is copied into the padded planes), then the addends `[residual,
/// second]` (the output's layout), each where given and in that order, added to each output
/// value while its tile is in cache: `LeakyRelu`, `Conv2d`, `Add`, `Add`. A second addend
/// goes into the stores of row tiles; elsewhere it is summed with the residual first.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_add(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    wide: bool,
    [x, w]: [&[f32]; 2],
    leaky: Option<f32>,
    b: Option<&[f32]>,
    [residual, second]: [Option<&[f32]>; 2],
    y: &mut [f32],
) {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let cout = a.w_shape[0];
    assert!(
        applies(a),
        "conv_direct: not a direct convolution on this CPU"
    );
    let plan = Plan::new(a, wide).row_tiles();
    if let (Some(r), Some(s), None) = (residual, second, plan.row_vectors) {
        let sum: Vec<f32> = r.iter().zip(s).map(|(r, s)| r + s).collect();
        return conv2d_add(pool, a, wide, [x, w], leaky, b, [Some(&sum), None], y);
    }
    let og = cout / a.groups;
    let taps = plan.offsets.len();
    let spatial = plan.ho * plan.wo;
    let out = OutMap {
        channel: spatial,
        row: plan.wo,
        step: 1,
        first: 0,
    };
    // Without padding the planes are read in place when no block reads past the group's
    // last plane (flat positions rounded up to whole vectors, plus the last tap's offset).
    let reach = plan.reach();
    let in_place = a.pads == [0; 4] && reach <= plan.plane && leaky.is_none();
    let one_row = h == 1 && plan.ho == 1 && a.groups == 1;
    if one_row && !in_place && plan.row_vectors.is_some() && plan.wo >= CHUNKED_MIN_POSITIONS {
        return conv1d_chunks(pool, &plan, a, [x, w], leaky, (b, [residual, second]), y);
    }
    // Taken out, not borrowed: rayon may run another `Conv2d` on this thread while it
    // waits inside `run_group` (a concurrent session's), which then finds it empty.
    let mut padded = PADDED.take();
    if !in_place {
        // Every value is written by `pad_planes` (borders zeroed there), the tail here.
        padded.resize(plan.cg * plan.plane + TILE, 0.0);
        padded[plan.cg * plan.plane..].fill(0.0);
    }
    for bi in 0..n {
        for g in 0..a.groups {
            let planes = &x[(bi * cin + g * plan.cg) * h * wd..][..plan.cg * h * wd];
            if !in_place {
                pad_planes(
                    pool,
                    &plan.planes(),
                    [a.pads[0], a.pads[1]],
                    (planes, leaky),
                    [h, wd],
                    &mut padded,
                );
            }
            let dst = &mut y[(bi * cout + g * og) * spatial..][..og * spatial];
            let group = Group {
                plan: &plan,
                padded: if in_place { planes } else { &padded },
                weights: &w[g * og * plan.cg * taps..][..og * plan.cg * taps],
                bias: b.map(|b| &b[g * og..][..og]),
                residual: residual.map(|r| &r[(bi * cout + g * og) * spatial..][..og * spatial]),
                second: second.map(|r| &r[(bi * cout + g * og) * spatial..][..og * spatial]),
                channels: og,
                out,
            };
            run_group(pool, &group, dst);
        }
    }
    PADDED.set(padded);
}

thread_local! {
    /// The padded planes of the last convolution on this thread (direct, a chunk of a
    /// one-row one, transposed or Winograd), reused: a fresh buffer per call costs its page
    /// faults every time. Each user takes it out for its duration and puts it back.
    pub(super) static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The layout of zero-padded input planes: `cg` planes of `plane` values, rows of `wp`.
pub(super) struct Planes {
    pub cg: usize,
    pub plane: usize,
    pub wp: usize,
}

impl Plan {
    /// The layout of this plan's padded planes.
    fn planes(&self) -> Planes {
        Planes {
            cg: self.cg,
            plane: self.plane,
            wp: self.wp,
        }
    }
}

/// Writes `planes` (`[Cg, H, W]`, each value through the `LeakyRelu` of slope `leaky` where
/// given) as the zero-padded planes, `pads` (top, left) from their corner, the planes in
/// parallel on `pool` when they are large: every value of the first `Cg` planes is written
/// once (borders zeroed here, so the buffer need not be cleared first).
pub(super) fn pad_planes(
    pool: &ThreadPool,
    plan: &Planes,
    pads: [usize; 2],
    (planes, leaky): (&[f32], Option<f32>),
    [h, wd]: [usize; 2],
    padded: &mut [f32],
) {
    let (top, left) = (pads[0], pads[1]);
    let pad = |(c, dst): (usize, &mut [f32])| {
        let src = &planes[c * h * wd..][..h * wd];
        for (r, line) in dst.chunks_mut(plan.wp).enumerate() {
            match r.checked_sub(top).filter(|&i| i < h) {
                Some(i) => {
                    line[..left].fill(0.0);
                    copy_activated(&mut line[left..left + wd], &src[i * wd..][..wd], leaky);
                    line[left + wd..].fill(0.0);
                }
                None => line.fill(0.0),
            }
        }
    };
    let padded = &mut padded[..plan.cg * plan.plane];
    if padded.len() < PAR_MIN_WORK || plan.cg < 2 {
        padded.chunks_mut(plan.plane).enumerate().for_each(pad);
    } else {
        pool.install(|| padded.par_chunks_mut(plan.plane).enumerate().for_each(pad));
    }
}

/// `out = LeakyRelu(row)` with slope `leaky`, or a copy of `row` without one.
fn copy_activated(out: &mut [f32], row: &[f32], leaky: Option<f32>) {
    match leaky {
        None => out.copy_from_slice(row),
        Some(s) => vectorized(
            #[inline(always)]
            || {
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = leaky_relu(v, s);
                }
            },
        ),
    }
}

/// Output positions from which a one-row convolution runs in chunks ([`conv1d_chunks`]):
/// below, chunks of a few vectors would leave the blocks short of positions.
const CHUNKED_MIN_POSITIONS: usize = 384;
/// Input values a chunk's private planes hold at most (256 KiB, a quarter of the L2).
const CHUNK_VALUES: usize = 64 * 1024;

/// A one-row convolution (a 1-D convolution: one input and output row, one group; row
/// tiles) per batch entry in chunks of output positions, a multiple of the pool's threads
/// of them, one task each: the task copies the input its chunk reads (zero-padded, through
/// the `LeakyRelu` of slope `leaky` where given) into planes of its own, which stay in its
/// core's cache while every channel block runs over the chunk's tiles. Same sums, in the
/// same order, as [`conv2d_add`]'s other path.
fn conv1d_chunks(
    pool: &ThreadPool,
    plan: &Plan,
    a: &Conv2dArgs,
    [x, w]: [&[f32]; 2],
    leaky: Option<f32>,
    (b, [residual, second]): (Option<&[f32]>, [Option<&[f32]>; 2]),
    y: &mut [f32],
) {
    let (n, cin, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[3]);
    let (cout, wo, left) = (a.w_shape[0], plan.wo, a.pads[1]);
    let reach = plan.offsets.last().copied().unwrap_or(0);
    let threads = pool.current_num_threads().max(1);
    let per_thread = wo.div_ceil((CHUNK_VALUES / cin).max(TILE) * threads);
    let chunk = wo.div_ceil(per_thread * threads).next_multiple_of(VEC);
    let chunks = wo.div_ceil(chunk);
    let weights = &w[..cout * plan.weight_row];
    for bi in 0..n {
        let planes = &x[bi * cin * wd..][..cin * wd];
        let dst = OutPtr(y[bi * cout * wo..][..cout * wo].as_mut_ptr(), cout * wo);
        let residual = residual.map(|r| &r[bi * cout * wo..][..cout * wo]);
        let second = second.map(|r| &r[bi * cout * wo..][..cout * wo]);
        let task = |ci: usize| {
            let start = ci * chunk;
            let len = chunk.min(wo - start);
            let width = len.next_multiple_of(VEC) + reach;
            let mut padded = PADDED.take();
            padded.resize(cin * width, 0.0);
            // Chunk position j reads input column start + j - left, where inside the row.
            let from = left.saturating_sub(start).min(width);
            let to = (wd + left).saturating_sub(start).clamp(from, width);
            for (c, line) in padded.chunks_mut(width).enumerate() {
                let src = &planes[c * wd..][..wd];
                line[..from].fill(0.0);
                let s0 = start + from - left;
                copy_activated(&mut line[from..to], &src[s0..s0 + (to - from)], leaky);
                line[to..].fill(0.0);
            }
            let chunk_plan = Plan {
                plane: width,
                wp: width,
                wo: len,
                positions: len,
                row_vectors: Some(len.div_ceil(VEC)),
                ..plan.clone()
            };
            let group = Group {
                plan: &chunk_plan,
                padded: &padded,
                weights,
                bias: b,
                residual,
                second,
                channels: cout,
                out: OutMap {
                    channel: wo,
                    row: 0,
                    step: 1,
                    first: start,
                },
            };
            run_tiles(&group, 0..cout.div_ceil(OB), 0..chunk_plan.tiles(), &dst);
            PADDED.set(padded);
        };
        pool.install(|| (0..chunks).into_par_iter().for_each(task));
    }
}

/// The phase geometry of a 1-D `ConvTranspose2d` of stride `s`, kernel width `k` and left
/// crop `pl` for outputs `t = u s + r`: the first tap `(r + pl) mod s`, the input offset
/// `(r + pl) div s`, and the number of taps.
fn phase(r: usize, s: usize, k: usize, pl: usize) -> (usize, usize, usize) {
    let first = (r + pl) % s;
    let taps = if first < k {
        (k - first).div_ceil(s)
    } else {
        0
    };
    (first, (r + pl) / s, taps)
}

/// Whether [`conv_transpose2d`] runs this transposed convolution: 1-D along the width
/// (`H = kh = 1`, no height padding), one group, no dilation, AVX2 and FMA on this CPU,
/// and every output phase with at least one tap reaching back no further than its input.
pub(super) fn conv_transpose_applies(a: &Conv2dArgs) -> bool {
    let (s, k, pl) = (a.stride[1], a.w_shape[3], a.pads[1]);
    a.x_shape[2] == 1
        && a.w_shape[2] == 1
        && a.out_shape[2] == 1
        && a.pads[0] == 0
        && a.groups == 1
        && a.dilation == [1, 1]
        && s >= 1
        && (0..s).all(|r| {
            let (_, off, taps) = phase(r, s, k, pl);
            taps >= 1 && off < taps
        })
        && simd::has_avx2_fma()
}

/// `ConvTranspose2d` (see [`crate::backend::Op::ConvTranspose2d`]) where
/// [`conv_transpose_applies`] holds: per batch entry and output phase `r` (outputs
/// `t = u s + r`), the direct convolution of the input padded by `J - 1 - (r + pl) div s`
/// on the left with the phase's `J` taps in reverse order. Each output value is `b[o]`
/// plus the f32 sum over input channels, then taps (input positions increasing).
pub(super) fn conv_transpose2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    wide: bool,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    assert!(
        conv_transpose_applies(a),
        "conv_direct: not a direct transposed convolution on this CPU"
    );
    let (n, cin, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[3]);
    let (cout, k) = (a.w_shape[1], a.w_shape[3]);
    let (s, pl, t) = (a.stride[1], a.pads[1], a.out_shape[3]);
    let phases: Vec<(usize, usize, usize, usize)> = (0..s.min(t))
        .map(|r| {
            let (first, off, taps) = phase(r, s, k, pl);
            (r, first, taps - 1 - off, taps)
        })
        .collect();
    // One padded copy serves every phase: the widest left pad, and room on the right
    // for the last output of each phase's last tap.
    let left = phases.iter().map(|p| p.2).max().unwrap_or(0);
    let wp = phases
        .iter()
        .map(|&(r, _, pad, taps)| left - pad + (t - r).div_ceil(s) + taps - 1)
        .max()
        .unwrap_or(0)
        .max(left + wd);
    let mut padded = PADDED.take();
    padded.resize(cin * wp + TILE, 0.0);
    padded[cin * wp..].fill(0.0);
    // Phase `(first, taps)`'s kernel rows read in place from `w [Cin, Cout, k]`: output
    // channel `o`, input channel `c`, tap `m` (reversed) at `o k + c Cout k + first + (J - 1 - m) s`.
    let plan = |wo: usize, first: usize, taps: usize| Plan {
        cg: cin,
        plane: wp,
        wp,
        ho: 1,
        wo,
        positions: wo,
        offsets: (0..taps).collect(),
        wide,
        weight_row: k,
        weight_channel: cout * k,
        weight_taps: (0..taps).map(|m| first + (taps - 1 - m) * s).collect(),
        row_vectors: None,
    };
    for bi in 0..n {
        let planes = &x[bi * cin * wd..][..cin * wd];
        pad_planes(
            pool,
            &plan(0, 0, 0).planes(),
            [0, left],
            (planes, None),
            [1, wd],
            &mut padded,
        );
        let plans: Vec<(Plan, usize)> = phases
            .iter()
            .map(|&(r, first, pad, taps)| (plan((t - r).div_ceil(s), first, taps), left - pad))
            .collect();
        let out = &mut y[bi * cout * t..][..cout * t];
        run_phases(pool, &plans, &padded, (w, b), (cout, t, s), out);
    }
    PADDED.set(padded);
}

/// The phases of one batch entry of a 1-D transposed convolution into `out` (`[Cout, T]`,
/// `(cout, t, s)`): phase `r`'s plan reads the padded planes from its offset in `plans` and
/// gives the outputs `u s + r`. Tasks take tiles of `u` by channel blocks; each computes
/// every phase's block into a scratch tile, then writes the tile's outputs interleaved,
/// position after position, so each output line is written once and whole (not once per
/// phase, `s` values apart).
fn run_phases(
    pool: &ThreadPool,
    plans: &[(Plan, usize)],
    padded: &[f32],
    (weights, bias): (&[f32], Option<&[f32]>),
    (cout, t, s): (usize, usize, usize),
    out: &mut [f32],
) {
    let Some((widest, _)) = plans.first() else {
        return;
    };
    let tiles = widest.positions.div_ceil(TILE);
    let blocks = cout.div_ceil(OB);
    let work: usize = plans
        .iter()
        .map(|(p, _)| cout * p.positions * p.cg * p.offsets.len())
        .sum();
    assert_eq!(out.len(), cout * t, "conv_direct: transposed output length");
    let dst = OutPtr(out.as_mut_ptr(), out.len());
    let task = |blocks: Range<usize>, tiles: Range<usize>| {
        let dst = &dst;
        let mut acc = vec![0.0f32; plans.len() * OB * TILE];
        for blk in blocks {
            let channels = (cout - blk * OB).min(OB);
            let bias: [f32; OB] =
                std::array::from_fn(|o| bias.map_or(0.0, |b| b[blk * OB + o.min(channels - 1)]));
            // Each phase's kernel rows of this block, the same for every tile.
            let rows: Vec<[*const f32; OB]> = plans
                .iter()
                .map(|(plan, _)| plan.weight_rows(weights, blk, channels))
                .collect();
            for tile in tiles.clone() {
                let p0 = tile * TILE;
                let phases = plans.iter().zip(&rows);
                for (((plan, from), rows), acc) in phases.zip(acc.chunks_exact_mut(OB * TILE)) {
                    let end = (p0 + TILE).min(plan.positions);
                    if end <= p0 {
                        continue;
                    }
                    // SAFETY: `acc` holds `OB` rows of `TILE >= vectors VEC` values.
                    unsafe {
                        block(
                            plan,
                            &padded[*from..],
                            p0,
                            (end - p0).div_ceil(VEC),
                            rows,
                            &bias,
                            acc.as_mut_ptr(),
                            TILE,
                        );
                    }
                }
                let first = p0 * s;
                let len = (TILE * s).min(t - first);
                for o in 0..channels {
                    let at = (blk * OB + o) * t + first;
                    debug_assert!(at + len <= dst.1);
                    // SAFETY: outputs `first..first + len` of channel `blk OB + o` are inside
                    // the output and belong to this task's tile and block only.
                    let line = unsafe { std::slice::from_raw_parts_mut(dst.0.add(at), len) };
                    for (u, outputs) in line.chunks_mut(s).enumerate() {
                        for (r, v) in outputs.iter_mut().enumerate() {
                            *v = acc[(r * OB + o) * TILE + u];
                        }
                    }
                }
            }
        }
    };
    in_parts(pool, work, tiles, blocks, task);
}

/// Runs `task(channel blocks, tiles)` over parts of `tiles` tiles by parts of `blocks`
/// channel blocks, in parallel on `pool` where the `work` (multiply-adds) is worth it:
/// [`TASKS_PER_THREAD`] parts per thread, tiles split first (large planes by position, small
/// ones by channel).
fn in_parts(
    pool: &ThreadPool,
    work: usize,
    tiles: usize,
    blocks: usize,
    task: impl Fn(Range<usize>, Range<usize>) + Sync,
) {
    let tasks = if work < PAR_MIN_WORK {
        1
    } else {
        pool.current_num_threads() * TASKS_PER_THREAD
    };
    let per_tile = tiles.div_ceil(tasks.min(tiles).max(1)).max(1);
    let tile_parts = tiles.div_ceil(per_tile);
    let per_block = blocks
        .div_ceil(tasks.div_ceil(tile_parts.max(1)).min(blocks).max(1))
        .max(1);
    let block_parts = blocks.div_ceil(per_block);
    let part = |i: usize| {
        let (b0, t0) = (i / tile_parts * per_block, i % tile_parts * per_tile);
        task(
            b0..(b0 + per_block).min(blocks),
            t0..(t0 + per_tile).min(tiles),
        );
    };
    let count = tile_parts * block_parts;
    if count <= 1 {
        (0..count).for_each(part);
    } else {
        pool.install(|| (0..count).into_par_iter().for_each(part));
    }
}

/// One group's operands for [`run_group`].
struct Group<'a> {
    plan: &'a Plan,
    /// `[Cg, Hp, Wp]`, plus at least [`TILE`] zeros unless no block reads past the planes.
    padded: &'a [f32],
    /// The kernel, addressed as the plan says (`[channels, Cg, taps]` for a convolution).
    weights: &'a [f32],
    /// Per output channel, when there is a bias.
    bias: Option<&'a [f32]>,
    /// Added to the outputs, when given: values in the layout of the group's output slice.
    residual: Option<&'a [f32]>,
    /// Added after `residual`, when given (row tiles only; same layout).
    second: Option<&'a [f32]>,
    /// Output channels of the group.
    channels: usize,
    /// Where the outputs go in the group's output slice.
    out: OutMap,
}

/// The output of one group: parts of tiles by parts of channel blocks in parallel (tiles
/// first, so large planes split by position and small ones by channel), each part all its
/// channel blocks over its tiles (a block's weights stay in cache across the tiles).
fn run_group(pool: &ThreadPool, gr: &Group, out: &mut [f32]) {
    let plan = gr.plan;
    let work = gr.channels * plan.positions * plan.cg * plan.offsets.len();
    let dst = OutPtr(out.as_mut_ptr(), out.len());
    in_parts(
        pool,
        work,
        plan.tiles(),
        gr.channels.div_ceil(OB),
        |blocks, tiles| run_tiles(gr, blocks, tiles, &dst),
    );
}

/// The output buffer shared by the tasks of [`run_group`], which write disjoint positions.
struct OutPtr(*mut f32, usize);
// SAFETY: each task writes only the outputs of its own tiles and channel blocks (disjoint).
unsafe impl Sync for OutPtr {}

/// Weights of a group up to which [`run_tiles`] runs every channel block over one tile
/// before the next tile (the tile's input stays in L1 across the blocks, and all the
/// weights in L2); above it, each block over all tiles (the block's weights stay in cache).
const TILE_MAJOR_WEIGHTS: usize = 256 * 1024;

/// Channel blocks `blocks` of tiles `tiles`, written into the output.
fn run_tiles(gr: &Group, blocks: Range<usize>, tiles: Range<usize>, dst: &OutPtr) {
    let mut acc = [0.0f32; OB * TILE];
    if std::mem::size_of_val(gr.weights) <= TILE_MAJOR_WEIGHTS {
        for tile in tiles {
            for blk in blocks.clone() {
                run_block_tile(gr, blk, tile, dst, &mut acc);
            }
        }
    } else {
        for blk in blocks {
            for tile in tiles.clone() {
                run_block_tile(gr, blk, tile, dst, &mut acc);
            }
        }
    }
}

/// Channel block `blk` of tile `tile`, written into the output (through `acc` where the
/// tile's positions are not one contiguous run of every channel's output row).
fn run_block_tile(gr: &Group, blk: usize, tile: usize, dst: &OutPtr, acc: &mut [f32; OB * TILE]) {
    let plan = gr.plan;
    if let Some(rv) = plan.row_vectors {
        return run_row_tile(gr, blk, tile, rv, dst);
    }
    let om = gr.out;
    let channels = (gr.channels - blk * OB).min(OB);
    let rows = plan.weight_rows(gr.weights, blk, channels);
    let bias: [f32; OB] =
        std::array::from_fn(|o| gr.bias.map_or(0.0, |b| b[blk * OB + o.min(channels - 1)]));
    let p0 = tile * TILE;
    let end = (p0 + TILE).min(plan.positions);
    let vectors = (end - p0).div_ceil(VEC);
    // One output row (a 1-D convolution, or a plane without padding columns) of whole
    // vectors of a full block, stored with step 1: the sums go straight into the output
    // rows.
    let contiguous = plan.ho == 1 || plan.wp == plan.wo;
    let direct = contiguous && om.step == 1 && channels == OB && end - p0 == vectors * VEC;
    let (out, stride) = if direct {
        let at = blk * OB * om.channel + p0 + om.first;
        debug_assert!(at + (OB - 1) * om.channel + vectors * VEC <= dst.1);
        // SAFETY: `at` is inside the output buffer (checked above in debug builds).
        (unsafe { dst.0.add(at) }, om.channel)
    } else {
        (acc.as_mut_ptr(), TILE)
    };
    // SAFETY: direct: `OB` rows of `vectors VEC` values from `out`, `om.channel` apart,
    // are outputs inside the buffer (positions below `Ho Wo`, channels of the block) that
    // belong to this task only; else `acc` holds `OB` rows of `TILE >= vectors VEC` values.
    unsafe {
        block(plan, gr.padded, p0, vectors, &rows, &bias, out, stride);
    }
    if direct {
        if let Some(res) = gr.residual {
            let at = blk * OB * om.channel + p0 + om.first;
            for o in 0..OB {
                let base = at + o * om.channel;
                // SAFETY: the same outputs `block` just wrote (see above).
                let row =
                    unsafe { std::slice::from_raw_parts_mut(out.add(o * stride), vectors * VEC) };
                for (v, &r) in row.iter_mut().zip(&res[base..base + vectors * VEC]) {
                    *v += r;
                }
            }
        }
        return;
    }
    // Row segments of the tile's valid positions, one copy per channel each.
    let mut p = p0;
    while p < end {
        let (r, s) = (p / plan.wp, p % plan.wp);
        let next = (p - s + plan.wp).min(end);
        let stop = (p - s + plan.wo).min(next);
        if stop > p {
            let (j, len) = (p - p0, stop - p);
            for o in 0..channels {
                let at = (blk * OB + o) * om.channel + r * om.row + s * om.step + om.first;
                let src = &acc[o * TILE + j..][..len];
                debug_assert!(at + (len - 1) * om.step < dst.1);
                // SAFETY: `at + i step` for `i < len` is inside the output, and these
                // (channel, position) pairs belong to this task only.
                unsafe {
                    match gr.residual {
                        None if om.step == 1 => {
                            std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0.add(at), len);
                        }
                        None => {
                            for (i, &v) in src.iter().enumerate() {
                                *dst.0.add(at + i * om.step) = v;
                            }
                        }
                        Some(res) if om.step == 1 => {
                            let out = std::slice::from_raw_parts_mut(dst.0.add(at), len);
                            for ((o, &v), &r) in out.iter_mut().zip(src).zip(&res[at..at + len]) {
                                *o = v + r;
                            }
                        }
                        Some(res) => {
                            for (i, &v) in src.iter().enumerate() {
                                let k = at + i * om.step;
                                *dst.0.add(k) = v + res[k];
                            }
                        }
                    }
                }
            }
        }
        p = next;
    }
}

/// Channel block `blk` of row tile `tile` (row tiles of `rv` vectors per output row),
/// written straight into the output rows, the residual added there.
fn run_row_tile(gr: &Group, blk: usize, tile: usize, rv: usize, dst: &OutPtr) {
    let plan = gr.plan;
    let om = gr.out;
    let channels = (gr.channels - blk * OB).min(OB);
    let rows = plan.weight_rows(gr.weights, blk, channels);
    let bias: [f32; OB] =
        std::array::from_fn(|o| gr.bias.map_or(0.0, |b| b[blk * OB + o.min(channels - 1)]));
    assert!(
        plan.weights_in_order(),
        "conv_direct: row tiles of a transposed kernel"
    );
    let per_tile = TILE / VEC;
    let first = tile * per_tile;
    let count = (plan.ho * rv - first).min(per_tile);
    let mut vectors = [RowVector::default(); TILE / VEC];
    for (i, v) in vectors[..count].iter_mut().enumerate() {
        let (r, j) = ((first + i) / rv, (first + i) % rv);
        let s = j * VEC;
        let lanes = (plan.wo - s).min(VEC);
        *v = RowVector {
            input: r * plan.wp + s,
            output: r * om.row + s + om.first,
            mask: (1u32 << lanes).wrapping_sub(1) as u16,
        };
    }
    let last = vectors[count - 1];
    assert!(
        (blk * OB + channels - 1) * om.channel + last.output + last.mask.count_ones() as usize
            <= dst.1
            && (plan.cg - 1) * plan.plane
                + last.input
                + VEC
                + plan.offsets.last().copied().unwrap_or(0)
                <= gr.padded.len()
            && gr.residual.is_none_or(|r| r.len() == dst.1)
            && gr
                .second
                .is_none_or(|r| r.len() == dst.1 && gr.residual.is_some()),
        "conv_direct: row tile bounds"
    );
    let out = RowOut {
        // SAFETY: the block's first channel row is inside the output (asserted above).
        at: unsafe { dst.0.add(blk * OB * om.channel) },
        stride: om.channel,
        channels,
        residual: gr.residual.map(|r| r[blk * OB * om.channel..].as_ptr()),
        second: gr.second.map(|r| r[blk * OB * om.channel..].as_ptr()),
    };
    // SAFETY: the reads of `padded` end inside it and the masked writes inside the output
    // (asserted above); the outputs of this block and tile belong to this task only; AVX-512F
    // is on (row tiles are planned only then).
    unsafe {
        match count {
            1 => rows_avx512::<1>(plan, gr.padded.as_ptr(), &rows, &bias, &vectors, &out),
            2 => rows_avx512::<2>(plan, gr.padded.as_ptr(), &rows, &bias, &vectors, &out),
            _ => rows_avx512::<3>(plan, gr.padded.as_ptr(), &rows, &bias, &vectors, &out),
        }
    }
}

/// One vector of a row tile: up to [`VEC`] consecutive positions of one output row.
#[derive(Clone, Copy, Default)]
struct RowVector {
    /// Flat position of its first output in the padded planes.
    input: usize,
    /// Index of its first output in a channel's output.
    output: usize,
    /// Its positions inside the row (lane `i` is bit `i`).
    mask: u16,
}

/// Where [`rows_avx512`] writes: `channels` output rows from `at`, `stride` apart, each
/// value plus the residual at the same index from `residual` where given.
struct RowOut {
    at: *mut f32,
    stride: usize,
    channels: usize,
    residual: Option<*const f32>,
    /// Added after `residual` where given, at the same index.
    second: Option<*const f32>,
}

/// `out[o][v.output + j] (+)= bias[o] + sum_c sum_t w[o][c][t] x[c][v.input + j + offset t]`
/// for the lanes `j` in each vector's mask, the [`OB`] channels of one block (kernel rows
/// `w`; sums of rows at or past `out.channels` are not stored), the residual at the
/// output's index added where given: `8 NV` accumulators, as [`block_avx512`].
///
/// # Safety
/// AVX-512F must be available; every value read from `x` and the residual and written to
/// the output must be inside its buffer (masked-off lanes are neither read nor written).
#[target_feature(enable = "avx512f")]
unsafe fn rows_avx512<const NV: usize>(
    plan: &Plan,
    x: *const f32,
    w: &[*const f32; OB],
    bias: &[f32; OB],
    vectors: &[RowVector; TILE / VEC],
    out: &RowOut,
) {
    let input: [usize; NV] = std::array::from_fn(|i| vectors[i].input);
    let mut sums = [[_mm512_setzero_ps(); NV]; OB];
    for (row, &b) in sums.iter_mut().zip(bias) {
        for s in row.iter_mut() {
            *s = _mm512_set1_ps(b);
        }
    }
    // Row tiles are planned for convolutions, whose rows list the weights in order.
    let mut k = 0;
    for c in 0..plan.cg {
        let xc = x.add(c * plan.plane);
        for &off in &plan.offsets {
            let xt = xc.add(off);
            let mut v = [_mm512_setzero_ps(); NV];
            for (v, &p) in v.iter_mut().zip(&input) {
                *v = _mm512_loadu_ps(xt.add(p));
            }
            for (row, &wo) in sums.iter_mut().zip(w) {
                let kv = _mm512_set1_ps(*wo.add(k));
                for (s, &xv) in row.iter_mut().zip(&v) {
                    *s = _mm512_fmadd_ps(kv, xv, *s);
                }
            }
            k += 1;
        }
    }
    for (o, row) in sums.iter().enumerate().take(out.channels) {
        for (s, vector) in row.iter().zip(vectors) {
            let at = o * out.stride + vector.output;
            let mut s = *s;
            for r in [out.residual, out.second].into_iter().flatten() {
                s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(vector.mask, r.add(at)));
            }
            _mm512_mask_storeu_ps(out.at.add(at), vector.mask, s);
        }
    }
}

/// `out[o stride + j] = bias[o] + sum_c sum_t w[o][c][t] padded[c][p0 + j + offset t]` for
/// the [`OB`] channels of one block (kernel rows `rows`) and `vectors` 16-position vectors
/// from `p0`, on AVX-512F where the plan says so, else AVX2+FMA (which [`applies`] requires).
///
/// # Safety
/// `out` must be valid for writes of `OB` rows of `vectors VEC` values, `stride` apart.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    plan: &Plan,
    padded: &[f32],
    p0: usize,
    vectors: usize,
    rows: &[*const f32; OB],
    bias: &[f32; OB],
    out: *mut f32,
    stride: usize,
) {
    let last = (plan.cg - 1) * plan.plane + p0 + plan.offsets.last().copied().unwrap_or(0);
    assert!(
        (1..=TILE / VEC).contains(&vectors) && last + vectors * VEC <= padded.len(),
        "conv_direct: block bounds"
    );
    // SAFETY: every read of `padded` is inside it (checked above: the largest flat index
    // read is `last + vectors VEC - 1`), the weights each row of `rows` is read at are
    // inside the group's weights (asserted by `Plan::weight_rows`), and the writes are those the caller vouches for; AVX-512F is
    // checked here, AVX2 and FMA by the assertions of `applies` / `conv_transpose_applies`
    // in the callers.
    unsafe {
        let x = padded.as_ptr().add(p0);
        if plan.wide && crate::backend::cpu::kernels::avx512_detected() {
            match (vectors, plan.weights_in_order()) {
                (1, true) => block_avx512::<1, true>(plan, x, rows, bias, out, stride),
                (2, true) => block_avx512::<2, true>(plan, x, rows, bias, out, stride),
                (_, true) => block_avx512::<3, true>(plan, x, rows, bias, out, stride),
                (1, false) => block_avx512::<1, false>(plan, x, rows, bias, out, stride),
                (2, false) => block_avx512::<2, false>(plan, x, rows, bias, out, stride),
                (_, false) => block_avx512::<3, false>(plan, x, rows, bias, out, stride),
            }
        } else {
            // Quarters: four channels by half the positions (`vectors` 8-lane vectors).
            for q in 0..4 {
                let (half, sub) = (q / 2 * 4, q % 2 * vectors * VEC / 2);
                let rows: [*const f32; 4] = std::array::from_fn(|i| rows[half + i]);
                let bias: [f32; 4] = std::array::from_fn(|i| bias[half + i]);
                let (o, xq) = (out.add(half * stride + sub), x.add(sub));
                match (vectors, plan.weights_in_order()) {
                    (1, true) => block_avx2::<1, true>(plan, xq, &rows, &bias, o, stride),
                    (2, true) => block_avx2::<2, true>(plan, xq, &rows, &bias, o, stride),
                    (_, true) => block_avx2::<3, true>(plan, xq, &rows, &bias, o, stride),
                    (1, false) => block_avx2::<1, false>(plan, xq, &rows, &bias, o, stride),
                    (2, false) => block_avx2::<2, false>(plan, xq, &rows, &bias, o, stride),
                    (_, false) => block_avx2::<3, false>(plan, xq, &rows, &bias, o, stride),
                }
            }
        }
    }
}

/// Defines a register-blocked piece of [`block`]: `$ch` channels (kernel rows `w[o]`, read
/// in order, and `bias[o]`) by `NV` vectors of `$lanes` positions from `x`, in `NV $ch`
/// accumulators (per input channel and tap `NV` loads, `$ch` broadcasts and `NV $ch`
/// FMAs), stored from `out` in rows `stride` apart.
macro_rules! block_kernel {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $ch:literal, $lanes:literal,
     $zero:ident, $set1:ident, $load:ident, $fma:ident, $store:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU must support the target features; `x` and `w` must hold every value read,
        /// `out` must be valid for `$ch` rows of `NV $lanes` values `stride` apart.
        #[target_feature(enable = $feature)]
        unsafe fn $name<const NV: usize, const IN_ORDER: bool>(
            plan: &Plan,
            x: *const f32,
            w: &[*const f32; $ch],
            bias: &[f32; $ch],
            out: *mut f32,
            stride: usize,
        ) {
            let mut sums = [[$zero(); NV]; $ch];
            for (row, &b) in sums.iter_mut().zip(bias) {
                for s in row.iter_mut() {
                    *s = $set1(b);
                }
            }
            let mut k = 0;
            for c in 0..plan.cg {
                let xc = x.add(c * plan.plane);
                let wc = c * plan.weight_channel;
                for (t, &off) in plan.offsets.iter().enumerate() {
                    let xt = xc.add(off);
                    let mut v = [$zero(); NV];
                    for (i, v) in v.iter_mut().enumerate() {
                        *v = $load(xt.add(i * $lanes));
                    }
                    let at = if IN_ORDER { k } else { wc + plan.weight_taps[t] };
                    for (row, &wo) in sums.iter_mut().zip(w) {
                        let kv = $set1(*wo.add(at));
                        for (s, &xv) in row.iter_mut().zip(&v) {
                            *s = $fma(kv, xv, *s);
                        }
                    }
                    k += 1;
                }
            }
            for (o, row) in sums.iter().enumerate() {
                for (i, s) in row.iter().enumerate() {
                    $store(out.add(o * stride + i * $lanes), *s);
                }
            }
        }
    };
}

block_kernel!(
    /// A whole [`block`] on AVX-512F: 8 channels by `16 NV` positions in `8 NV` accumulators.
    block_avx512, "avx512f", 8, 16,
    _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

block_kernel!(
    /// A quarter of a [`block`] on AVX2+FMA: 4 channels by `8 NV` positions in `4 NV`
    /// accumulators.
    block_avx2, "avx2,fma", 4, 8,
    _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_storeu_ps
);

#[cfg(test)]
mod tests {
    use super::super::image::tests::{assert_close, Case, Geometry};
    use super::*;
    use crate::backend::cpu::reference::image as reference;

    /// A kind of convolution under test: its shapes, the direct kernel and the
    /// test of where it applies, the dispatching entry point and the reference loops.
    struct Kind {
        geometry: fn(&Case) -> Geometry,
        applies: fn(&Conv2dArgs) -> bool,
        direct: DirectKernel,
        dispatched: FastKernel,
        reference: ReferenceLoops,
    }

    /// `(pool, args, wide, x, w, bias, y)`: a direct kernel, AVX-512 when `wide`.
    type DirectKernel =
        fn(&ThreadPool, &Conv2dArgs, bool, &[f32], &[f32], Option<&[f32]>, &mut [f32]);
    /// `(pool, args, x, w, bias, y)`: the fast op as the backend dispatches it.
    type FastKernel = fn(&ThreadPool, &Conv2dArgs, &[f32], &[f32], Option<&[f32]>, &mut [f32]);
    /// `(args, x, w, bias) -> y`: the reference loops.
    type ReferenceLoops = fn(&Conv2dArgs, &[f32], &[f32], Option<&[f32]>) -> Vec<f32>;

    /// `Conv2d`: direct where it applies, else im2col.
    const CONV: Kind = Kind {
        geometry: Geometry::conv,
        applies,
        direct: conv2d,
        dispatched: super::super::image::conv2d,
        reference: reference::conv2d,
    };

    /// `ConvTranspose2d`: the direct phases where they apply, else gemm and scatter.
    const CONV_TRANSPOSE: Kind = Kind {
        geometry: Geometry::transposed,
        applies: conv_transpose_applies,
        direct: conv_transpose2d,
        dispatched: super::super::image::conv_transpose2d,
        reference: reference::conv_transpose2d,
    };

    /// The fast `kind` against its reference loops; `direct` says which cases must
    /// take the direct kernel.
    fn check(kind: &Kind, cases: &[Case], direct: bool) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in cases {
            let geometry = (kind.geometry)(case);
            let (args, [x, w, b]) = (geometry.args(), geometry.operands());
            assert_eq!(
                (kind.applies)(&args),
                direct && simd::has_avx2_fma(),
                "{case:?}"
            );
            let wide = crate::backend::cpu::kernels::avx512_detected();
            // The dispatcher, then the AVX2 blocks on an AVX-512 CPU.
            for (bias, avx2) in [(Some(&b[..]), false), (None, false), (Some(&b[..]), wide)] {
                let want = (kind.reference)(&args, &x, &w, bias);
                let mut got = vec![f32::NAN; want.len()];
                if avx2 && direct {
                    (kind.direct)(&pool, &args, false, &x, &w, bias, &mut got);
                } else {
                    (kind.dispatched)(&pool, &args, &x, &w, bias, &mut got);
                }
                assert_close(&want, &got, &format!("{case:?} avx2 {avx2}"));
            }
        }
    }

    /// Shapes the direct kernel runs.
    #[rustfmt::skip]
    const DIRECT: [Case; 13] = [
        // 3x3, same padding, channels not a multiple of the block, rows ending inside a tile.
        ([1, 5, 9, 13], 7, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        // Rows of exactly one vector (row tiles spanning rows), a partial channel block.
        ([1, 9, 6, 16], 10, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        // Batch 2, wide enough for several parallel tasks.
        ([2, 16, 20, 37], 12, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        // 1-D dilated (HiFi-GAN), uneven pads, a single output channel.
        ([1, 6, 1, 300], 1, [1, 7], [1, 1], [0, 9, 0, 6], [1, 3], 1, [0, 0]),
        ([1, 32, 1, 1000], 32, [1, 5], [1, 1], [0, 12, 0, 12], [1, 6], 1, [0, 0]),
        // Long rows run in chunks: batch 2, uneven pads, a partial channel block.
        ([2, 5, 1, 700], 11, [1, 3], [1, 1], [0, 1, 0, 3], [1, 2], 1, [0, 0]),
        // Few positions, many channels (split by channel blocks): a tile of one, two and
        // three vectors.
        ([1, 24, 1, 33], 100, [1, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ([1, 19, 1, 72], 40, [1, 5], [1, 1], [0, 2, 0, 2], [1, 1], 1, [0, 0]),
        ([1, 17, 1, 9], 70, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
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
        // Two input channels per group (one is the depthwise loops').
        ([1, 12, 1, 40], 1, [1, 3], [1, 1], [0, 3, 0, 3], [1, 3], 6, [0, 0]),
    ];

    #[test]
    fn direct_conv2d_matches_the_reference_loops() {
        check(&CONV, &DIRECT, true);
    }

    #[test]
    fn conv2d_outside_the_direct_kernel_matches_the_reference_loops() {
        check(&CONV, &OTHERS, false);
    }

    /// Transposed shapes the phases run.
    #[rustfmt::skip]
    const TRANSPOSED: [Case; 7] = [
        // HiFi-GAN's upsamplers: kernel 2 s, crop s / 2.
        ([1, 32, 1, 72], 16, [1, 16], [1, 8], [0, 4, 0, 4], [1, 1], 1, [0, 0]),
        ([2, 12, 1, 40], 9, [1, 8], [1, 4], [0, 2, 0, 2], [1, 1], 1, [0, 0]),
        // Odd kernel (phases with different tap counts), uneven crops, output padding.
        ([1, 5, 1, 23], 11, [1, 7], [1, 3], [0, 1, 0, 2], [1, 1], 1, [0, 1]),
        ([1, 3, 1, 17], 2, [1, 5], [1, 2], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        // Stride 1 (a plain convolution with the kernel flipped), a single input position.
        ([1, 4, 1, 30], 20, [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 1, [0, 0]),
        ([1, 6, 1, 1], 3, [1, 4], [1, 2], [0, 0, 0, 0], [1, 1], 1, [0, 1]),
        // Many output positions per phase, for several parallel tasks.
        ([1, 16, 1, 600], 8, [1, 8], [1, 4], [0, 2, 0, 2], [1, 1], 1, [0, 0]),
    ];

    /// Transposed shapes left to the gemm: 2-D, dilated, grouped, and a crop past a
    /// phase's reach (its first output would need input from before the start).
    #[rustfmt::skip]
    const TRANSPOSED_OTHERS: [Case; 4] = [
        ([1, 4, 3, 5], 3, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1, [0, 0]),
        ([1, 4, 1, 9], 3, [1, 3], [1, 2], [0, 0, 0, 0], [1, 2], 1, [0, 0]),
        ([1, 4, 1, 9], 3, [1, 4], [1, 2], [0, 1, 0, 1], [1, 1], 2, [0, 0]),
        ([1, 4, 1, 9], 3, [1, 4], [1, 2], [0, 3, 0, 1], [1, 1], 1, [0, 0]),
    ];

    #[test]
    fn direct_conv_transpose2d_matches_the_reference_loops() {
        check(&CONV_TRANSPOSE, &TRANSPOSED, true);
    }

    #[test]
    fn conv_transpose2d_outside_the_phases_matches_the_reference_loops() {
        check(&CONV_TRANSPOSE, &TRANSPOSED_OTHERS, false);
    }
}
