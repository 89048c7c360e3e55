//! nox's `Conv2d` and `BatchMatmul` (math on [`crate::backend::Op`]): every
//! output value one fixed-order [`dot`] (8 lanes, then the fixed tree), the
//! threads split output channels or rows only, so no bit depends on the
//! thread count.

use super::dot;
use rayon::prelude::*;

/// The attributes and shapes of one `Conv2d`.
pub(super) struct Conv2d<'a> {
    pub x_shape: &'a [usize],
    pub w_shape: &'a [usize],
    pub out_shape: &'a [usize],
    pub stride: [usize; 2],
    pub pads: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

/// `Conv2d`: per batch entry and group, the windows `[Cin/groups * kh * kw]`
/// of every output position are gathered (zeros outside `x`), then
/// `y = dot(window, w[o]) + b[o]`.
pub(super) fn conv2d(
    pool: &rayon::ThreadPool,
    a: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cout, cg, kh, kw) = (a.w_shape[0], a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let per_group = cout / a.groups.max(1);
    let k = cg * kh * kw;
    let mut y = vec![0.0f32; n * cout * ho * wo];
    let mut cols = vec![0.0f32; ho * wo * k];
    for b in 0..n {
        for g in 0..a.groups.max(1) {
            cols.fill(0.0);
            for (p, col) in cols.chunks_mut(k).enumerate() {
                let (i, j) = (p / wo, p % wo);
                for c in 0..cg {
                    let plane = &x[((b * cin + g * cg + c) * h) * wd..][..h * wd];
                    for u in 0..kh {
                        let r = (i * a.stride[0] + u * a.dilation[0]) as isize - a.pads[0] as isize;
                        if r < 0 || r as usize >= h {
                            continue;
                        }
                        for v in 0..kw {
                            let s =
                                (j * a.stride[1] + v * a.dilation[1]) as isize - a.pads[1] as isize;
                            if s >= 0 && (s as usize) < wd {
                                col[(c * kh + u) * kw + v] = plane[r as usize * wd + s as usize];
                            }
                        }
                    }
                }
            }
            let out = &mut y[(b * cout + g * per_group) * ho * wo..][..per_group * ho * wo];
            pool.install(|| {
                out.par_chunks_mut(ho * wo)
                    .enumerate()
                    .for_each(|(oi, plane)| {
                        let o = g * per_group + oi;
                        let wr = &w[o * k..(o + 1) * k];
                        let bo = bias.map_or(0.0, |b| b[o]);
                        for (v, col) in plane.iter_mut().zip(cols.chunks(k)) {
                            *v = dot(col, wr) + bo;
                        }
                    })
            });
        }
    }
    y
}

/// `BatchMatmul` of `a [.., M, K]` and `b [.., K, N]` into `out_shape`:
/// each batch entry's `b` is transposed, then `y[i, j] = dot(a[i], b^T[j])`.
pub(super) fn batch_matmul(
    pool: &rayon::ThreadPool,
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
) -> Vec<f32> {
    use crate::backend::cpu::reference::image::{batch_plan, transpose, BatchPlan};
    let BatchPlan { m, k, n, offsets } = batch_plan(a_shape, b_shape, out_shape);
    let mut y = vec![0.0f32; offsets.len() * m * n];
    let mut bt = vec![0.0f32; n * k];
    for (e, &(ao, bo)) in offsets.iter().enumerate() {
        transpose(&b[bo..], k, n, &mut bt);
        let out = &mut y[e * m * n..(e + 1) * m * n];
        pool.install(|| {
            out.par_chunks_mut(n.max(1))
                .enumerate()
                .for_each(|(i, row)| {
                    let ar = &a[ao + i * k..ao + (i + 1) * k];
                    for (v, br) in row.iter_mut().zip(bt.chunks(k.max(1))) {
                        *v = dot(ar, br);
                    }
                })
        });
    }
    y
}
