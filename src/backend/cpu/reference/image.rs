//! Reference loops of the ops of imported vision and audio graphs: `Conv2d`,
//! `AvgPool2d`, `ResizeNearest` and `BatchMatmul` (their math is on [`Op`]'s
//! variants). Reductions accumulate in f64.
//!
//! [`Op`]: crate::backend::Op

/// The attributes of a `Conv2d` (see [`crate::backend::Op::Conv2d`]).
pub(crate) struct Conv2dArgs<'a> {
    pub x_shape: &'a [usize],
    pub w_shape: &'a [usize],
    pub out_shape: &'a [usize],
    pub stride: [usize; 2],
    pub pads: [usize; 4],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl<'a> Conv2dArgs<'a> {
    /// The attributes of `op` (a `Conv2d` or `ConvTranspose2d`) on inputs
    /// `[x, w, ..]` giving `outputs`; None for other ops.
    pub(crate) fn of(
        op: &crate::backend::Op,
        inputs: &'a [crate::backend::TensorInfo],
        outputs: &'a [crate::backend::TensorInfo],
    ) -> Option<Self> {
        let (stride, pads, dilation, groups) = op.conv_attrs()?;
        Some(Conv2dArgs {
            x_shape: &inputs[0].shape,
            w_shape: &inputs[1].shape,
            out_shape: &outputs[0].shape,
            stride,
            pads,
            dilation,
            groups,
        })
    }
}

