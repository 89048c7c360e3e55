//! Quantized matrix-vector and matrix-matrix products for the fast cpu backend.
//!
//! Weights are read in place, block by block; f32 weights are never materialized. For the
//! block encodings the activation row is quantized once to 8 bits per value ([`act::Q8Block`]
//! for the 32-value encodings, [`act::Q8KBlock`] for the k-quants) and each weight block is
//! combined with it in integer arithmetic, as ggml does; f32 / f16 / bf16 weights are
//! multiplied with the f32 activations directly. Two implementations of every kernel exist:
//! `portable` (plain Rust) and, on x86-64, `avx2` (AVX2 + FMA + F16C through
//! `std::arch`) or, on aarch64, `neon` (NEON, with `sdot` where the CPU has it), chosen at
//! run time. Rows of the output are spread over the current rayon pool (the caller sizes it).

pub mod act;
#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod gelu;
mod gemm;
pub use gemm::RowsFn;
#[cfg(target_arch = "x86_64")]
mod gemm_avx2;
#[cfg(target_arch = "x86_64")]
mod gemm_avx512;
#[cfg(target_arch = "x86_64")]
mod gemm_packed;
#[cfg(target_arch = "x86_64")]
mod interleaved;
#[cfg(target_arch = "x86_64")]
pub use gemm_packed::PackedF32;
#[cfg(target_arch = "x86_64")]
pub(crate) use gemm_packed::{
    avx512::tile as packed_tile, avx512::Steps as TileSteps, MR as PACKED_TILE_ROWS,
    NW as PACKED_PANEL,
};
#[cfg(target_arch = "x86_64")]
pub use interleaved::Interleaved;
pub mod machine;
#[cfg(target_arch = "aarch64")]
mod neon;
mod portable;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod vnni;

use crate::dtype::DType;
use act::{Q8Block, Q8KBlock};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Which implementation of the kernels runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPath {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX2 + FMA + F16C intrinsics (x86-64 only).
    Avx2,
    /// [`Avx2`](KernelPath::Avx2) with the integer products of the panel kernels and of the
    /// 32-value encodings' matrix-vector kernels through AVX-512 VNNI's `vpdpbusd` on 256-bit
    /// vectors (x86-64 with AVX-512 VNNI, BW and VL only); the same outputs bit for bit.
    Avx512Vnni,
    /// NEON intrinsics with widening multiplies (aarch64 only).
    Neon,
    /// NEON intrinsics with the `sdot` instruction (aarch64 with FEAT_DotProd only).
    NeonDot,
}

impl KernelPath {
    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            KernelPath::Portable => true,
            KernelPath::Avx2 => avx2_detected(),
            KernelPath::Avx512Vnni => avx2_detected() && vnni_detected(),
            KernelPath::Neon => cfg!(target_arch = "aarch64"),
            KernelPath::NeonDot => dotprod_detected(),
        }
    }
}

impl KernelPath {
    /// The path of the row kernels and the float GEMM: [`Avx512Vnni`](KernelPath::Avx512Vnni)
    /// differs from [`Avx2`](KernelPath::Avx2) only in the panel and matrix-vector kernels.
    fn rows(self) -> Self {
        match self {
            KernelPath::Avx512Vnni => KernelPath::Avx2,
            p => p,
        }
    }
}

/// The fastest path this CPU can run.
fn best_path() -> KernelPath {
    [
        KernelPath::Avx512Vnni,
        KernelPath::Avx2,
        KernelPath::NeonDot,
        KernelPath::Neon,
    ]
    .into_iter()
    .find(|p| p.available())
    .unwrap_or(KernelPath::Portable)
}

fn dotprod_detected() -> bool {
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("dotprod")
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        false
    }
}

fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: OnceLock<bool> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AVX-512 F, BW, VL and VNNI (checked once).
fn vnni_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: OnceLock<bool> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512vnni")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512f")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU runs AVX-512F (checked once): the wide GEMM tiles here and the 16-lane
/// attention and element-wise code of [`super::fast`].
#[cfg(target_arch = "x86_64")]
pub(in crate::backend::cpu) fn avx512_detected() -> bool {
    static DETECTED: OnceLock<bool> = OnceLock::new();
    *DETECTED.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f"))
}

