//! One-row convolutions of few output positions and many output channels (a VITS voice's
//! text encoder and flows: 19 to a few hundred positions, 192 to 768 channels) as a GEMM
//! over the kernel packed once into panels of 64 output channels ([`super::packed`]):
//! `y^T [Wo, Cout] = patches [Wo, Cin kw] w^T`, its vectors along the output channels, so a
//! row of 19 positions wastes no lanes (the direct kernel's vectors run along positions:
//! 19 of them fill 2 vectors of 16). The patches are never written: the input is copied
//! once into zero-padded rows (through the fused `LeakyRelu`), and the micro-kernel reads
//! patch value `(p, c kw + t)` there at `p stride + c Wp + t dilation` from a table of the
//! `(c, t)` offsets. Each task's tile of positions by 64 channels is then transposed into
//! the output rows with the bias and the residual added.

use super::par::PAR_MIN_WORK;
use crate::backend::cpu::kernels::{
    self, packed_tile, PackedF32, TileSteps, PACKED_PANEL as NW, PACKED_TILE_ROWS as MR,
};
use crate::backend::cpu::reference::image::Conv2dArgs;
use crate::backend::Tensor;
use rayon::prelude::*;
use rayon::ThreadPool;
use std::sync::Arc;

/// Output positions up to which the GEMM runs a one-row convolution (above, the direct
/// kernel's row tiles fill their vectors and read the input in place).
const MAX_POSITIONS: usize = 128;
/// Parallel tasks per pool thread at least, where the positions allow.
const TASKS_PER_THREAD: usize = 2;

/// Whether [`conv1d`] runs this convolution: AVX-512F, one row in and out, one group, at
/// least one full panel of output channels, and at most [`MAX_POSITIONS`] outputs.
pub(super) fn applies(a: &Conv2dArgs) -> bool {
    kernels::avx512_detected()
        && a.x_shape[2] == 1
        && a.w_shape[2] == 1
        && a.out_shape[2] == 1
        && a.groups == 1
        && a.w_shape[0] >= NW
        && a.out_shape[3] <= MAX_POSITIONS
}

/// The kernel packed for [`conv1d`] where it runs this convolution ([`applies`], and the
/// kernel `w` is f32 host bytes the packings' budget still takes).
pub(super) fn packed_kernel(a: &Conv2dArgs, w: &Tensor) -> Option<Arc<PackedF32>> {
    if !applies(a) {
        return None;
    }
    super::packed::packed_rows(w, a.w_shape[0], a.w_shape[1] * a.w_shape[3])
}

