//! Fast cpu versions of the ops of imported graphs: `Conv2d` as im2col and
//! the f32 gemm kernel, `BatchMatmul` on the same kernel, and broadcast
//! element-wise ops by rows (no per-value index arithmetic).

use super::elementwise::{lane_sum, unary_in_place, vectorized};
use super::par::chunks;
use crate::backend::cpu::kernels;
use crate::backend::cpu::reference::image::{batch_plan, transpose, BatchPlan, Conv2dArgs};
use crate::backend::Op;
use crate::dtype::DType;
use rayon::prelude::*;
use rayon::ThreadPool;

/// `y [m, n] = x [m, k] w^T` with `w [n, k]` (f32 values), on the gemm kernel.
fn gemm_rows(pool: &ThreadPool, x: &[f32], k: usize, w: &[f32], n: usize, y: &mut [f32]) {
    let m = x.len().checked_div(k).unwrap_or(0);
    if m == 0 || n == 0 {
        return;
    }
    let bytes: &[u8] = bytemuck::cast_slice(w);
    let path = kernels::active_path();
    pool.install(|| kernels::matmul_with(path, DType::F32, bytes, n, k, x, m, None, y));
}

/// `Conv2d` of `[leaky(x), w]` (bias `b`; `leaky`: the slope of a `LeakyRelu` applied to
/// `x` first) with `residual` (the output's layout), then `second` where given, added to
/// each output value: `LeakyRelu`, `Conv2d`, then `Add` (and `Add`); the activation in the
/// padded copy and the addends in the output stores of the Winograd or direct kernel where
/// one applies (a second addend summed with the residual first where the kernel's stores
/// take one only), else each a pass of its own.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_add(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    [x, w]: [&[f32]; 2],
    leaky: Option<f32>,
    b: Option<&[f32]>,
    residual: &[f32],
    second: Option<&[f32]>,
    y: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::conv_winograd::applies(a) {
        let sum: Option<Vec<f32>> =
            second.map(|s| residual.iter().zip(s).map(|(r, s)| r + s).collect());
        let residual = sum.as_deref().unwrap_or(residual);
        return super::conv_winograd::conv2d_add(pool, a, [x, w], leaky, b, Some(residual), y);
    }
    #[cfg(target_arch = "x86_64")]
    if super::conv_direct::applies(a) {
        let wide = kernels::avx512_detected();
        let addends = [Some(residual), second];
        return super::conv_direct::conv2d_add(pool, a, wide, [x, w], leaky, b, addends, y);
    }
    let activated: Option<Vec<f32>> = leaky.map(|s| {
        x.iter()
            .map(|&v| super::elementwise::leaky_relu(v, s))
            .collect()
    });
    conv2d(pool, a, activated.as_deref().unwrap_or(x), w, b, y);
    // Convolutions the direct kernel does not take (strided, narrow groups, no AVX2).
    for addend in std::iter::once(residual).chain(second) {
        for (v, &r) in y.iter_mut().zip(addend) {
            *v += r;
        }
    }
}

