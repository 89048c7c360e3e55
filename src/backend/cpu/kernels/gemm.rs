//! Register-blocked, cache-blocked matrix products for float weights (f32 / f16 / bf16) with
//! many activation rows: `Y[m, n] = sum_k X[m, k] * W[n, k]`.
//!
//! The weight plays BLAS's `A` and the activations its `B`: a micro-kernel computes a tile of
//! [`MR`] weight rows by [`NR`] activation rows, broadcasting one weight value per row and
//! multiplying it with [`NR`] packed activation values per step, so every weight value feeds
//! [`NR`] multiply-adds and every activation value [`MR`] (where the path has a
//! [`PairKernel`], AVX-512 on x86-64, two panels are taken at once). The activations are
//! packed once per call into panels of [`NR`] rows (`panel[k][j] = X[p * NR + j][k]`, zero
//! past `m`; `m * k` copies against `m * n * k` multiply-adds). f32 weights are read in place; f16 / bf16 rows
//! are decoded to f32 a chunk at a time (the chunk is reused for every activation row of the
//! task). A chunk holds as many weight rows as fit [`L2_BUDGET`], so it stays in L2 while
//! every panel of the task passes over it. With many activation rows, tasks are blocks of
//! them, each writing its own rows of `Y`; with few, tasks are blocks of weight rows, so that
//! every weight is read from memory once. Tasks run on the current rayon pool.

use crate::dtype::DType;
use half::{bf16, f16};
use rayon::prelude::*;

/// What a matmul applies to its output rows once they are complete (a bias, an activation,
/// a residual and a norm): called with the index of a run's first row and the run (whole
/// rows), each row once.
pub type RowsFn<'a> = dyn Fn(usize, &mut [f32]) + Sync + 'a;

/// Weight rows per micro-tile.
pub(super) const MR: usize = 6;
/// Activation rows per micro-tile (one packed panel).
pub(super) const NR: usize = 16;
/// From this many activation rows on, float matmuls run here (below, the dot-product kernels
/// win: packing costs more than it saves).
pub(super) const MIN_ROWS: usize = 8;
/// Bytes of decoded weight rows one chunk may hold.
const L2_BUDGET: usize = 192 * 1024;
/// Most activation rows one task handles.
const MAX_TASK_ROWS: usize = 64;

/// A micro-kernel: `acc[i * NR + j] = sum_kk a[i * lda + kk] * b[kk * NR + j]` for `i < MR`,
/// `j < NR`, `kk < k`.
pub(super) type MicroKernel =
    fn(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * NR]);

/// A wider micro-kernel over two consecutive packed panels (`b` holds both, the second from
/// `k * NR` on): `acc[i * 2 * NR + j] = sum_kk a[i * lda + kk] * b[kk * NR + j]` for `j < NR`
/// and `... * b[k * NR + kk * NR + j - NR]` for `NR <= j < 2 * NR`.
pub(super) type PairKernel =
    fn(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 2 * NR]);

/// [`PairKernel`] over three consecutive packed panels (`acc[i * 3 * NR + j]`, panel `j / NR`
/// from `(j / NR) * k * NR` on).
pub(super) type TriKernel =
    fn(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 3 * NR]);

/// [`PairKernel`] over four consecutive packed panels (`acc[i * 4 * NR + j]`, panel `j / NR`
/// from `(j / NR) * k * NR` on).
pub(super) type QuadKernel =
    fn(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * 4 * NR]);

/// The micro-kernels of one path: one panel at a time, and optionally two, three or four.
#[derive(Clone, Copy)]
pub(super) struct Micro {
    /// One panel.
    pub one: MicroKernel,
    /// Two panels, where the path has a kernel for them (used wherever two panels remain).
    pub pair: Option<PairKernel>,
    /// Three panels, where the path has a kernel for them (used wherever exactly three panels
    /// remain; the row tasks of [`matmul`] are mostly three or four panels).
    pub tri: Option<TriKernel>,
    /// Four panels, where the path has a kernel for them (used wherever four panels remain).
    pub quad: Option<QuadKernel>,
}