static FORCE_PORTABLE: AtomicBool = AtomicBool::new(false);

/// Forces [`matvec`] / [`matmul`] onto the portable path (`true`) or back to the best one.
/// The environment variable `CYB_LLM_PORTABLE_KERNELS=1` forces it from the start.
pub fn set_force_portable(force: bool) {
    FORCE_PORTABLE.store(force, Ordering::Relaxed);
}

static PANELS_OFF: AtomicBool = AtomicBool::new(false);

/// Turns the AVX2 panel kernels off (`false`: [`matmul`] runs the four-row kernels instead)
/// or back on, so that benchmarks can compare the two in one process.
pub fn set_panels(enabled: bool) {
    PANELS_OFF.store(!enabled, Ordering::Relaxed);
}

/// The path [`matvec`] / [`matmul`] take on this machine now.
pub fn active_path() -> KernelPath {
    static ENV_PORTABLE: OnceLock<bool> = OnceLock::new();
    let env = *ENV_PORTABLE
        .get_or_init(|| std::env::var("CYB_LLM_PORTABLE_KERNELS").is_ok_and(|v| v == "1"));
    if env || FORCE_PORTABLE.load(Ordering::Relaxed) {
        KernelPath::Portable
    } else {
        best_path()
    }
}

/// Whether matvec/matmul have a kernel for this dtype.
pub fn supports(dtype: DType) -> bool {
    !matches!(
        dtype,
        DType::Ternary | DType::I32 | DType::I8 | DType::U8 | DType::I64 | DType::Bool
    )
}

/// `y[n] = sum_k W[n,k] * x[k]` for a row-major weight of `dtype` with `n` rows of `k` values.
///
/// # Panics
/// If `dtype` is not [`supported`](supports), `k` is not a multiple of the block, or a
/// slice length does not match `n` and `k` (callers check shapes first).
pub fn matvec(dtype: DType, w: &[u8], n: usize, k: usize, x: &[f32], y: &mut [f32]) {
    matmul_with(active_path(), dtype, w, n, k, x, 1, None, y);
}

/// `Y[m, n] = sum_k X[m,k] * W[n,k]`  (X row-major `[m,k]`, Y row-major `[m,n]`).
///
/// # Panics
/// As [`matvec`], with `x` of `m * k` and `y` of `m * n` values.
pub fn matmul(dtype: DType, w: &[u8], n: usize, k: usize, x: &[f32], m: usize, y: &mut [f32]) {
    matmul_with(active_path(), dtype, w, n, k, x, m, None, y);
}

/// Whether products of `m` activation rows on `path`, on a pool of `threads` threads, run
/// faster over weights packed into a [`PackedF32`] ([`matmul_packed`]): on CPUs with
/// AVX-512F, from the rows on where the float GEMM splits the activation rows among tasks
/// (below, it splits the weights, so that each is read once).
#[cfg(target_arch = "x86_64")]
pub fn packed_pays(path: KernelPath, m: usize, threads: usize) -> bool {
    path.rows() == KernelPath::Avx2
        && avx512_detected()
        && m.div_ceil(gemm::NR) >= 4 * threads.max(1)
}

/// `Y[m, n] = X W^T` over packed f32 weights (`x`: `m` rows of `w.k()` values, `y`: `m` rows
/// of `w.n()`), then `finish` (where given) on the finished rows, on the current rayon pool.
/// Results are bitwise those of [`matmul_with`] on the same weights.
///
/// # Panics
/// If the slice lengths do not match, or the CPU lacks AVX-512F (callers check
/// [`packed_pays`]).
#[cfg(target_arch = "x86_64")]
pub fn matmul_packed(
    w: &PackedF32,
    x: &[f32],
    m: usize,
    finish: Option<&RowsFn<'_>>,
    y: &mut [f32],
) {
    gemm_packed::matmul(w, x, m, finish, y);
}