/// `Conv2d` (see [`Op::Conv2d`]): Winograd F(2x2, 3x3) where it applies (3x3, stride 1,
/// on AVX-512F), the direct kernel where it applies (stride 1 on AVX-512F or AVX2+FMA),
/// the depthwise loops for one input channel per group, else per batch entry and group
/// the input copied once into a zero-padded channels-last buffer, so
/// each patch row (`[Ho Wo, kh kw Cg]`, taps outer, channels inner) is `kh kw` contiguous
/// copies; then the gemm kernel against the kernel rows reordered the same way.
pub(super) fn conv2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::conv_winograd::applies(a) {
        return super::conv_winograd::conv2d_add(pool, a, [x, w], None, b, None, y);
    }
    #[cfg(target_arch = "x86_64")]
    if super::conv_direct::applies(a) {
        let wide = kernels::avx512_detected();
        return super::conv_direct::conv2d(pool, a, wide, x, w, b, y);
    }
    if super::conv_depthwise::applies(a) {
        return super::conv_depthwise::conv2d(pool, a, x, w, b, y);
    }
    let (h, wd) = (a.x_shape[2], a.x_shape[3]);
    let (cout, cg, kh, kw) = (a.w_shape[0], a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let (k, spatial) = (cg * kh * kw, ho * wo);
    let (hp, wp) = (h + a.pads[0] + a.pads[2], wd + a.pads[1] + a.pads[3]);
    // Kernel rows in (u, v, c) order.
    let mut wr = vec![0.0f32; cout * k];
    for o in 0..cout {
        for c in 0..cg {
            for t in 0..kh * kw {
                wr[o * k + t * cg + c] = w[(o * cg + c) * kh * kw + t];
            }
        }
    }
    // Taken out, not borrowed: while this thread waits inside `pool.install` rayon may
    // run another `Conv2d` on it (a concurrent session's), which then finds the buffers
    // empty instead of panicking on a second borrow.
    let (mut padded, mut patches) = SCRATCH.take();
    padded.clear();
    padded.resize(hp * wp * cg, 0.0);
    // Every patch value is written below: only a longer buffer needs new memory.
    if patches.len() < spatial * k {
        patches.resize(spatial * k, 0.0);
    }
    conv2d_with(
        pool,
        a,
        x,
        &wr,
        b,
        y,
        &mut padded,
        &mut patches[..spatial * k],
    );
    SCRATCH.set((padded, patches));
}

