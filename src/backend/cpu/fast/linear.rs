//! Fast matmul (weights read in place, any encoding) and embedding lookup.

use super::super::kernels;
use crate::backend::tensor::{decode_into, F32Read};
use crate::backend::{ExecContext, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use rayon::prelude::*;
use rayon::ThreadPool;

/// A weight matrix `[N, K]` as stored: host f32 values or encoded bytes.
pub(super) enum Weight<'a> {
    /// Host f32 rows.
    F32(&'a [f32]),
    /// Encoded rows of `row_bytes` bytes each.
    Encoded {
        dtype: DType,
        bytes: &'a [u8],
        row_bytes: usize,
        scale: Option<f32>,
    },
}

impl<'a> Weight<'a> {
    /// The weight view of tensor `w` (`[N, K]` or `[V, D]`), without copying.
    pub(super) fn of(w: &'a Tensor, held: &'a Option<F32Read<'a>>) -> Option<Self> {
        if let Some(values) = held {
            return Some(Weight::F32(values));
        }
        let bytes = w.as_bytes()?;
        let rows = w.shape().first().copied().unwrap_or(1).max(1);
        Some(Weight::Encoded {
            dtype: w.dtype(),
            bytes,
            row_bytes: bytes.len() / rows,
            scale: w.scale(),
        })
    }

    /// Row `n` as f32: borrowed for f32 weights, else decoded into `buf`.
    pub(super) fn row<'b>(
        &'b self,
        n: usize,
        k: usize,
        buf: &'b mut Vec<f32>,
    ) -> Result<&'b [f32], ExecutionError> {
        match self {
            Weight::F32(v) => Ok(&v[n * k..(n + 1) * k]),
            Weight::Encoded {
                dtype,
                bytes,
                row_bytes,
                scale,
            } => {
                buf.resize(k, 0.0);
                decode_into(
                    *dtype,
                    &bytes[n * row_bytes..(n + 1) * row_bytes],
                    *scale,
                    buf,
                )?;
                Ok(buf)
            }
        }
    }
}

/// Holds a decoded copy of `w` only when it is neither encoded bytes nor
/// host f32 (KV state, i32): the matmul then reads the copy.
pub(super) fn hold<'a>(w: &'a Tensor, op: &str) -> Result<Option<F32Read<'a>>, ExecutionError> {
    if w.as_bytes().is_some() {
        return Ok(None);
    }
    w.read_f32(op).map(Some)
}

/// `y [M, N] = x [M, K] W^T`, parallel over output rows of W; each weight row
/// is decoded once (into a per-task buffer) and used for all M inputs.
pub(super) fn matmul_into(
    pool: &ThreadPool,
    x: &[f32],
    k: usize,
    w: &Weight,
    n: usize,
    y: &mut [f32],
) -> Result<(), ExecutionError> {
    let m = x.len().checked_div(k).unwrap_or(0);
    if m == 0 {
        return Ok(());
    }
    pool.install(|| matmul_rows(x, k, m, w, n, y))
}

fn matmul_rows(
    x: &[f32],
    k: usize,
    m: usize,
    w: &Weight,
    n: usize,
    y: &mut [f32],
) -> Result<(), ExecutionError> {
    if m == 1 {
        y.par_chunks_mut(64)
            .enumerate()
            .try_for_each_init(Vec::new, |buf, (c, out)| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = super::super::simd::dot(x, w.row(c * 64 + i, k, buf)?);
                }
                Ok(())
            })
    } else {
        // yT [N, M], then transpose.
        let mut yt = vec![0.0f32; n * m];
        yt.par_chunks_mut(m)
            .enumerate()
            .with_min_len(16)
            .try_for_each_init(Vec::new, |buf, (row, out)| {
                let wr = w.row(row, k, buf)?;
                for (r, o) in out.iter_mut().enumerate() {
                    *o = super::super::simd::dot(&x[r * k..(r + 1) * k], wr);
                }
                Ok::<(), ExecutionError>(())
            })?;
        for (j, col) in yt.chunks(m).enumerate() {
            for (r, &v) in col.iter().enumerate() {
                y[r * n + j] = v;
            }
        }
        Ok(())
    }
}

