//! The float GEMM over f32 weights packed once (at first use, see `fast::packed`) into the
//! micro-kernel's panel layout, with AVX-512F: `Y[m, n] = sum_k X[m, k] * W[n, k]`.
//!
//! A panel holds [`NW`] output columns: for every `kk < k`, the `NW` weights `W[c][kk]` of
//! its columns, contiguous (zero past `n`). The micro-kernel keeps a tile of up to [`MR`]
//! activation rows by `NW` columns in 4 x 6 sixteen-lane accumulators: per step it loads the
//! four vectors of the panel's next weight row and broadcasts one value of each activation row
//! (read in place, row-major: no packing of the activations), and its results are whole
//! runs of output rows (vector stores, no scatter).
//!
//! Blocking follows the cache sizes the machine reports ([`super::machine::cache_sizes`]):
//! `k` is cut into blocks of at most `kc` values such that one panel's block (`kc x NW`
//! weights) takes at most an eighth of L2 and the tile's activations (`MR x kc`) at most half
//! of L1d; tasks take blocks of activation rows whose `kc` values fit a quarter of L2, so that
//! they stay in L2 while every panel passes over them. Task sizes are near-equal whole tiles
//! in a multiple of the thread count (at least two tasks per thread, so that a thread slowed
//! by other load hands work to the other). Each output sums its products in `k` order with
//! fused multiply-adds, as the other float GEMM kernels do (a block continues from the
//! partial sums the previous one stored), so the results are bitwise the same as theirs.

use super::gemm::{split_rows, RowsFn};
use super::machine::cache_sizes;
use rayon::prelude::*;

/// Output columns per packed panel (four 16-lane vectors).
pub const NW: usize = 64;
/// Activation rows per micro-tile.
pub(crate) const MR: usize = 6;
/// Most activation rows one task handles.
const MAX_TASK_ROWS: usize = 240;

/// An f32 weight matrix `[n, k]` packed into panels of `NW` output columns.
pub struct PackedF32 {
    n: usize,
    k: usize,
    /// Panel `p`, row `kk`, column `j` at `(p * k + kk) * NW + j`.
    data: Vec<f32>,
}

impl PackedF32 {
    /// Packs the row-major weights `w` (`n` rows of `k` little-endian f32 values, any
    /// alignment).
    ///
    /// # Panics
    /// If `w` does not hold `n * k` values.
    pub fn new(w: &[u8], n: usize, k: usize) -> PackedF32 {
        assert_eq!(w.len(), n * k * 4, "gemm: f32 weight bytes for [{n}, {k}]");
        let mut data = vec![0.0f32; Self::bytes_for(n, k) / 4];
        if k > 0 {
            data.par_chunks_mut(k * NW)
                .enumerate()
                .for_each(|(p, panel)| {
                    let cols = (n - p * NW).min(NW);
                    for j in 0..cols {
                        let row = &w[(p * NW + j) * k * 4..(p * NW + j + 1) * k * 4];
                        for (dst, v) in panel
                            .iter_mut()
                            .skip(j)
                            .step_by(NW)
                            .zip(row.chunks_exact(4))
                        {
                            *dst = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                        }
                    }
                });
        }
        PackedF32 { n, k, data }
    }

    /// Output columns (weight rows).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Values per weight row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Panel `p`: for each `kk < k`, the 64 (`NW`) weights `W[p NW + j][kk]` (zero past `n`).
    ///
    /// # Panics
    /// If `p` is not below `n.div_ceil(NW)`.
    pub fn panel(&self, p: usize) -> &[f32] {
        &self.data[p * self.k * NW..(p + 1) * self.k * NW]
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }

    /// Bytes the packing of an `[n, k]` weight holds.
    pub fn bytes_for(n: usize, k: usize) -> usize {
        n.div_ceil(NW) * NW * k * 4
    }
}

/// Block sizes of one product.
#[derive(Debug, Clone, Copy)]
pub(super) struct Blocking {
    /// Most values of `k` per block.
    pub kc: usize,
    /// Most activation rows per task (a multiple of [`MR`]).
    pub mc: usize,
}