/// `y[b][o][p] = bias[o] + sum_c sum_t w[o][c][t] act(x[b][c][p stride + t dilation - pad])`
/// (`act`: the `LeakyRelu` of slope `leaky` where given, zero outside the row), plus
/// `residual[b][o][p]`, then `second[b][o][p]`, each where given (a second only with a
/// residual), for a convolution [`applies`] takes, with `w` its kernel
/// `[Cout, Cin, 1, kw]` packed as `[Cout, Cin kw]`. Each output sums its products in
/// `(c, t)` order with fused multiply-adds.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d(
    pool: &ThreadPool,
    a: &Conv2dArgs,
    x: &[f32],
    w: &PackedF32,
    leaky: Option<f32>,
    b: Option<&[f32]>,
    [residual, second]: [Option<&[f32]>; 2],
    y: &mut [f32],
) {
    let (n, cin, wd) = (a.x_shape[0], a.x_shape[1], a.x_shape[3]);
    let (cout, kw, wo) = (a.w_shape[0], a.w_shape[3], a.out_shape[3]);
    let (left, stride, dil) = (a.pads[1], a.stride[1], a.dilation[1]);
    let k = cin * kw;
    assert!(
        w.n() == cout
            && w.k() == k
            && x.len() == n * cin * wd
            && y.len() == n * cout * wo
            && residual.is_none_or(|r| r.len() == y.len())
            && second.is_none_or(|s| s.len() == y.len() && residual.is_some())
            && b.is_none_or(|b| b.len() == cout),
        "conv_narrow: shapes"
    );
    if y.is_empty() {
        return;
    }
    // Row width holding every position read: (Wo - 1) stride + (kw - 1) dilation + 1.
    let wp = (wo - 1) * stride + (kw - 1) * dil + 1;
    let offsets: Vec<usize> = (0..k).map(|kk| kk / kw * wp + kk % kw * dil).collect();
    let panels = cout.div_ceil(NW);
    let threads = pool.current_num_threads().max(1);
    let tiles = wo.div_ceil(MR);
    let chunks = (TASKS_PER_THREAD * threads)
        .div_ceil(panels)
        .clamp(1, tiles);
    let chunk = tiles.div_ceil(chunks) * MR;
    let chunks = wo.div_ceil(chunk);
    let mut padded = vec![0.0f32; cin * wp];
    for bi in 0..n {
        let planes = &x[bi * cin * wd..][..cin * wd];
        let fill = |(c, row): (usize, &mut [f32])| {
            // Padded position s holds input column s - left where that is inside the row.
            let src = &planes[c * wd..][..wd];
            let from = left.min(wp);
            let to = (wd + left).clamp(from, wp);
            row[..from].fill(0.0);
            for (d, &v) in row[from..to]
                .iter_mut()
                .zip(&src[from.saturating_sub(left)..])
            {
                *d = leaky.map_or(v, |s| super::elementwise::leaky_relu(v, s));
            }
            row[to..].fill(0.0);
        };
        if cin * wp >= PAR_MIN_WORK {
            pool.install(|| padded.par_chunks_mut(wp).enumerate().for_each(fill));
        } else {
            padded.chunks_mut(wp).enumerate().for_each(fill);
        }
        let out = OutRows(y[bi * cout * wo..][..cout * wo].as_mut_ptr());
        let res = residual.map(|r| &r[bi * cout * wo..][..cout * wo]);
        let res2 = second.map(|r| &r[bi * cout * wo..][..cout * wo]);
        let task = |t: usize| {
            let (p, ci) = (t / chunks, t % chunks);
            let cols = (cout - p * NW).min(NW);
            let mut sums = [0.0f32; MR * NW];
            let end = ((ci + 1) * chunk).min(wo);
            for p0 in (ci * chunk..end).step_by(MR) {
                let rows = (end - p0).min(MR);
                packed_tile(
                    rows,
                    &padded[p0 * stride..],
                    stride,
                    TileSteps::Offsets(&offsets),
                    w.panel(p),
                    k,
                    &mut sums,
                    NW,
                    cols,
                    true,
                );
                for j in 0..cols {
                    let o = p * NW + j;
                    let bias = b.map_or(0.0, |b| b[o]);
                    let at = o * wo + p0;
                    // SAFETY: `at..at + rows` is channel `o`'s positions `p0..p0 + rows` of
                    // this batch entry, inside the output; each (panel, chunk) task writes
                    // only its own.
                    let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(at), rows) };
                    let sums = sums[j..].iter().step_by(NW);
                    for (d, &s) in dst.iter_mut().zip(sums) {
                        *d = s + bias;
                    }
                    for addend in [res, res2].into_iter().flatten() {
                        for (d, &r) in dst.iter_mut().zip(&addend[at..at + rows]) {
                            *d += r;
                        }
                    }
                }
            }
        };
        pool.install(|| (0..panels * chunks).into_par_iter().for_each(task));
    }
}

/// The output of one batch entry, written by the tasks of [`conv1d`] at disjoint indices.
#[derive(Clone, Copy)]
struct OutRows(*mut f32);
// SAFETY: the tasks write disjoint elements (see `conv1d`); the buffer outlives them.
unsafe impl Send for OutRows {}
unsafe impl Sync for OutRows {}