thread_local! {
    /// The padded input and the patches of the last `Conv2d` on this thread, reused
    /// (a fresh buffer of tens of MB per call costs its page faults every time).
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

#[allow(clippy::too_many_arguments)]
fn conv2d_with(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    wr: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
    padded: &mut [f32],
    patches: &mut [f32],
) {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cout, cg, kh, kw) = (a.w_shape[0], a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let (k, spatial) = (cg * kh * kw, ho * wo);
    let og = cout / a.groups;
    let wp = wd + a.pads[1] + a.pads[3];
    for bi in 0..n {
        for g in 0..a.groups {
            let planes = &x[(bi * cin + g * cg) * h * wd..][..cg * h * wd];
            pool.install(|| {
                padded[a.pads[0] * wp * cg..]
                    .par_chunks_mut(wp * cg)
                    .take(h)
                    .enumerate()
                    .for_each(|(r, line)| {
                        for c in 0..cg {
                            let src = &planes[(c * h + r) * wd..][..wd];
                            for (s, &v) in src.iter().enumerate() {
                                line[(s + a.pads[1]) * cg + c] = v;
                            }
                        }
                    });
                patches
                    .par_chunks_mut(k * wo)
                    .enumerate()
                    .for_each(|(i, rows)| {
                        for (j, p) in rows.chunks_mut(k.max(1)).enumerate() {
                            for u in 0..kh {
                                let r = i * a.stride[0] + u * a.dilation[0];
                                for v in 0..kw {
                                    let s = j * a.stride[1] + v * a.dilation[1];
                                    let t = u * kw + v;
                                    p[t * cg..(t + 1) * cg]
                                        .copy_from_slice(&padded[(r * wp + s) * cg..][..cg]);
                                }
                            }
                        }
                    })
            });
            let out = &mut y[(bi * cout + g * og) * spatial..][..og * spatial];
            gemm_rows(pool, &wr[g * og * k..][..og * k], k, patches, spatial, out);
            if let Some(b) = b {
                for (o, row) in out.chunks_mut(spatial.max(1)).enumerate() {
                    let bias = b[g * og + o];
                    row.iter_mut().for_each(|v| *v += bias);
                }
            }
        }
    }
}

/// `ConvTranspose2d` (see [`Op::ConvTranspose2d`]): the direct kernel's phases where they
/// apply (1-D along the width, one group, on AVX-512F or AVX2+FMA), else
/// per batch entry and group as one gemm and
/// a scatter: `cols [H W, Cg_out kh kw] = x_g^T [H W, Cin_g] · w_g [Cin_g, Cg_out kh kw]`
/// on the gemm kernel, then each column value added to the output position its tap
/// reaches (positions cropped by `pads` dropped), output planes in parallel, plus `b`.
/// The sums over input channels are the gemm's (f32), then the taps in (i, j, u, v) order.
pub(super) fn conv_transpose2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::conv_direct::conv_transpose_applies(a) {
        let wide = kernels::avx512_detected();
        return super::conv_direct::conv_transpose2d(pool, a, wide, x, w, b, y);
    }
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cg_out, kh, kw) = (a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (cout, ho, wo) = (a.out_shape[1], a.out_shape[2], a.out_shape[3]);
    let cin_g = cin / a.groups.max(1);
    let (ncol, spatial, plane) = (cg_out * kh * kw, h * wd, ho * wo);
    // Per group, the kernel as gemm rows: wt[g][(o, u, v), c].
    let mut wt = vec![0.0f32; a.groups * ncol * cin_g];
    for g in 0..a.groups {
        for c in 0..cin_g {
            let src = &w[(g * cin_g + c) * ncol..][..ncol];
            for (j, &v) in src.iter().enumerate() {
                wt[(g * ncol + j) * cin_g + c] = v;
            }
        }
    }
    let mut xt = vec![0.0f32; spatial * cin_g];
    let mut cols = vec![0.0f32; spatial * ncol];
    let reach = |i: usize, u: usize, step: usize, dil: usize, pad: usize, len: usize| {
        (i * step + u * dil).checked_sub(pad).filter(|&r| r < len)
    };
    for bi in 0..n {
        for g in 0..a.groups {
            let planes = &x[(bi * cin + g * cin_g) * spatial..][..cin_g * spatial];
            for (c, src) in planes.chunks(spatial.max(1)).enumerate() {
                for (p, &v) in src.iter().enumerate() {
                    xt[p * cin_g + c] = v;
                }
            }
            gemm_rows(
                pool,
                &xt,
                cin_g,
                &wt[g * ncol * cin_g..][..ncol * cin_g],
                ncol,
                &mut cols,
            );
            let out = &mut y[(bi * cout + g * cg_out) * plane..][..cg_out * plane];
            let cols = &cols;
            pool.install(|| {
                out.par_chunks_mut(plane.max(1))
                    .enumerate()
                    .for_each(|(o, dst)| {
                        dst.fill(b.map_or(0.0, |b| b[g * cg_out + o]));
                        for i in 0..h {
                            for j in 0..wd {
                                let col = &cols[(i * wd + j) * ncol + o * kh * kw..][..kh * kw];
                                for u in 0..kh {
                                    let Some(r) =
                                        reach(i, u, a.stride[0], a.dilation[0], a.pads[0], ho)
                                    else {
                                        continue;
                                    };
                                    for v in 0..kw {
                                        if let Some(s) =
                                            reach(j, v, a.stride[1], a.dilation[1], a.pads[1], wo)
                                        {
                                            dst[r * wo + s] += col[u * kw + v];
                                        }
                                    }
                                }
                            }
                        }
                    })
            });
        }
    }
}

/// The window of an [`Op::AvgPool2d`].
pub(super) struct Window {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    pub count_include_pad: bool,
}