/// A row kernel: the dot product of one encoded weight row with one prepared activation row.
type RowDot<A> = fn(&[u8], &[A]) -> f32;

/// A four-row kernel: one encoded weight row against four activation rows, the weights
/// decoded once for all four (used by [`matmul`] when it has at least four rows).
type RowDot4<A> = fn(&[u8], [&[A]; 4]) -> [f32; 4];

/// A matrix-vector kernel over four weight rows: the four rows of `row_bytes` at the start of
/// the weights against one activation row (used by [`matvec`] for groups of four rows).
type MatvecRows4<A> = fn(&[u8], usize, &[A]) -> [f32; 4];

/// The kernels of one encoding on one path.
struct Kernel<A> {
    one: RowDot<A>,
    four: Option<RowDot4<A>>,
    matvec4: Option<MatvecRows4<A>>,
}

impl<A> Kernel<A> {
    fn one(one: RowDot<A>) -> Self {
        Kernel {
            one,
            four: None,
            matvec4: None,
        }
    }

    fn with_four(one: RowDot<A>, four: RowDot4<A>) -> Self {
        Kernel {
            four: Some(four),
            ..Kernel::one(one)
        }
    }
}

/// [`matmul`] on an explicit path (tests run both), then `finish` (where given) on the
/// finished output rows — the float GEMM calls it per task, on rows still in cache.
///
/// # Panics
/// As [`matmul`], and when `path` is not [`available`](KernelPath::available).
#[allow(clippy::too_many_arguments)]
pub fn matmul_with(
    path: KernelPath,
    dtype: DType,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
    finish: Option<&RowsFn<'_>>,
    y: &mut [f32],
) {
    assert!(supports(dtype), "kernels: no matmul kernel for {dtype}");
    assert!(
        path.available(),
        "kernels: {path:?} is not available on this CPU"
    );
    let bv = dtype.block_values();
    assert!(
        k.is_multiple_of(bv),
        "kernels: {dtype}: k = {k} is not a multiple of {bv}"
    );
    let row_bytes = k / bv * dtype.block_bytes();
    assert_eq!(
        w.len(),
        n * row_bytes,
        "kernels: {dtype}: weight bytes for [{n}, {k}]"
    );
    assert_eq!(x.len(), m * k, "kernels: activation length for [{m}, {k}]");
    assert_eq!(y.len(), m * n, "kernels: output length for [{m}, {n}]");
    if n == 0 || m == 0 {
        return;
    }
    let full_path = path;
    let path = path.rows();
    let micro = gemm_micro(path).filter(|_| m >= gemm::MIN_ROWS);
    if let (DType::F32 | DType::F16 | DType::BF16, Some(micro)) = (dtype, micro) {
        gemm::matmul(micro, dtype, w, n, k, x, m, finish, y);
        return;
    }
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            run(float_kernel(path, dtype), w, row_bytes, n, x, k, m, y);
        }
        DType::Q8_0 | DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
            let acts = act::quantize_q8(x, k, m);
            match () {
                #[cfg(target_arch = "x86_64")]
                _ if use_panel(full_path, dtype, m) => {
                    let vnni = full_path == KernelPath::Avx512Vnni;
                    avx2::panel_matmul(dtype, vnni, w, n, k, &acts, m, y)
                }
                _ => run(
                    block_kernel(path, dtype, full_path == KernelPath::Avx512Vnni),
                    w,
                    row_bytes,
                    n,
                    &acts,
                    k / 32,
                    m,
                    y,
                ),
            }
        }
        _ => {
            let acts = act::quantize_q8k(x, k, m);
            match () {
                #[cfg(target_arch = "x86_64")]
                _ if use_panel(full_path, dtype, m) => {
                    let vnni = full_path == KernelPath::Avx512Vnni;
                    avx2::k_panel_matmul(dtype, vnni, w, n, k, &acts, m, y)
                }
                _ => run(k_kernel(path, dtype), w, row_bytes, n, &acts, k / 256, m, y),
            }
        }
    }
    gemm::finish_rows(finish, n, y);
}