impl OutRows {
    fn get(self) -> *mut f32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::image::tests::{check_fused, Case, Geometry};
    use super::*;
    use crate::backend::SharedBytes;

    /// Text-encoder, flow and pointwise shapes; strides, dilations and uneven pads; a
    /// partial panel (100 channels); two batch entries; a single position.
    #[rustfmt::skip]
    const CASES: [Case; 8] = [
        ([1, 192, 1, 21], 768, [1, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ([1, 96, 1, 19], 64, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ([2, 40, 1, 58], 128, [1, 5], [1, 1], [0, 2, 0, 2], [1, 1], 1, [0, 0]),
        ([1, 33, 1, 50], 100, [1, 3], [1, 1], [0, 4, 0, 1], [1, 3], 1, [0, 0]),
        ([1, 17, 1, 61], 64, [1, 4], [1, 2], [0, 1, 0, 2], [1, 2], 1, [0, 0]),
        ([1, 8, 1, 1], 64, [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 1, [0, 0]),
        ([1, 16, 1, 128], 64, [1, 7], [1, 1], [0, 9, 0, 9], [1, 3], 1, [0, 0]),
        ([1, 24, 1, 30], 70, [1, 2], [1, 1], [0, 0, 0, 0], [1, 5], 1, [0, 0]),
    ];

    #[test]
    fn narrow_conv1d_matches_the_reference_loops() {
        if !kernels::avx512_detected() {
            for case in &CASES {
                assert!(!applies(&Geometry::conv(case).args()), "{case:?}");
            }
            return;
        }
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for case in &CASES {
                let geometry = Geometry::conv(case);
                let (args, operands) = (geometry.args(), geometry.operands());
                assert!(applies(&args), "{case:?}");
                let bytes: Vec<u8> = operands[1].iter().flat_map(|v| v.to_le_bytes()).collect();
                let kernel = Tensor::from_bytes(
                    args.w_shape,
                    crate::DType::F32,
                    SharedBytes::from_vec(bytes),
                    None,
                )
                .unwrap();
                let packed = packed_kernel(&args, &kernel).expect("an f32 kernel packs");
                let what = format!("{case:?} threads {threads}");
                // A second addend goes in after the residual: bitwise the sum of the two.
                let n: usize = args.out_shape.iter().product();
                let (r, s): (Vec<f32>, Vec<f32>) = (0..n)
                    .map(|i| (i as f32 * 0.01, 1.0 - i as f32 * 0.02))
                    .unzip();
                let run = |addends, y: &mut [f32]| {
                    conv1d(&pool, &args, &operands[0], &packed, None, None, addends, y)
                };
                let mut once = vec![f32::NAN; n];
                run([Some(&r[..]), None], &mut once);
                once.iter_mut().zip(&s).for_each(|(v, s)| *v += s);
                let mut both = vec![f32::NAN; n];
                run([Some(&r[..]), Some(&s[..])], &mut both);
                assert_eq!(once, both, "{what}: second addend");
                check_fused(&args, &operands, &what, &mut |leaky, bias, res, y| {
                    conv1d(
                        &pool,
                        &args,
                        &operands[0],
                        &packed,
                        leaky,
                        bias,
                        [res, None],
                        y,
                    )
                });
            }
        }
    }

    #[test]
    fn narrow_applies_only_to_short_single_rows() {
        #[rustfmt::skip]
        let others: [Case; 4] = [
            ([1, 16, 2, 32], 64, [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 1, [0, 0]),
            ([1, 16, 1, 32], 63, [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 1, [0, 0]),
            ([1, 16, 1, 32], 64, [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 2, [0, 0]),
            ([1, 16, 1, 129], 64, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, [0, 0]),
        ];
        for case in &others {
            assert!(!applies(&Geometry::conv(case).args()), "{case:?}");
        }
    }
}