impl Blocking {
    /// The blocking for rows of `k` values on this machine (see the module doc).
    pub fn for_k(k: usize) -> Blocking {
        let c = cache_sizes();
        let kc_max = (c.l2 / 8 / (NW * 4)).min(c.l1d / 2 / (MR * 4)).max(16);
        let kc = k.div_ceil(k.div_ceil(kc_max).max(1)).max(1);
        let mc = (c.l2 / 4 / (kc * 4)).clamp(MR, MAX_TASK_ROWS) / MR * MR;
        Blocking { kc, mc }
    }
}

/// `Y[m, n] = X W^T` for packed weights `w` and activations `x` (`m` rows of `w.k()`), then
/// `finish` on each task's rows; tasks run on the current rayon pool.
///
/// # Panics
/// If the slice lengths do not match the shapes, or the CPU lacks AVX-512F.
pub(super) fn matmul(
    w: &PackedF32,
    x: &[f32],
    m: usize,
    finish: Option<&RowsFn<'_>>,
    y: &mut [f32],
) {
    matmul_blocked(w, x, m, finish, y, Blocking::for_k(w.k));
}

/// [`matmul`] with explicit blocking (tests choose blocks smaller than the machine's).
pub(super) fn matmul_blocked(
    w: &PackedF32,
    x: &[f32],
    m: usize,
    finish: Option<&RowsFn<'_>>,
    y: &mut [f32],
    blocking: Blocking,
) {
    let (n, k) = (w.n, w.k);
    assert!(
        x.len() == m * k && y.len() == m * n,
        "gemm: packed product shapes"
    );
    assert!(
        super::avx512_detected(),
        "gemm: AVX-512F is not available on this CPU"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        y.fill(0.0);
        super::gemm::finish_rows(finish, n, y);
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    let tasks = split_rows(y, x, n, k, task_rows(m, threads, blocking.mc));
    // One task per split: an idle thread steals single tasks until the last one.
    tasks
        .into_par_iter()
        .with_max_len(1)
        .for_each(|(first, yt, xt)| {
            task(w, xt, yt, blocking.kc);
            if let Some(f) = finish {
                f(first, yt);
            }
        });
}

/// Activation rows per task for `m` rows on `threads` threads with at most `mc` per task:
/// whole tiles of [`MR`] rows (the last task ends at `m`), in a multiple of `threads` tasks,
/// at least two per thread where there are tiles enough, of near-equal size (sizes differ by
/// at most one tile, the larger ones spread evenly).
fn task_rows(m: usize, threads: usize, mc: usize) -> Vec<usize> {
    let tiles = m.div_ceil(MR);
    let per = (mc / MR).max(1);
    // A multiple of the threads where there is a tile per thread, else a task per tile.
    let cap = if tiles >= threads {
        tiles / threads * threads
    } else {
        tiles.max(1)
    };
    let tasks = (threads * tiles.div_ceil(per * threads).max(2)).clamp(1, cap);
    let (q, r) = (tiles / tasks, tiles % tasks);
    let mut left = m;
    (0..tasks)
        .map(|i| {
            let big = (i + 1) * r / tasks > i * r / tasks;
            let rows = ((q + usize::from(big)) * MR).min(left);
            left -= rows;
            rows
        })
        .collect()
}

/// Every panel against the activation rows `x` of one task, into its output rows `y`:
/// for each block of `k`, each panel, each tile of rows.
fn task(w: &PackedF32, x: &[f32], y: &mut [f32], kc: usize) {
    let (n, k) = (w.n, w.k);
    let rows = x.len() / k;
    for k0 in (0..k).step_by(kc) {
        let kb = kc.min(k - k0);
        for (p, panel) in w.data.chunks_exact(k * NW).enumerate() {
            let cols = (n - p * NW).min(NW);
            let wb = &panel[k0 * NW..(k0 + kb) * NW];
            for r in (0..rows).step_by(MR) {
                let tile = (rows - r).min(MR);
                let xs = &x[r * k + k0..(r + tile - 1) * k + k0 + kb];
                let ys = &mut y[r * n + p * NW..(r + tile - 1) * n + p * NW + cols];
                avx512::tile(
                    tile,
                    xs,
                    k,
                    avx512::Steps::Contiguous,
                    wb,
                    kb,
                    ys,
                    n,
                    cols,
                    k0 == 0,
                );
            }
        }
    }
}

pub(crate) mod avx512 {
    use super::{MR, NW};
    use std::arch::x86_64::*;

    /// Where the activation values of a tile are: row `i`, step `kk` at `x[i * ldx + kk]`
    /// (rows of a matrix) or at `x[i * ldx + offsets[kk]]` (gathered, e.g. the taps of a
    /// convolution).
    #[derive(Clone, Copy)]
    pub(crate) enum Steps<'a> {
        /// `kk` itself.
        Contiguous,
        /// `offsets[kk]`.
        Offsets(&'a [usize]),
    }

    /// `y[i * ldy + j] (+)= sum_kk x[i * ldx + at(kk)] * w[kk * NW + j]` for `i < rows`,
    /// `j < cols`, `kk < kb` (`at` from `steps`): starting from zero where `first`, else
    /// from the values in `y`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tile(
        rows: usize,
        x: &[f32],
        ldx: usize,
        steps: Steps<'_>,
        w: &[f32],
        kb: usize,
        y: &mut [f32],
        ldy: usize,
        cols: usize,
        first: bool,
    ) {
        let reach = match steps {
            Steps::Contiguous => kb,
            Steps::Offsets(o) => {
                assert!(o.len() >= kb, "gemm: packed tile offsets");
                o[..kb].iter().max().map_or(0, |&m| m + 1)
            }
        };
        assert!(
            (1..=MR).contains(&rows)
                && (1..=NW).contains(&cols)
                && (kb == 0 || x.len() >= (rows - 1) * ldx + reach)
                && w.len() >= kb * NW
                && y.len() >= (rows - 1) * ldy + cols,
            "gemm: packed tile bounds"
        );
        assert!(
            super::super::avx512_detected(),
            "gemm: AVX-512F is not available on this CPU"
        );
        let masks: [u16; 4] = std::array::from_fn(|v| {
            let lanes = cols.saturating_sub(16 * v).min(16);
            ((1u32 << lanes) - 1) as u16
        });
        let (xp, wp, yp) = (x.as_ptr(), w.as_ptr(), y.as_mut_ptr());
        let offsets = match steps {
            Steps::Contiguous => None,
            Steps::Offsets(o) => Some(o.as_ptr()),
        };
        macro_rules! run {
            ($r:literal) => {
                match offsets {
                    None => tile_imp::<$r, false>(
                        xp,
                        ldx,
                        std::ptr::null(),
                        wp,
                        kb,
                        yp,
                        ldy,
                        masks,
                        first,
                    ),
                    Some(o) => tile_imp::<$r, true>(xp, ldx, o, wp, kb, yp, ldy, masks, first),
                }
            };
        }
        // SAFETY: the bounds were checked above (the largest activation index read is
        // `(rows - 1) ldx + reach - 1`; the masks keep every access to `y` within its `cols`
        // columns) and the CPU feature was detected.
        unsafe {
            match rows {
                6 => run!(6),
                5 => run!(5),
                4 => run!(4),
                3 => run!(3),
                2 => run!(2),
                _ => run!(1),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile_imp<const R: usize, const GATHERED: bool>(
        x: *const f32,
        ldx: usize,
        offsets: *const usize,
        w: *const f32,
        kb: usize,
        y: *mut f32,
        ldy: usize,
        masks: [u16; 4],
        first: bool,
    ) {
        let rows: [*const f32; R] = std::array::from_fn(|i| x.add(i * ldx));
        let mut c = [[_mm512_setzero_ps(); 4]; R];
        if !first {
            for (i, ci) in c.iter_mut().enumerate() {
                for (v, cv) in ci.iter_mut().enumerate() {
                    *cv = _mm512_maskz_loadu_ps(masks[v], y.add(i * ldy + 16 * v));
                }
            }
        }
        for kk in 0..kb {
            let wv: [__m512; 4] = std::array::from_fn(|v| _mm512_loadu_ps(w.add(kk * NW + 16 * v)));
            let at = if GATHERED { *offsets.add(kk) } else { kk };
            // Fully unrolled over the rows and vectors: the accumulators stay in registers.
            for (ci, row) in c.iter_mut().zip(&rows) {
                let a = _mm512_set1_ps(*row.add(at));
                for (cv, wj) in ci.iter_mut().zip(&wv) {
                    *cv = _mm512_fmadd_ps(a, *wj, *cv);
                }
            }
        }
        for (i, ci) in c.into_iter().enumerate() {
            for (v, cv) in ci.into_iter().enumerate() {
                _mm512_mask_storeu_ps(y.add(i * ldy + 16 * v), masks[v], cv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn tasks_are_near_equal_whole_tiles() {
        for threads in [1, 2, 3, 8] {
            for mc in [2 * MR, 48, MAX_TASK_ROWS] {
                for m in 1..700 {
                    let tasks = task_rows(m, threads, mc);
                    assert_eq!(tasks.iter().sum::<usize>(), m, "m={m}: {tasks:?}");
                    let (last, whole) = tasks.split_last().expect("a task");
                    assert!(*last > 0 && whole.iter().all(|r| r % MR == 0), "{tasks:?}");
                    let tiles: Vec<usize> = tasks.iter().map(|r| r.div_ceil(MR)).collect();
                    let (lo, hi) = (tiles.iter().min(), tiles.iter().max());
                    assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{tasks:?}");
                    if m.div_ceil(MR) >= 2 * threads {
                        assert!(tasks.len().is_multiple_of(threads), "m={m}: {tasks:?}");
                        assert!(tasks.len() >= 2 * threads, "m={m}: {tasks:?}");
                        assert!(hi <= Some(&(mc / MR).max(1)), "m={m} mc={mc}: {tasks:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn blocking_fits_the_caches() {
        let c = cache_sizes();
        for k in [1, 7, 384, 1536, 4097] {
            let b = Blocking::for_k(k);
            assert!(b.kc >= 1 && b.kc <= k.max(1), "{b:?}");
            assert!(b.mc >= MR && b.mc.is_multiple_of(MR), "{b:?}");
            let most = (c.l2 / 8).max(16 * NW * 4);
            assert!(b.kc * NW * 4 <= most, "k={k}: {b:?} {c:?}");
        }
    }

    /// Bitwise equal to the AVX2 one-panel GEMM (itself checked against an f64 reference in
    /// `gemm::tests`), with the machine's blocking and with small blocks (several blocks of
    /// `k`, many tasks), on shapes with partial panels and tiles; `finish` sees every row once.
    #[test]
    fn equals_the_one_panel_gemm() {
        if !super::super::avx512_detected() {
            eprintln!("AVX-512F not detected: the packed GEMM is not tested here");
            return;
        }
        let narrow = super::super::gemm::Micro {
            one: super::super::gemm_avx2::micro,
            pair: None,
            tri: None,
            quad: None,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        for &(m, n, k) in &[
            (1, 1, 1),
            (7, 65, 3),
            (48, 13, 70),
            (130, 200, 33),
            (257, 64, 1100),
            (1000, 30, 64),
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64((m * 7 + n * 3 + k) as u64);
            let w: Vec<f32> = (0..n * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut want = vec![f32::NAN; m * n];
            super::super::gemm::matmul(narrow, DType::F32, &bytes, n, k, &x, m, None, &mut want);
            let packed = PackedF32::new(&bytes, n, k);
            for blocking in [
                Blocking::for_k(k),
                Blocking { kc: 16, mc: 12 },
                Blocking { kc: 5, mc: MR },
            ] {
                let seen = std::sync::Mutex::new(vec![0u8; m]);
                let finish = |first: usize, rows: &mut [f32]| {
                    let mut s = seen.lock().expect("lock");
                    for r in first..first + rows.len() / n {
                        s[r] += 1;
                    }
                };
                let mut got = vec![f32::NAN; m * n];
                pool.install(|| matmul_blocked(&packed, &x, m, Some(&finish), &mut got, blocking));
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "m={m} n={n} k={k} {blocking:?}");
                assert!(seen.into_inner().expect("lock").iter().all(|&c| c == 1));
            }
        }
    }
}