/// `AvgPool2d` (see [`Op::AvgPool2d`]) of `x [B, C, H, W]` into `y [B, C, Ho, Wo]`, planes in
/// parallel: each output the f32 sum of the window's values inside the input (rows, then
/// columns), divided by the window's size or, without `count_include_pad`, by the number
/// of those values.
pub(super) fn avg_pool2d(
    pool: &ThreadPool,
    x: &[f32],
    x_shape: &[usize],
    win: &Window,
    out_shape: &[usize],
    y: &mut [f32],
) {
    let (h, w) = (x_shape[2], x_shape[3]);
    let (ho, wo) = (out_shape[2], out_shape[3]);
    let [kh, kw] = win.kernel;
    if ho * wo == 0 {
        return;
    }
    // The input range `[start, end)` of each output index along an axis of length `n`
    // (empty where the window lies in the padding).
    let ranges =
        |len: usize, stride: usize, pad: usize, k: usize, n: usize| -> Vec<(usize, usize)> {
            (0..len)
                .map(|i| {
                    let first = i * stride;
                    let end = (first + k).saturating_sub(pad).min(n);
                    (first.saturating_sub(pad).min(end), end)
                })
                .collect()
        };
    let rows = ranges(ho, win.stride[0], win.pads[0], kh, h);
    let cols = ranges(wo, win.stride[1], win.pads[1], kw, w);
    chunks(
        pool,
        y.len() * kh * kw,
        y,
        ho * wo,
        || (),
        |_, p, out| {
            let plane = &x[p * h * w..][..h * w];
            for (row, &(r0, r1)) in out.chunks_exact_mut(wo).zip(&rows) {
                for (o, &(c0, c1)) in row.iter_mut().zip(&cols) {
                    let mut sum = 0.0f32;
                    for r in r0..r1 {
                        for &v in &plane[r * w + c0..r * w + c1] {
                            sum += v;
                        }
                    }
                    let count = if win.count_include_pad {
                        kh * kw
                    } else {
                        ((r1 - r0) * (c1 - c0)).max(1)
                    };
                    *o = sum / count as f32;
                }
            }
        },
    );
}

/// `BatchMatmul` (see [`Op::BatchMatmul`]): per batch entry, `b` transposed
/// (once for consecutive entries that share it, as a broadcast `b` does), then the gemm
/// kernel.
pub(super) fn batch_matmul(
    pool: &ThreadPool,
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out_shape: &[usize],
    y: &mut [f32],
) {
    let BatchPlan { m, k, n, offsets } = batch_plan(a.1, b.1, out_shape);
    let mut bt = vec![0.0f32; k * n];
    let mut transposed = None;
    for (out, &(ao, bo)) in y.chunks_mut((m * n).max(1)).zip(&offsets) {
        if k == 0 {
            out.fill(0.0);
            continue;
        }
        if transposed != Some(bo) {
            transpose(&b.0[bo..], k, n, &mut bt);
            transposed = Some(bo);
        }
        gemm_rows(pool, &a.0[ao..ao + m * k], k, &bt, n, out);
    }
}