/// The portable micro-kernel (plain Rust; the compiler vectorizes the inner loop).
pub(super) fn micro_portable(a: &[f32], lda: usize, b: &[f32], k: usize, acc: &mut [f32; MR * NR]) {
    assert!(
        a.len() >= (MR - 1) * lda + k && b.len() >= k * NR,
        "gemm: micro-tile bounds"
    );
    let mut c = [[0.0f32; NR]; MR];
    for (kk, bv) in b.chunks_exact(NR).take(k).enumerate() {
        for (i, ci) in c.iter_mut().enumerate() {
            let av = a[i * lda + kk];
            for (cij, &bj) in ci.iter_mut().zip(bv) {
                *cij += av * bj;
            }
        }
    }
    for (dst, ci) in acc.chunks_exact_mut(NR).zip(&c) {
        dst.copy_from_slice(ci);
    }
}

/// The weight matrix `[n, k]` as the tasks read it.
enum Source<'a> {
    /// f32 values in place.
    F32(&'a [f32]),
    /// Encoded rows (f32 bytes that are not 4-aligned, f16 or bf16), decoded per chunk.
    Encoded { dtype: DType, bytes: &'a [u8] },
}

impl Source<'_> {
    /// Weight rows `n0..n1` as f32 with `k` values each, padded with zero rows to a multiple of
    /// [`MR`] rows past the end of the matrix (`n`): a view of the weights where they are f32
    /// and complete, else decoded into `buf`.
    fn rows<'b>(
        &'b self,
        n0: usize,
        n1: usize,
        n: usize,
        k: usize,
        buf: &'b mut Vec<f32>,
    ) -> &'b [f32] {
        let padded = (n1 - n0).div_ceil(MR) * MR;
        if let Source::F32(v) = self {
            if n0 + padded <= n {
                return &v[n0 * k..(n0 + padded) * k];
            }
        }
        buf.clear();
        buf.resize(padded * k, 0.0);
        match self {
            Source::F32(v) => buf[..(n1 - n0) * k].copy_from_slice(&v[n0 * k..n1 * k]),
            Source::Encoded { dtype, bytes } => {
                let width = dtype.block_bytes();
                let src = &bytes[n0 * k * width..n1 * k * width];
                for (o, c) in buf.iter_mut().zip(src.chunks_exact(width)) {
                    *o = match (dtype, c) {
                        (DType::F32, &[a, b, c, d]) => f32::from_le_bytes([a, b, c, d]),
                        (DType::F16, &[a, b]) => f16::from_le_bytes([a, b]).to_f32(),
                        (_, &[a, b]) => bf16::from_le_bytes([a, b]).to_f32(),
                        _ => 0.0,
                    };
                }
            }
        }
        buf
    }
}