/// The micro-kernels of the register-blocked float GEMM on `path` (`None`: the path keeps its
/// dot-product kernels). On the AVX2 path a CPU with AVX-512F also gets the two-, three- and
/// four-panel kernels.
fn gemm_micro(path: KernelPath) -> Option<gemm::Micro> {
    let one = match path {
        KernelPath::Portable => gemm::micro_portable,
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx2 => gemm_avx2::micro,
        #[cfg(target_arch = "aarch64")]
        KernelPath::Neon | KernelPath::NeonDot => neon::gemm_micro,
        #[allow(unreachable_patterns)]
        _ => return None,
    };
    #[cfg(target_arch = "x86_64")]
    let (pair, tri, quad) = {
        let wide = path == KernelPath::Avx2 && avx512_detected();
        (
            wide.then_some(gemm_avx512::pair as gemm::PairKernel),
            wide.then_some(gemm_avx512::tri as gemm::TriKernel),
            wide.then_some(gemm_avx512::quad as gemm::QuadKernel),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let (pair, tri, quad) = (None, None, None);
    Some(gemm::Micro {
        one,
        pair,
        tri,
        quad,
    })
}

fn float_kernel(path: KernelPath, dtype: DType) -> Kernel<f32> {
    #[cfg(target_arch = "aarch64")]
    if let Some(k) = neon::float_kernel(path, dtype) {
        return k;
    }
    match (path, dtype) {
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::F32) => Kernel::with_four(avx2::f32_row, avx2::f32_rows4),
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::F16) => Kernel::with_four(avx2::f16_row, avx2::f16_rows4),
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, _) => Kernel::with_four(avx2::bf16_row, avx2::bf16_rows4),
        (_, DType::F32) => Kernel::one(portable::f32_row),
        (_, DType::F16) => Kernel::one(portable::f16_row),
        _ => Kernel::one(portable::bf16_row),
    }
}

/// The kernels of a 32-value block encoding on `path` (a row path, see [`KernelPath::rows`]);
/// `vnni`: with the AVX-512 VNNI matrix-vector kernels (only where detected).
fn block_kernel(path: KernelPath, dtype: DType, vnni: bool) -> Kernel<Q8Block> {
    #[cfg(target_arch = "aarch64")]
    if let Some(k) = neon::block_kernel(path, dtype) {
        return k;
    }
    let kernel = Kernel::one(match (path, dtype) {
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q8_0) => avx2::q8_0,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q4_0) => avx2::q4_0,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q4_1) => avx2::q4_1,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q5_0) => avx2::q5_0,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, _) => avx2::q5_1,
        (_, DType::Q8_0) => portable::q8_0,
        (_, DType::Q4_0) => portable::q4_0,
        (_, DType::Q4_1) => portable::q4_1,
        (_, DType::Q5_0) => portable::q5_0,
        _ => portable::q5_1,
    });
    #[cfg(target_arch = "x86_64")]
    if path == KernelPath::Avx2 {
        return Kernel {
            four: avx2::block_rows4(dtype),
            matvec4: vnni.then(|| vnni::block_matvec4(dtype)).flatten(),
            ..kernel
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = vnni; // only x86-64 has VNNI kernels
    kernel
}

fn k_kernel(path: KernelPath, dtype: DType) -> Kernel<Q8KBlock> {
    #[cfg(target_arch = "aarch64")]
    if let Some(k) = neon::k_kernel(path, dtype) {
        return k;
    }
    let kernel = Kernel::one(match (path, dtype) {
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q2K) => avx2::q2_k,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q3K) => avx2::q3_k,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q4K) => avx2::q4_k,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, DType::Q5K) => avx2::q5_k,
        #[cfg(target_arch = "x86_64")]
        (KernelPath::Avx2, _) => avx2::q6_k,
        (_, DType::Q2K) => portable::q2_k,
        (_, DType::Q3K) => portable::q3_k,
        (_, DType::Q4K) => portable::q4_k,
        (_, DType::Q5K) => portable::q5_k,
        _ => portable::q6_k,
    });
    #[cfg(target_arch = "x86_64")]
    if path == KernelPath::Avx2 {
        return Kernel {
            four: avx2::k_rows4(dtype),
            ..kernel
        };
    }
    kernel
}