/// `Conv2d` of `x` by `w` plus `b`, in plain loops.
pub(in crate::backend::cpu) fn conv2d(
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
) -> Vec<f32> {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cout, cg, kh, kw) = (a.w_shape[0], a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let per_group = cout / a.groups;
    let mut y = vec![0.0f32; n * cout * ho * wo];
    for b_i in 0..n {
        for o in 0..cout {
            let c0 = (o / per_group) * cg;
            for i in 0..ho {
                for j in 0..wo {
                    let mut acc = b.map_or(0.0, |b| b[o] as f64);
                    for c in 0..cg {
                        for u in 0..kh {
                            let r =
                                (i * a.stride[0] + u * a.dilation[0]) as isize - a.pads[0] as isize;
                            if r < 0 || r as usize >= h {
                                continue;
                            }
                            for v in 0..kw {
                                let s = (j * a.stride[1] + v * a.dilation[1]) as isize
                                    - a.pads[1] as isize;
                                if s < 0 || s as usize >= wd {
                                    continue;
                                }
                                let xv =
                                    x[((b_i * cin + c0 + c) * h + r as usize) * wd + s as usize];
                                let wv = w[((o * cg + c) * kh + u) * kw + v];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y[((b_i * cout + o) * ho + i) * wo + j] = acc as f32;
                }
            }
        }
    }
    y
}

/// `AvgPool2d` of `x [B, C, H, W]` into `out_shape`.
pub(in crate::backend::cpu) fn avg_pool2d(
    x: &[f32],
    x_shape: &[usize],
    out_shape: &[usize],
    kernel: [usize; 2],
    stride: [usize; 2],
    pads: [usize; 4],
    count_include_pad: bool,
) -> Vec<f32> {
    let (planes, h, w) = (x_shape[0] * x_shape[1], x_shape[2], x_shape[3]);
    let (ho, wo) = (out_shape[2], out_shape[3]);
    let mut y = vec![0.0f32; planes * ho * wo];
    for p in 0..planes {
        for i in 0..ho {
            for j in 0..wo {
                let (mut acc, mut inside) = (0.0f64, 0usize);
                for u in 0..kernel[0] {
                    let r = (i * stride[0] + u) as isize - pads[0] as isize;
                    for v in 0..kernel[1] {
                        let s = (j * stride[1] + v) as isize - pads[1] as isize;
                        if r >= 0 && (r as usize) < h && s >= 0 && (s as usize) < w {
                            acc += x[(p * h + r as usize) * w + s as usize] as f64;
                            inside += 1;
                        }
                    }
                }
                let count = if count_include_pad {
                    kernel[0] * kernel[1]
                } else {
                    inside.max(1)
                };
                y[(p * ho + i) * wo + j] = (acc / count as f64) as f32;
            }
        }
    }
    y
}

/// `ResizeNearest`: every output index reads input index `index / scale` per axis.
pub(super) fn resize_nearest(x: &[f32], x_shape: &[usize], scales: &[usize]) -> Vec<f32> {
    let out_shape: Vec<usize> = x_shape.iter().zip(scales).map(|(&d, &s)| d * s).collect();
    let n: usize = out_shape.iter().product();
    let mut y = Vec::with_capacity(n);
    let mut idx = vec![0usize; out_shape.len()];
    for _ in 0..n {
        let mut src = 0;
        for (axis, &i) in idx.iter().enumerate() {
            src = src * x_shape[axis] + i / scales[axis];
        }
        y.push(x[src]);
        for axis in (0..idx.len()).rev() {
            idx[axis] += 1;
            if idx[axis] < out_shape[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
    y
}

/// The flat offset of batch entry `flat` of `out_batch` in an operand of batch
/// shape `batch` (broadcast: dims of 1 repeat), in matrices.
pub(crate) fn batch_offset(flat: usize, out_batch: &[usize], batch: &[usize]) -> usize {
    let lead = out_batch.len() - batch.len();
    let (mut rest, mut offset, mut stride) = (flat, 0, 1);
    for axis in (0..out_batch.len()).rev() {
        let i = rest % out_batch[axis];
        rest /= out_batch[axis];
        if axis >= lead {
            let d = batch[axis - lead];
            if d != 1 {
                offset += i * stride;
            }
            stride *= d;
        }
    }
    offset
}

/// The geometry of one `BatchMatmul`: the matrix sizes and, per output batch
/// entry in order, the element offsets of its `a` and `b` matrices.
pub(crate) struct BatchPlan {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub offsets: Vec<(usize, usize)>,
}

/// The [`BatchPlan`] of `a [.., M, K]` times `b [.., K, N]` into `out_shape`.
pub(crate) fn batch_plan(a_shape: &[usize], b_shape: &[usize], out_shape: &[usize]) -> BatchPlan {
    let (ra, rb, ro) = (a_shape.len(), b_shape.len(), out_shape.len());
    let (m, k, n) = (a_shape[ra - 2], a_shape[ra - 1], b_shape[rb - 1]);
    let out_batch = &out_shape[..ro - 2];
    let entries: usize = out_batch.iter().product();
    let offsets = (0..entries)
        .map(|e| {
            (
                batch_offset(e, out_batch, &a_shape[..ra - 2]) * m * k,
                batch_offset(e, out_batch, &b_shape[..rb - 2]) * k * n,
            )
        })
        .collect();
    BatchPlan { m, k, n, offsets }
}

/// `dst [cols, rows]` = the transpose of `src [rows, cols]`.
pub(crate) fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    for (t, row) in src[..rows * cols].chunks(cols.max(1)).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            dst[j * rows + t] = v;
        }
    }
}

/// `BatchMatmul` of `a [.., M, K]` and `b [.., K, N]` into `out_shape [.., M, N]`.
pub(super) fn batch_matmul(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
) -> Vec<f32> {
    let BatchPlan { m, k, n, offsets } = batch_plan(a_shape, b_shape, out_shape);
    let mut y = vec![0.0f32; offsets.len() * m * n];
    for (e, &(ao, bo)) in offsets.iter().enumerate() {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for t in 0..k {
                    acc += a[ao + i * k + t] as f64 * b[bo + t * n + j] as f64;
                }
                y[(e * m + i) * n + j] = acc as f32;
            }
        }
    }
    y
}

/// For each output position along one axis, the `(kernel tap, input position)` pairs
/// of a transposed convolution: output `o` reads input `t` through tap `k` when
/// `o + pad = t stride + k dilation`.
fn transposed_taps(
    out_len: usize,
    in_len: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dil: usize,
) -> Vec<Vec<(usize, usize)>> {
    (0..out_len)
        .map(|o| {
            (0..k)
                .filter_map(|u| {
                    let t = (o + pad).checked_sub(u * dil)?;
                    (t % stride == 0 && t / stride < in_len).then_some((u, t / stride))
                })
                .collect()
        })
        .collect()
}

/// `ConvTranspose2d` of `x` by `w [Cin, Cout/groups, kh, kw]` plus `b`, in plain
/// loops (each output a sum in f64 over the taps that reach it).
pub(in crate::backend::cpu) fn conv_transpose2d(
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
) -> Vec<f32> {
    let (n, cin, h, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cg_out, kh, kw) = (a.w_shape[1], a.w_shape[2], a.w_shape[3]);
    let (cout, ho, wo) = (a.out_shape[1], a.out_shape[2], a.out_shape[3]);
    let cin_g = cin / a.groups;
    let rows = transposed_taps(ho, h, kh, a.stride[0], a.pads[0], a.dilation[0]);
    let cols = transposed_taps(wo, wd, kw, a.stride[1], a.pads[1], a.dilation[1]);
    let mut y = vec![0.0f32; n * cout * ho * wo];
    for b_i in 0..n {
        for o in 0..cout {
            let (g, oo) = (o / cg_out, o % cg_out);
            for (i, row) in rows.iter().enumerate() {
                for (j, col) in cols.iter().enumerate() {
                    let mut acc = b.map_or(0.0, |b| b[o] as f64);
                    for c in g * cin_g..(g + 1) * cin_g {
                        let xb = (b_i * cin + c) * h;
                        let wb = (c * cg_out + oo) * kh;
                        for &(u, r) in row {
                            for &(v, s) in col {
                                acc += x[(xb + r) * wd + s] as f64 * w[(wb + u) * kw + v] as f64;
                            }
                        }
                    }
                    y[((b_i * cout + o) * ho + i) * wo + j] = acc as f32;
                }
            }
        }
    }
    y
}