/// `Y[m, n] = sum_k X[m, k] * W[n, k]` for a row-major float weight `w` of `dtype`, with the
/// micro-kernels `micro`, then `finish` on the finished rows (a task's rows while they are
/// still in cache). Shapes were checked by the caller (`w` holds `n * k` values of `dtype`,
/// `x` `m * k`, `y` `m * n`).
#[allow(clippy::too_many_arguments)]
pub(super) fn matmul(
    micro: Micro,
    dtype: DType,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
    finish: Option<&RowsFn<'_>>,
    y: &mut [f32],
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        y.fill(0.0);
        finish_rows(finish, n, y);
        return;
    }
    let aligned = match dtype {
        DType::F32 if cfg!(target_endian = "little") => bytemuck::try_cast_slice::<u8, f32>(w).ok(),
        _ => None,
    };
    let src = match aligned {
        Some(v) => Source::F32(v),
        None => Source::Encoded { dtype, bytes: w },
    };
    let threads = rayon::current_num_threads().max(1);
    let chunk = ((L2_BUDGET / (4 * k)) / MR).max(1) * MR;
    if m.div_ceil(NR) >= 4 * threads {
        // Many activation rows: tasks take blocks of them (each passes over all weights).
        let tasks = split_rows(y, x, n, k, task_rows(m, threads));
        // One task per split: an idle thread steals single tasks until the last one.
        tasks
            .into_par_iter()
            .with_max_len(1)
            .for_each(|(first, yt, xt)| {
                // Taken out, not borrowed: `finish` may wait on rayon, which may run
                // another task (one that wants the scratch too) on this thread.
                let (mut packed, mut buf) = SCRATCH.take();
                pack(xt, k, &mut packed, micro.pair.is_some());
                for n0 in (0..n).step_by(chunk) {
                    let cols = n0..(n0 + chunk).min(n);
                    block(micro, &src, n, k, &packed, cols, yt, (n, 0), &mut buf);
                }
                SCRATCH.set((packed, buf));
                if let Some(f) = finish {
                    f(first, yt);
                }
            });
        return;
    }
    // Few activation rows: tasks take blocks of weight rows, so that every weight is read
    // once (the product is bound by reading the weights), each into its own columns.
    let mut packed = Vec::new();
    pack(x, k, &mut packed, micro.pair.is_some());
    let chunk = chunk.min(n.div_ceil(4 * threads).div_ceil(MR) * MR);
    let parts: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let cols = c * chunk..((c + 1) * chunk).min(n);
            let width = cols.len();
            let mut out = vec![0.0f32; m * width];
            let n0 = cols.start;
            block(
                micro,
                &src,
                n,
                k,
                &packed,
                cols,
                &mut out,
                (width, n0),
                &mut Vec::new(),
            );
            (n0, out)
        })
        .collect();
    for (n0, out) in parts {
        let width = out.len() / m;
        for (yr, or) in y.chunks_exact_mut(n).zip(out.chunks_exact(width)) {
            yr[n0..n0 + width].copy_from_slice(or);
        }
    }
    finish_rows(finish, n, y);
}

/// Applies `finish` (if any) to `y`'s rows of `n` values, runs of rows in parallel.
pub(super) fn finish_rows(finish: Option<&RowsFn<'_>>, n: usize, y: &mut [f32]) {
    if let Some(f) = finish {
        y.par_chunks_mut(n * NR)
            .enumerate()
            .for_each(|(i, rows)| f(i * NR, rows));
    }
}

/// `y` (`n` wide) and `x` (`k` wide) cut into consecutive tasks of `rows` rows each:
/// `(first row, the task's y rows, its x rows)`.
pub(super) fn split_rows<'a>(
    y: &'a mut [f32],
    x: &'a [f32],
    n: usize,
    k: usize,
    rows: impl IntoIterator<Item = usize>,
) -> Vec<(usize, &'a mut [f32], &'a [f32])> {
    let mut tasks = Vec::new();
    let (mut y_rest, mut x_rest, mut first) = (y, x, 0);
    for r in rows {
        let (yt, y_next) = y_rest.split_at_mut(r * n);
        let (xt, x_next) = x_rest.split_at(r * k);
        tasks.push((first, yt, xt));
        (y_rest, x_rest, first) = (y_next, x_next, first + r);
    }
    tasks
}

/// Activation rows per task for [`matmul`] with `m` rows on `threads` threads: whole panels
/// of [`NR`] rows (the last task ends at `m`), at most `MAX_TASK_ROWS`, in a multiple of
/// `threads` tasks of near-equal size (sizes differ by at most one panel, the larger ones
/// spread evenly), so that the threads finish together.
fn task_rows(m: usize, threads: usize) -> Vec<usize> {
    let panels = m.div_ceil(NR);
    let max = MAX_TASK_ROWS / NR;
    let tasks = (threads * panels.div_ceil(max * threads)).clamp(1, panels.max(1));
    let (q, r) = (panels / tasks, panels % tasks);
    let mut left = m;
    (0..tasks)
        .map(|i| {
            let big = (i + 1) * r / tasks > i * r / tasks;
            let rows = ((q + usize::from(big)) * NR).min(left);
            left -= rows;
            rows
        })
        .collect()
}