/// The operands of [`group_norm`].
pub(super) struct GroupNormArgs<'a> {
    /// `[B, C, ..]`.
    pub shape: &'a [usize],
    /// Per channel.
    pub gain: &'a [f32],
    /// Per channel.
    pub bias: &'a [f32],
    pub groups: usize,
    pub eps: f32,
    /// A per-channel scale and shift after the norm's own (`GroupNormAffine`).
    pub affine: Option<(&'a [f32], &'a [f32])>,
    /// Then a scale and shift per batch entry and channel (`FusedGroupNorm`'s modulation):
    /// `[B or 1, C]` values each, read at `b * step + c` (`step` C, or 0 for one entry).
    /// Only with `affine`.
    pub modulation: Option<[(&'a [f32], usize); 2]>,
    /// Then an element-wise unary op.
    pub act: Option<&'a Op>,
}

/// `GroupNorm` / `GroupNormAffine` / `FusedGroupNorm` (see [`Op::FusedGroupNorm`]) with the
/// groups in parallel: per group the mean, then the variance about it (two passes, sums in
/// f64 partial sums), then `(x - mean) / sqrt(var + eps)` scaled and shifted per channel
/// (twice when affine: the norm's gain and bias, then `gamma` and `beta`; a third time when
/// modulated), then the activation; the same f32 operations in the same order as those ops
/// one after another.
pub(super) fn group_norm(pool: &ThreadPool, x: &[f32], a: &GroupNormArgs, y: &mut [f32]) {
    let c = a.shape[1];
    let rest: usize = a.shape[2..].iter().product();
    let per_group = (c / a.groups * rest).max(1);
    pool.install(|| {
        y.par_chunks_mut(per_group)
            .zip(x.par_chunks(per_group))
            .enumerate()
            .for_each(|(gi, (yg, xg))| {
                let n = xg.len().max(1) as f64;
                let mean = lane_sum(xg, f64::from) / n;
                let var = lane_sum(xg, |v| (f64::from(v) - mean).powi(2)) / n;
                let inv = (1.0 / (var + a.eps as f64).sqrt()) as f32;
                let mean = mean as f32;
                let (entry, first) = (gi / a.groups, (gi % a.groups) * (c / a.groups));
                for (ci, (yc, xc)) in yg
                    .chunks_mut(rest.max(1))
                    .zip(xg.chunks(rest.max(1)))
                    .enumerate()
                {
                    let ch = first + ci;
                    let (g, b) = (a.gain[ch], a.bias[ch]);
                    vectorized(
                        #[inline(always)]
                        || match (a.affine, a.modulation) {
                            (None, _) => {
                                for (o, &v) in yc.iter_mut().zip(xc) {
                                    *o = (v - mean) * inv * g + b;
                                }
                            }
                            (Some((gamma, beta)), None) => {
                                let (s, t) = (gamma[ch], beta[ch]);
                                for (o, &v) in yc.iter_mut().zip(xc) {
                                    *o = ((v - mean) * inv * g + b) * s + t;
                                }
                            }
                            (Some((gamma, beta)), Some([(scale, ms), (shift, us)])) => {
                                let (s, t) = (gamma[ch], beta[ch]);
                                let (m, u) = (scale[entry * ms + ch], shift[entry * us + ch]);
                                for (o, &v) in yc.iter_mut().zip(xc) {
                                    *o = (((v - mean) * inv * g + b) * s + t) * m + u;
                                }
                            }
                        },
                    );
                    if let Some(op) = a.act {
                        unary_in_place(op, yc);
                    }
                }
            })
    });
}

/// `Permute` (see [`Op::Permute`]): output rows (the last output axis) in parallel, each
/// read with the input stride of the axis it comes from.
pub(super) fn permute(
    pool: &ThreadPool,
    x: &[f32],
    shape: &[usize],
    perm: &[usize],
    y: &mut [f32],
) {
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let last = out_shape.last().copied().unwrap_or(1).max(1);
    let step = perm.last().map_or(1, |&p| strides[p]);
    chunks(
        pool,
        y.len(),
        y,
        last,
        || (),
        |_, row, out| {
            let (mut rest, mut base) = (row, 0);
            for axis in (0..rank.saturating_sub(1)).rev() {
                base += (rest % out_shape[axis]) * strides[perm[axis]];
                rest /= out_shape[axis];
            }
            for (j, o) in out.iter_mut().enumerate() {
                *o = x[base + j * step];
            }
        },
    );
}

/// `Concat` (see [`Op::Concat`](crate::backend::Op::Concat)) of f32 `parts` (values,
/// shape) along `axis` into `y`: output row `o` (one index of the axes before `axis`) is
/// each part's block of row `o` in order; rows in parallel on `pool` when large.
pub(super) fn concat(pool: &ThreadPool, parts: &[(&[f32], &[usize])], axis: usize, y: &mut [f32]) {
    let blocks: Vec<usize> = parts
        .iter()
        .map(|(_, s)| s[axis..].iter().product())
        .collect();
    let row: usize = blocks.iter().sum();
    if row == 0 {
        return;
    }
    chunks(
        pool,
        y.len(),
        y,
        row,
        || (),
        |_, o, out| {
            let mut at = 0;
            for ((values, _), &n) in parts.iter().zip(&blocks) {
                out[at..at + n].copy_from_slice(&values[o * n..(o + 1) * n]);
                at += n;
            }
        },
    );
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::backend::cpu::reference::image as reference;

    /// A value sequence without structure: `sin(1.3 i + seed)`.
    pub(in super::super) fn values(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * 1.3 + seed).sin()).collect()
    }

    #[test]
    fn avg_pool2d_matches_the_reference_loops() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        /// x shape, kernel, stride, pads `[top, left, bottom, right]`.
        type PoolCase = ([usize; 4], [usize; 2], [usize; 2], [usize; 4]);
        // Each with and without the padding counted.
        let cases: [PoolCase; 5] = [
            ([1, 32, 128, 128], [2, 2], [2, 2], [0, 0, 0, 0]),
            ([2, 3, 9, 11], [3, 3], [2, 2], [1, 1, 1, 1]),
            ([1, 2, 5, 7], [3, 2], [1, 3], [2, 0, 1, 1]),
            ([1, 1, 2, 2], [5, 5], [1, 1], [4, 4, 4, 4]),
            ([1, 4, 1, 17], [1, 4], [1, 4], [0, 0, 0, 3]),
        ];
        for (xs, kernel, stride, pads) in cases {
            let len = |a: usize| (xs[2 + a] + pads[a] + pads[a + 2] - kernel[a]) / stride[a] + 1;
            let out = [xs[0], xs[1], len(0), len(1)];
            let x = values(xs.iter().product(), 0.4);
            for count_include_pad in [false, true] {
                let want =
                    reference::avg_pool2d(&x, &xs, &out, kernel, stride, pads, count_include_pad);
                let window = Window {
                    kernel,
                    stride,
                    pads,
                    count_include_pad,
                };
                let mut got = vec![f32::NAN; want.len()];
                avg_pool2d(&pool, &x, &xs, &window, &out, &mut got);
                assert_close(&want, &got, &format!("{xs:?} {kernel:?} {pads:?}"));
            }
        }
    }

    #[test]
    fn permute_moves_every_value_where_its_index_says() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let cases: [(&[usize], &[usize]); 8] = [
            (&[192, 109], &[1, 0]),
            (&[1, 109, 192], &[0, 2, 1]),
            (&[3, 2, 17, 33], &[0, 1, 3, 2]),
            (&[40, 5, 300], &[0, 2, 1]),
            (&[1, 16, 16], &[0, 2, 1]),
            (&[2, 0, 5], &[0, 2, 1]),
            (&[2, 3, 4, 5], &[0, 2, 1, 3]),
            (&[2, 3, 4], &[2, 0, 1]),
        ];
        for (shape, perm) in cases {
            let x = values(shape.iter().product(), 0.3);
            let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let mut want = vec![0.0f32; x.len()];
            for (flat, w) in want.iter_mut().enumerate() {
                // The output multi-index, then the input position it names.
                let (mut rest, mut src) = (flat, 0);
                let mut idx = vec![0; shape.len()];
                for d in (0..shape.len()).rev() {
                    idx[perm[d]] = rest % out_shape[d];
                    rest /= out_shape[d];
                }
                for (d, &i) in idx.iter().enumerate() {
                    src = src * shape[d] + i;
                }
                *w = x[src];
            }
            let mut got = vec![f32::NAN; x.len()];
            permute(&pool, &x, shape, perm, &mut got);
            assert_eq!(got, want, "{shape:?} by {perm:?}");
        }
    }

    /// A convolution's shapes (x, w, out) and attributes, as in [`Conv2dArgs`].
    pub(in super::super) struct Geometry(
        pub [[usize; 4]; 3],
        pub [usize; 2],
        pub [usize; 4],
        pub [usize; 2],
        pub usize,
    );

    impl Geometry {
        /// The shapes of `Conv2d` case `c`: weight `[Cout, Cin / groups, kh, kw]`, each
        /// output length `(i + pads - d (k - 1) - 1) / s + 1`.
        pub(in super::super) fn conv(c: &Case) -> Geometry {
            let &(xs, og, k, stride, pads, dilation, groups, _) = c;
            let len = |a: usize| {
                (xs[2 + a] + pads[a] + pads[a + 2] - dilation[a] * (k[a] - 1) - 1) / stride[a] + 1
            };
            let out = [xs[0], og * groups, len(0), len(1)];
            let ws = [og * groups, xs[1] / groups, k[0], k[1]];
            Geometry([xs, ws, out], stride, pads, dilation, groups)
        }

        /// The shapes of `ConvTranspose2d` case `c`: weight `[Cin, Cout / groups, kh, kw]`,
        /// each output length `(i - 1) s + d (k - 1) + out_pad + 1 - pads`.
        pub(in super::super) fn transposed(c: &Case) -> Geometry {
            let &(xs, cg_out, k, stride, pads, dilation, groups, out_pad) = c;
            let len = |a: usize| {
                (xs[2 + a] - 1) * stride[a] + dilation[a] * (k[a] - 1) + out_pad[a] + 1
                    - pads[a]
                    - pads[a + 2]
            };
            let out = [xs[0], cg_out * groups, len(0), len(1)];
            let ws = [xs[1], cg_out, k[0], k[1]];
            Geometry([xs, ws, out], stride, pads, dilation, groups)
        }

        /// The arguments of the kernels.
        pub(in super::super) fn args(&self) -> Conv2dArgs<'_> {
            let [x_shape, w_shape, out_shape] = &self.0;
            Conv2dArgs {
                x_shape,
                w_shape,
                out_shape,
                stride: self.1,
                pads: self.2,
                dilation: self.3,
                groups: self.4,
            }
        }

        /// x, w and a bias (of `out[1]` values) from [`values`].
        pub(in super::super) fn operands(&self) -> [Vec<f32>; 3] {
            let [xs, ws, out] = &self.0;
            [
                values(xs.iter().product(), 0.1),
                values(ws.iter().product(), 0.7),
                values(out[1], 1.9),
            ]
        }
    }

    /// A fused convolution kernel under test: `(leaky, bias, residual, y)`.
    #[cfg(target_arch = "x86_64")]
    pub(in super::super) type FusedRun<'a> =
        dyn FnMut(Option<f32>, Option<&[f32]>, Option<&[f32]>, &mut [f32]) + 'a;

    /// Checks `run` on the operands `[x, w, b]` of `args` against the reference loops of
    /// `LeakyRelu`, `Conv2d` and `Add`: with the bias and without, and with a residual and a
    /// `LeakyRelu` (slope 0.1) on the input.
    #[cfg(target_arch = "x86_64")]
    pub(in super::super) fn check_fused(
        args: &Conv2dArgs,
        [x, w, b]: &[Vec<f32>; 3],
        what: &str,
        run: &mut FusedRun<'_>,
    ) {
        let n: usize = args.out_shape.iter().product();
        let residual: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.25 - 1.5).collect();
        for (bias, res, leaky) in [
            (Some(&b[..]), None, None),
            (None, None, None),
            (Some(&b[..]), Some(&residual[..]), Some(0.1)),
        ] {
            let xin: Vec<f32> = match leaky {
                Some(s) => x
                    .iter()
                    .map(|&v| super::super::elementwise::leaky_relu(v, s))
                    .collect(),
                None => x.clone(),
            };
            let mut want = crate::backend::cpu::reference::image::conv2d(args, &xin, w, bias);
            if let Some(r) = res {
                want.iter_mut().zip(r).for_each(|(v, r)| *v += r);
            }
            let mut got = vec![f32::NAN; n];
            run(leaky, bias, res, &mut got);
            let what = format!("{what} bias {} residual {}", bias.is_some(), res.is_some());
            assert_close(&want, &got, &what);
        }
    }

    /// Asserts `|want - got| <= 1e-5 max(1, max |want|)` everywhere.
    pub(in super::super) fn assert_close(want: &[f32], got: &[f32], what: &str) {
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let err = want
            .iter()
            .zip(got)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(err <= 1e-5 * scale, "{what}: {err} (scale {scale})");
    }

    /// x `[N, Cin, H, W]`, output channels per group, kernel, stride, pads, dilation,
    /// groups, output padding (of `ConvTranspose2d`; zero for `Conv2d`).
    pub(in super::super) type Case = (
        [usize; 4],
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 4],
        [usize; 2],
        usize,
        [usize; 2],
    );

    #[test]
    fn concat_matches_the_reference_loops() {
        use crate::backend::{Op, Tensor};
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // Channels of large images (rows in parallel), the first and last axes, an empty part.
        let cases: [(&[&[usize]], usize); 4] = [
            (&[&[8, 32, 64, 64], &[8, 16, 64, 64]], 1),
            (&[&[2, 3], &[1, 3], &[4, 3]], 0),
            (&[&[3, 2, 5], &[3, 2, 1], &[3, 2, 0]], 2),
            (&[&[2, 0, 4], &[2, 3, 4]], 1),
        ];
        for (shapes, axis) in cases {
            let parts: Vec<Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| Tensor::from_f32(s, values(s.iter().product(), i as f32)).unwrap())
                .collect();
            let op = Op::Concat { axis };
            let want = crate::backend::cpu::reference::execute(&op, &parts)
                .unwrap()
                .remove(0);
            let read: Vec<Vec<f32>> = parts
                .iter()
                .map(|t| t.read_f32("t").unwrap().to_vec())
                .collect();
            let slices: Vec<(&[f32], &[usize])> = read
                .iter()
                .zip(shapes.iter())
                .map(|(v, s)| (v.as_slice(), *s))
                .collect();
            let mut got = vec![f32::NAN; want.numel()];
            concat(&pool, &slices, axis, &mut got);
            assert_eq!(
                got,
                want.read_f32("want").unwrap().to_vec(),
                "{shapes:?} {axis}"
            );
        }
    }

    #[test]
    fn conv_transpose2d_matches_the_reference_loops() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let cases: [Case; 4] = [
            (
                [1, 4, 1, 7],
                3,
                [1, 16],
                [1, 8],
                [0, 4, 0, 4],
                [1, 1],
                1,
                [0, 0],
            ),
            (
                [2, 6, 3, 5],
                2,
                [3, 2],
                [2, 3],
                [1, 0, 2, 1],
                [2, 1],
                2,
                [1, 2],
            ),
            (
                [1, 3, 1, 17],
                1,
                [1, 3],
                [1, 1],
                [0, 1, 0, 1],
                [1, 2],
                3,
                [0, 0],
            ),
            (
                [1, 1, 1, 1],
                5,
                [1, 4],
                [1, 2],
                [0, 0, 0, 0],
                [1, 1],
                1,
                [0, 1],
            ),
        ];
        for case in &cases {
            let (xs, k, groups) = (case.0, case.2, case.6);
            let geometry = Geometry::transposed(case);
            let (args, [x, w, b]) = (geometry.args(), geometry.operands());
            let want = reference::conv_transpose2d(&args, &x, &w, Some(&b));
            let mut got = vec![f32::NAN; want.len()];
            conv_transpose2d(&pool, &args, &x, &w, Some(&b), &mut got);
            assert_close(&want, &got, &format!("{xs:?} k {k:?} groups {groups}"));
        }
    }
}