/// `Matmul(x, w)` into a new tensor of `out_shape`, then `finish` on its rows where given.
pub(super) fn matmul(
    pool: &ThreadPool,
    x: &Tensor,
    w: &Tensor,
    finish: Option<&kernels::RowsFn<'_>>,
    out_shape: &[usize],
    ctx: &mut ExecContext,
) -> Result<Tensor, ExecutionError> {
    let xs = x.read_f32("Matmul")?;
    matmul_values(pool, &xs, w, finish, out_shape, ctx)
}

/// `Matmul` of host values `x` (rows of K) by `w`, then `finish` on the output
/// rows where given: the quantized kernels for encoded weights they cover,
/// else rows decoded one at a time.
pub(super) fn matmul_values(
    pool: &ThreadPool,
    x: &[f32],
    w: &Tensor,
    finish: Option<&kernels::RowsFn<'_>>,
    out_shape: &[usize],
    ctx: &mut ExecContext,
) -> Result<Tensor, ExecutionError> {
    let (n, k) = (w.shape()[0], w.shape()[1]);
    let m = x.len().checked_div(k).unwrap_or(0);
    // f32 weights against many activation rows: the GEMM over the weight's packing.
    #[cfg(target_arch = "x86_64")]
    if kernels::packed_pays(kernels::active_path(), m, pool.current_num_threads()) && k > 0 {
        if let Some(p) = super::packed::packed(w) {
            return ctx.tensor_with(out_shape, false, |y| {
                pool.install(|| kernels::matmul_packed(&p, x, m, finish, y));
                Ok(())
            });
        }
    }
    // q4_k / q6_k weights against one activation row: the copy repacked for it.
    #[cfg(target_arch = "x86_64")]
    if m == 1 {
        if let Some(r) = super::repacked::interleaved(w) {
            return ctx.tensor_with(out_shape, false, |y| {
                pool.install(|| r.matvec(x, y));
                if let Some(f) = finish {
                    f(0, y);
                }
                Ok(())
            });
        }
    }
    // Encoded weights with a kernel: dot products straight from the stored
    // blocks (the tensor's byte size was checked against its shape).
    if let Some(bytes) = w
        .as_bytes()
        .filter(|_| kernels::supports(w.dtype()) && k > 0)
    {
        return ctx.tensor_with(out_shape, false, |y| {
            let path = kernels::active_path();
            pool.install(|| kernels::matmul_with(path, w.dtype(), bytes, n, k, x, m, finish, y));
            Ok(())
        });
    }
    let held = hold(w, "Matmul")?;
    let weight = Weight::of(w, &held).ok_or_else(|| unreadable(w))?;
    ctx.tensor_with(out_shape, k == 0, |y| {
        matmul_into(pool, x, k, &weight, n, y)?;
        if let Some(f) = finish {
            f(0, y);
        }
        Ok(())
    })
}

/// Rows `ids` of `table [V, D]`; only the looked-up rows are decoded.
pub(super) fn embed(
    ids: &[i32],
    table: &Tensor,
    out_shape: &[usize],
    ctx: &mut ExecContext,
) -> Result<Tensor, ExecutionError> {
    let (v, d) = (table.shape()[0], table.shape()[1]);
    if let Some(&bad) = ids.iter().find(|&&id| id < 0 || id as usize >= v) {
        return Err(ExecutionError::IndexOutOfRange {
            op: "Embed".into(),
            index: bad as i64,
            len: v,
        });
    }
    let held = hold(table, "Embed")?;
    let weight = Weight::of(table, &held).ok_or_else(|| unreadable(table))?;
    ctx.tensor_with(out_shape, false, |out| {
        let mut buf = Vec::new();
        for (&id, o) in ids.iter().zip(out.chunks_mut(d.max(1))) {
            o.copy_from_slice(weight.row(id as usize, d, &mut buf)?);
        }
        Ok(())
    })
}

fn unreadable(t: &Tensor) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: "Matmul (weight storage not readable on the host)".into(),
        backend: "cpu".into(),
        input_dtype: t.dtype(),
    }
}
