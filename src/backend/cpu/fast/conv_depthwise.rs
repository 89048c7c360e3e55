//! A depthwise `Conv2d` (one input channel per group, `Cin / groups = 1`): each output plane
//! is its own input plane filtered by its own `kh x kw` kernel. Output rows accumulate one
//! tap at a time over the run of columns whose input column is inside the plane (a
//! contiguous run of input values at stride 1), so the padding is never materialized and
//! nothing is dispatched per group.

use super::par::chunks;
use crate::backend::cpu::reference::image::Conv2dArgs;
use rayon::ThreadPool;

/// Whether [`conv2d`] runs this convolution: one input channel per group.
pub(super) fn applies(a: &Conv2dArgs) -> bool {
    a.w_shape[1] == 1 && a.groups == a.x_shape[1] && a.groups > 0
}

/// `Conv2d` (see [`crate::backend::Op::Conv2d`]) where [`applies`] holds, output planes in
/// parallel on `pool`: `y[n, o, i, j] = b[o] + sum_u sum_v w[o, 0, u, v] x[n, o / og, i sh +
/// u dh - pt, j sw + v dw - pl]` (`og = Cout / groups`; positions outside the input read
/// zero and are skipped), taps summed in `(u, v)` order in f32 after the bias.
pub(super) fn conv2d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    y: &mut [f32],
) {
    let (cin, h, wd) = (a.x_shape[1], a.x_shape[2], a.x_shape[3]);
    let (cout, kh, kw) = (a.w_shape[0], a.w_shape[2], a.w_shape[3]);
    let (ho, wo) = (a.out_shape[2], a.out_shape[3]);
    let og = cout / a.groups;
    let plane = ho * wo;
    if plane == 0 {
        return;
    }
    let work = y.len() * kh * kw;
    chunks(
        pool,
        work,
        y,
        plane,
        || (),
        |_, p, out| {
            let (bi, o) = (p / cout, p % cout);
            let input = &x[(bi * cin + o / og) * h * wd..][..h * wd];
            let taps = &w[o * kh * kw..][..kh * kw];
            let bias = b.map_or(0.0, |b| b[o]);
            for (i, row) in out.chunks_exact_mut(wo).enumerate() {
                row.fill(bias);
                for u in 0..kh {
                    let Some(r) = (i * a.stride[0] + u * a.dilation[0]).checked_sub(a.pads[0])
                    else {
                        continue;
                    };
                    if r >= h {
                        continue;
                    }
                    let line = &input[r * wd..][..wd];
                    for v in 0..kw {
                        add_tap(
                            row,
                            line,
                            taps[u * kw + v],
                            v * a.dilation[1],
                            a.pads[1],
                            a.stride[1],
                        );
                    }
                }
            }
        },
    );
}

/// `row[j] += k line[j stride + shift - pad]` for the columns `j` whose input column is
/// inside `line`.
fn add_tap(row: &mut [f32], line: &[f32], k: f32, shift: usize, pad: usize, stride: usize) {
    // Columns from `first` read `j stride + shift >= pad`; up to `end` they read below
    // `line.len() + pad`.
    let first = pad.saturating_sub(shift).div_ceil(stride);
    let end = (line.len() + pad)
        .saturating_sub(shift)
        .div_ceil(stride)
        .min(row.len());
    if first >= end {
        return;
    }
    let start = first * stride + shift - pad;
    if stride == 1 {
        for (y, &v) in row[first..end].iter_mut().zip(&line[start..]) {
            *y += k * v;
        }
    } else {
        for (y, &v) in row[first..end]
            .iter_mut()
            .zip(line[start..].iter().step_by(stride))
        {
            *y += k * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::image::tests::{assert_close, Case, Geometry};
    use super::*;
    use crate::backend::cpu::reference::image as reference;

    /// Depthwise shapes: `(x shape, output channels per group, kernel, stride, pads
    /// [top, left, bottom, right], dilation, groups, output padding)`.
    #[rustfmt::skip]
    const CASES: [Case; 7] = [
        // The duration predictor's separable convolutions (1-D, dilated, same padding).
        ([1, 12, 1, 109], 1, [1, 3], [1, 1], [0, 9, 0, 9], [1, 9], 12, [0, 0]),
        ([1, 6, 1, 40], 1, [1, 3], [1, 1], [0, 3, 0, 3], [1, 3], 6, [0, 0]),
        // 2-D, stride 2, asymmetric pads, batch 2.
        ([2, 5, 9, 12], 1, [3, 3], [2, 2], [1, 0, 2, 1], [1, 1], 5, [0, 0]),
        // Two output channels per group, 2-D dilation.
        ([1, 3, 10, 11], 2, [3, 2], [1, 1], [2, 1, 2, 1], [2, 3], 3, [0, 0]),
        // Padding wider than the input: whole rows and columns read only zeros.
        ([1, 2, 2, 3], 1, [5, 5], [1, 1], [4, 4, 4, 4], [1, 1], 2, [0, 0]),
        // Stride 3 with a kernel longer than the stride, a single output position.
        ([1, 4, 1, 17], 1, [1, 5], [1, 3], [0, 1, 0, 0], [1, 1], 4, [0, 0]),
        ([1, 4, 3, 3], 1, [3, 3], [1, 1], [0, 0, 0, 0], [1, 1], 4, [0, 0]),
    ];

    #[test]
    fn depthwise_conv2d_matches_the_reference_loops() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for case in &CASES {
            let geometry = Geometry::conv(case);
            let (args, [x, w, b]) = (geometry.args(), geometry.operands());
            assert!(applies(&args), "{case:?}");
            for bias in [Some(&b[..]), None] {
                let want = reference::conv2d(&args, &x, &w, bias);
                let mut got = vec![f32::NAN; want.len()];
                conv2d(&pool, &args, &x, &w, bias, &mut got);
                assert_close(&want, &got, &format!("{case:?} bias {}", bias.is_some()));
                let mut dispatched = vec![f32::NAN; want.len()];
                super::super::image::conv2d(&pool, &args, &x, &w, bias, &mut dispatched);
                assert_eq!(got, dispatched, "{case:?}: the dispatcher runs these loops");
            }
        }
    }
}