/// Activation rows from which the AVX2 kernels decode eight weight rows at a time (panels)
/// for the encodings that have a panel kernel.
#[cfg(target_arch = "x86_64")]
const PANEL_MIN_ROWS: usize = 8;

/// Whether [`matmul_with`] runs `dtype` with `m` activation rows through the AVX2 panel
/// kernels ([`avx2::panel_matmul`], [`avx2::k_panel_matmul`]).
#[cfg(target_arch = "x86_64")]
fn use_panel(path: KernelPath, dtype: DType, m: usize) -> bool {
    matches!(path, KernelPath::Avx2 | KernelPath::Avx512Vnni)
        && m >= PANEL_MIN_ROWS
        && avx2::has_panel(dtype)
        && !PANELS_OFF.load(Ordering::Relaxed)
}

/// Activation rows taken together per weight row (the weight row stays in L1 meanwhile).
const ACT_TILE: usize = 16;

/// Runs `kernel` for every (weight row, activation row) pair (four rows at a time where it has
/// a four-row kernel), weight rows spread over the rayon pool. `acts` holds `m` rows of
/// `per_row` prepared entries.
#[allow(clippy::too_many_arguments)]
fn run<A: Sync>(
    kernel: Kernel<A>,
    w: &[u8],
    row_bytes: usize,
    n: usize,
    acts: &[A],
    per_row: usize,
    m: usize,
    y: &mut [f32],
) {
    let threads = rayon::current_num_threads().max(1);
    let mut rows_per_task = (n / (threads * 4)).clamp(1, 256);
    if m == 1 && kernel.matvec4.is_some() {
        rows_per_task = rows_per_task.next_multiple_of(4);
    }
    let tile = |rows: usize, out: &mut [f32]| {
        // out is [rows_in_chunk, m] (row-major by weight row).
        for i0 in (0..m).step_by(ACT_TILE) {
            let i1 = (i0 + ACT_TILE).min(m);
            for (r, out_r) in out.chunks_exact_mut(m).enumerate() {
                let wr = &w[(rows + r) * row_bytes..(rows + r + 1) * row_bytes];
                let act = |i: usize| &acts[i * per_row..(i + 1) * per_row];
                let mut i = i0;
                if let Some(four) = kernel.four {
                    while i + 4 <= i1 {
                        let ys = four(wr, [act(i), act(i + 1), act(i + 2), act(i + 3)]);
                        out_r[i..i + 4].copy_from_slice(&ys);
                        i += 4;
                    }
                }
                for (i, o) in out_r.iter_mut().enumerate().take(i1).skip(i) {
                    *o = (kernel.one)(wr, act(i));
                }
            }
        }
    };
    if m == 1 {
        y.par_chunks_mut(rows_per_task)
            .enumerate()
            .for_each(|(c, out)| match kernel.matvec4 {
                Some(four) => {
                    let rows = c * rows_per_task;
                    for (g, ys) in out.chunks_exact_mut(4).enumerate() {
                        let at = (rows + 4 * g) * row_bytes;
                        ys.copy_from_slice(&four(&w[at..at + 4 * row_bytes], row_bytes, acts));
                    }
                    let done = out.len() / 4 * 4;
                    for (r, y) in out[done..].iter_mut().enumerate() {
                        let at = (rows + done + r) * row_bytes;
                        *y = (kernel.one)(&w[at..at + row_bytes], acts);
                    }
                }
                None => tile(c * rows_per_task, out),
            });
        return;
    }
    let mut yt = vec![0.0f32; n * m];
    yt.par_chunks_mut(rows_per_task * m)
        .enumerate()
        .for_each(|(c, out)| tile(c * rows_per_task, out));
    y.par_chunks_mut(n).enumerate().for_each(|(i, yi)| {
        for (r, v) in yi.iter_mut().enumerate() {
            *v = yt[r * m + i];
        }
    });
}