thread_local! {
    /// Scratch of the tasks on this thread (packed activations, decoded weight rows), kept
    /// between calls: fresh buffers of this size would come from (and fault in) new pages.
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Activation rows `x` (`k` values each) into `packed` as panels of [`NR`] rows,
/// `panel[kk][j] = x[j][kk]`, zero past the last row. With `wide` (the AVX-512 path) full
/// panels go through a register transpose; the values are the same either way.
fn pack(x: &[f32], k: usize, packed: &mut Vec<f32>, wide: bool) {
    let rows = x.len() / k;
    packed.resize(rows.div_ceil(NR) * k * NR, 0.0);
    for (p, panel) in packed.chunks_exact_mut(k * NR).enumerate() {
        let xs = &x[p * NR * k..((p + 1) * NR).min(rows) * k];
        #[cfg(target_arch = "x86_64")]
        if wide && xs.len() == NR * k {
            super::gemm_avx512::pack_panel(xs, k, panel);
            continue;
        }
        if xs.len() < NR * k {
            panel.fill(0.0);
        }
        for (j, xr) in xs.chunks_exact(k).enumerate() {
            for (dst, &v) in panel.iter_mut().skip(j).step_by(NR).zip(xr) {
                *dst = v;
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wide;
}

/// The weight rows `cols` (output columns) against every packed panel: `y[r * ld + c - c0]`
/// for activation row `r` and column `c`, where `(ld, c0) = layout`; the rows of `y` past the
/// activation rows are not written.
#[allow(clippy::too_many_arguments)]
fn block(
    micro: Micro,
    src: &Source,
    n: usize,
    k: usize,
    packed: &[f32],
    cols: std::ops::Range<usize>,
    y: &mut [f32],
    layout: (usize, usize),
    buf: &mut Vec<f32>,
) {
    let (ld, c0) = layout;
    let rows = y.len().div_ceil(ld);
    let (n0, n1) = (cols.start, cols.end);
    let a = src.rows(n0, n1, n, k, buf);
    let panels = packed.len() / (k * NR);
    let mut acc = [0.0f32; MR * NR];
    let mut acc2 = [0.0f32; MR * 2 * NR];
    let mut acc3 = [0.0f32; MR * 3 * NR];
    let mut acc4 = [0.0f32; MR * 4 * NR];
    let mut p = 0;
    while p < panels {
        // Four, three or two panels at once where the path has a kernel for them and they
        // remain.
        let quad = micro.quad.filter(|_| p + 4 <= panels);
        let tri = micro.tri.filter(|_| quad.is_none() && p + 3 == panels);
        let pair = micro
            .pair
            .filter(|_| quad.is_none() && tri.is_none() && p + 2 <= panels);
        let width = if quad.is_some() {
            4
        } else if tri.is_some() {
            3
        } else if pair.is_some() {
            2
        } else {
            1
        };
        let b = &packed[p * k * NR..(p + width) * k * NR];
        let valid = rows.saturating_sub(p * NR).min(width * NR);
        for t in (0..n1 - n0).step_by(MR) {
            let (out, stride): (&[f32], usize) = match (quad, tri, pair) {
                (Some(quad), _, _) => {
                    quad(&a[t * k..], k, b, k, &mut acc4);
                    (&acc4, 4 * NR)
                }
                (None, Some(tri), _) => {
                    tri(&a[t * k..], k, b, k, &mut acc3);
                    (&acc3, 3 * NR)
                }
                (None, None, Some(pair)) => {
                    pair(&a[t * k..], k, b, k, &mut acc2);
                    (&acc2, 2 * NR)
                }
                (None, None, None) => {
                    (micro.one)(&a[t * k..], k, b, k, &mut acc);
                    (&acc, NR)
                }
            };
            let tile_rows = (n1 - n0 - t).min(MR);
            for j in 0..valid {
                let start = (p * NR + j) * ld + n0 + t - c0;
                for (i, o) in y[start..start + tile_rows].iter_mut().enumerate() {
                    *o = out[i * stride + j];
                }
            }
        }
        p += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn one(one: MicroKernel) -> Micro {
        Micro {
            one,
            pair: None,
            tri: None,
            quad: None,
        }
    }

    fn micros() -> Vec<(&'static str, Micro)> {
        let mut v: Vec<(&'static str, Micro)> = vec![("portable", one(micro_portable))];
        #[cfg(target_arch = "x86_64")]
        {
            // Every x86-64 machine this project runs on has AVX2; fail rather than skip if not.
            assert!(
                super::super::KernelPath::Avx2.available(),
                "AVX2+FMA not detected"
            );
            v.push(("avx2", one(super::super::gemm_avx2::micro)));
            // The AVX-512 pair and quad kernels where the CPU has them (the dev VM and the
            // H200 host do): pair alone, and both (quad first, pair and one for the rest).
            if super::super::avx512_detected() {
                let one = super::super::gemm_avx2::micro;
                let pair = Some(super::super::gemm_avx512::pair as PairKernel);
                let quad = Some(super::super::gemm_avx512::quad as QuadKernel);
                let tri = Some(super::super::gemm_avx512::tri as TriKernel);
                v.push((
                    "avx512 pair",
                    Micro {
                        one,
                        pair,
                        tri: None,
                        quad: None,
                    },
                ));
                v.push((
                    "avx512 quad",
                    Micro {
                        one,
                        pair,
                        tri: None,
                        quad,
                    },
                ));
                v.push((
                    "avx512 quad, tri",
                    Micro {
                        one,
                        pair,
                        tri,
                        quad,
                    },
                ));
            } else {
                eprintln!("AVX-512F not detected: the pair and quad kernels are not tested here");
            }
        }
        #[cfg(target_arch = "aarch64")]
        v.push(("neon", one(super::super::neon::gemm_micro)));
        v
    }

    fn encode(dtype: DType, w: &[f32]) -> Vec<u8> {
        match dtype {
            DType::F32 => w.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::F16 => w
                .iter()
                .flat_map(|&v| f16::from_f32(v).to_le_bytes())
                .collect(),
            _ => w
                .iter()
                .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
                .collect(),
        }
    }

    /// The value `dtype` stores for `v`.
    fn stored(dtype: DType, v: f32) -> f64 {
        match dtype {
            DType::F32 => v as f64,
            DType::F16 => f16::from_f32(v).to_f32() as f64,
            _ => bf16::from_f32(v).to_f32() as f64,
        }
    }

    /// Every output against an f64 sum over the stored weights, within f32 rounding of the
    /// sum of |terms|.
    fn check(micro: Micro, dtype: DType, m: usize, n: usize, k: usize, misalign: bool) {
        let mut rng = ChaCha8Rng::seed_from_u64((m * 131 + n * 7 + k) as u64);
        let w: Vec<f32> = (0..n * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let mut bytes = vec![0u8; usize::from(misalign)];
        bytes.extend(encode(dtype, &w));
        let wb = &bytes[usize::from(misalign)..];
        let mut y = vec![f32::NAN; m * n];
        matmul(micro, dtype, wb, n, k, &x, m, None, &mut y);
        for r in 0..m {
            for c in 0..n {
                let (mut want, mut mag) = (0.0f64, 0.0f64);
                for kk in 0..k {
                    let t = stored(dtype, w[c * k + kk]) * x[r * k + kk] as f64;
                    want += t;
                    mag += t.abs();
                }
                let got = y[r * n + c] as f64;
                // The worst-case bound of f32 summation (a dropped or doubled term is far larger).
                let tol = mag * (k + 2) as f64 * f32::EPSILON as f64 + 1e-6;
                assert!(
                    (got - want).abs() <= tol,
                    "{dtype} m={m} n={n} k={k} misalign={misalign}: y[{r},{c}] = {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn awkward_shapes_match_the_f64_reference() {
        for (name, micro) in micros() {
            for &(m, n, k) in &[
                (1, 1, 1),
                (3, 5, 7),
                (17, 13, 3),
                (16, 6, 16),
                (33, 255, 17),
                (8, 4097, 3),
                (100, 7, 384),
                (65, 50, 1),
                // Enough activation rows for tasks over them (at most 8 threads here).
                (513, 37, 40),
                (529, 5, 2),
            ] {
                for dtype in [DType::F32, DType::F16, DType::BF16] {
                    eprintln!("{name} {dtype} {m}x{n}x{k}");
                    check(micro, dtype, m, n, k, false);
                }
                check(micro, DType::F32, m, n, k, true);
            }
        }
    }

    #[test]
    fn long_rows_use_several_chunks() {
        // k = 4097 puts fewer than MR rows of 4 * k bytes over the chunk budget boundary.
        for (_, micro) in micros() {
            check(micro, DType::F32, 20, 19, 4097, false);
        }
    }

    #[test]
    fn row_tasks_are_near_equal_whole_panels() {
        for threads in [1, 2, 3, 8] {
            for m in (4 * threads * NR..2000).step_by(7) {
                let tasks = task_rows(m, threads);
                assert_eq!(tasks.iter().sum::<usize>(), m, "m={m} threads={threads}");
                assert_eq!(tasks.len() % threads, 0, "m={m} threads={threads}");
                let (last, whole) = tasks.split_last().expect("at least one task");
                assert!(whole.iter().all(|r| r % NR == 0), "m={m}: {tasks:?}");
                assert!(*last > 0, "m={m}: {tasks:?}");
                let panels: Vec<usize> = tasks.iter().map(|r| r.div_ceil(NR)).collect();
                let (lo, hi) = (panels.iter().min(), panels.iter().max());
                assert!(hi <= Some(&(MAX_TASK_ROWS / NR)), "m={m}: {tasks:?}");
                assert!(
                    hi.zip(lo).is_some_and(|(h, l)| h - l <= 1),
                    "m={m} threads={threads}: {tasks:?}"
                );
            }
        }
    }

    /// The wide kernels sum every output in the same order with the same fused multiply-adds
    /// as the AVX2 one-panel kernel: the results are bitwise equal, on shapes where every
    /// width (four, three, two panels and one) and the row tasks take part.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_kernels_equal_the_one_panel_kernel() {
        if !super::super::avx512_detected() {
            eprintln!("AVX-512F not detected: the wide kernels are not tested here");
            return;
        }
        let narrow = one(super::super::gemm_avx2::micro);
        let (_, wide) = micros()
            .into_iter()
            .find(|(name, _)| *name == "avx512 quad, tri")
            .expect("the AVX-512 kernels");
        for &(m, n, k) in &[(48, 13, 70), (112, 40, 33), (1000, 30, 64), (777, 19, 130)] {
            let mut rng = ChaCha8Rng::seed_from_u64((m * 7 + n * 3 + k) as u64);
            let w: Vec<f32> = (0..n * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let bytes = encode(DType::F32, &w);
            let (mut a, mut b) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
            matmul(narrow, DType::F32, &bytes, n, k, &x, m, None, &mut a);
            matmul(wide, DType::F32, &bytes, n, k, &x, m, None, &mut b);
            let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "m={m} n={n} k={k}");
        }
    }

    #[test]
    fn empty_k_gives_zeros() {
        let mut y = vec![1.0f32; 9 * 4];
        matmul(
            one(micro_portable),
            DType::F32,
            &[],
            4,
            0,
            &[],
            9,
            None,
            &mut y,
        );
        assert!(y.iter().all(|&v| v == 0.0));
    }
}
