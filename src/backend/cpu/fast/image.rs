//! Fast cpu versions of the ops of imported graphs: `Conv2d` as im2col and
//! the f32 gemm kernel, `BatchMatmul` on the same kernel, and broadcast
//! element-wise ops by rows (no per-value index arithmetic).

use super::par::chunks;
use crate::backend::cpu::kernels;
use crate::backend::cpu::reference::image::{batch_offset, Conv2dArgs};
use crate::backend::Op;
use crate::dtype::DType;
use rayon::prelude::*;
use rayon::ThreadPool;

/// `y [Cout_g, n] = w [Cout_g, k] patches^T` with `patches [n, k]`, on the gemm kernel.
fn gemm_rows(pool: &ThreadPool, w: &[f32], k: usize, patches: &[f32], n: usize, y: &mut [f32]) {
    let m = w.len().checked_div(k).unwrap_or(0);
    if m == 0 || n == 0 {
        return;
    }
    let bytes: &[u8] = bytemuck::cast_slice(patches);
    let path = kernels::active_path();
    pool.install(|| kernels::matmul_with(path, DType::F32, bytes, n, k, w, m, None, y));
}

/// `Conv2d` (see [`Op::Conv2d`]): per batch entry and group, the patches of
/// the input window rows (`[Ho Wo, Cg kh kw]`) times the kernel rows.
pub(super) fn conv2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cout, cg, kh, kw) = (a.w_shape[0], a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let (k, spatial) = (cg * kh * kw, ho * wo);
    let og = cout / a.groups;
    let mut patches = vec![0.0f32; spatial * k];
    for bi in 0..n {
        for g in 0..a.groups {
            let plane = |c: usize| &x[((bi * cin) + g * cg + c) * h * wd..][..h * wd];
            pool.install(|| {
                patches
                    .par_chunks_mut(k * wo)
                    .enumerate()
                    .for_each(|(i, rows)| {
                        for (j, p) in rows.chunks_mut(k).enumerate() {
                            let mut at = 0;
                            for c in 0..cg {
                                let src = plane(c);
                                for u in 0..kh {
                                    let r = (i * a.stride[0] + u * a.dilation[0]) as isize
                                        - a.pads[0] as isize;
                                    for v in 0..kw {
                                        let s = (j * a.stride[1] + v * a.dilation[1]) as isize
                                            - a.pads[1] as isize;
                                        p[at] = if r >= 0
                                            && (r as usize) < h
                                            && s >= 0
                                            && (s as usize) < wd
                                        {
                                            src[r as usize * wd + s as usize]
                                        } else {
                                            0.0
                                        };
                                        at += 1;
                                    }
                                }
                            }
                        }
                    })
            });
            let out = &mut y[(bi * cout + g * og) * spatial..][..og * spatial];
            gemm_rows(pool, &w[g * og * k..][..og * k], k, &patches, spatial, out);
            if let Some(b) = b {
                for (o, row) in out.chunks_mut(spatial.max(1)).enumerate() {
                    let bias = b[g * og + o];
                    row.iter_mut().for_each(|v| *v += bias);
                }
            }
        }
    }
}

/// `BatchMatmul` (see [`Op::BatchMatmul`]): per batch entry, `b` transposed
/// once, then the gemm kernel.
pub(super) fn batch_matmul(
    pool: &ThreadPool,
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out_shape: &[usize],
    y: &mut [f32],
) {
    let (ra, rb, ro) = (a.1.len(), b.1.len(), out_shape.len());
    let (m, k, n) = (a.1[ra - 2], a.1[ra - 1], b.1[rb - 1]);
    let out_batch = &out_shape[..ro - 2];
    let mut bt = vec![0.0f32; k * n];
    for (e, out) in y.chunks_mut((m * n).max(1)).enumerate() {
        let ao = batch_offset(e, out_batch, &a.1[..ra - 2]) * m * k;
        let bo = batch_offset(e, out_batch, &b.1[..rb - 2]) * k * n;
        let bm = &b.0[bo..bo + k * n];
        for (t, row) in bm.chunks(n.max(1)).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                bt[j * k + t] = v;
            }
        }
        if k == 0 {
            out.fill(0.0);
            continue;
        }
        gemm_rows(pool, &a.0[ao..ao + m * k], k, &bt, n, out);
    }
}

/// `a op b` with NumPy broadcasting into `out_shape`: each output row (the
/// last axis) reads its `a` and `b` rows at offsets worked out once per row.
pub(super) fn broadcast_binary(
    pool: &ThreadPool,
    op: &Op,
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out_shape: &[usize],
    y: &mut [f32],
) {
    let f: fn(f32, f32) -> f32 = match op {
        Op::Add => |x, y| x + y,
        Op::Sub => |x, y| x - y,
        Op::Mul => |x, y| x * y,
        _ => |x, y| x / y,
    };
    let rank = out_shape.len();
    let last = out_shape.last().copied().unwrap_or(1).max(1);
    // Element strides of an operand in output axes (0 where it broadcasts).
    let strides = |shape: &[usize]| -> Vec<usize> {
        let mut st = vec![0; rank];
        let mut s = 1;
        for i in (0..shape.len()).rev() {
            let axis = rank - shape.len() + i;
            if shape[i] != 1 {
                st[axis] = s;
            }
            s *= shape[i];
        }
        st
    };
    let (sa, sb) = (strides(a.1), strides(b.1));
    let (step_a, step_b) = (
        sa.last().copied().unwrap_or(0),
        sb.last().copied().unwrap_or(0),
    );
    chunks(
        pool,
        y.len(),
        y,
        last,
        || (),
        |_, row, out| {
            let (mut oa, mut ob, mut rest) = (0, 0, row);
            for axis in (0..rank.saturating_sub(1)).rev() {
                let i = rest % out_shape[axis];
                rest /= out_shape[axis];
                oa += i * sa[axis];
                ob += i * sb[axis];
            }
            for (j, o) in out.iter_mut().enumerate() {
                *o = f(a.0[oa + j * step_a], b.0[ob + j * step_b]);
            }
        },
    );
}
