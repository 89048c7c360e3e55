//! BatchMatmul of two activations (shaders/bmm.wgsl); the math is on
//! [`Op::BatchMatmul`].

use super::gpu::{Gpu, Params, Recorder, WG};
use super::layout::f32_within;
use super::ops::{act, out};
use crate::backend::{Op, Tensor, TensorInfo};
use crate::error::ExecutionError;

/// Output rows and columns per invocation (bmm.wgsl).
const TILE: usize = 4;
/// Batch dims the kernel indexes.
const BATCH_DIMS: usize = 4;
/// Output matrices per dispatch (workgroups along z).
const MAX_BATCH: usize = 65535;

/// The batch dims of `shape` (all but the last two), left-padded with 1s to
/// [`BATCH_DIMS`]; None when there are more.
fn batch4(shape: &[usize]) -> Option<[usize; BATCH_DIMS]> {
    let lead = shape.len().checked_sub(2)?;
    let pad = BATCH_DIMS.checked_sub(lead)?;
    let mut d = [1; BATCH_DIMS];
    d[pad..].copy_from_slice(&shape[..lead]);
    Some(d)
}

/// Strides (in values) between the matrices of an operand of shape `shape`
/// along the output's batch dims `out`: 0 where the operand is broadcast.
fn batch_strides(shape: &[usize], out: &[usize; BATCH_DIMS]) -> Option<[u32; BATCH_DIMS]> {
    let dims = batch4(shape)?;
    let mut acc = shape[shape.len() - 2..].iter().product::<usize>();
    let mut s = [0; BATCH_DIMS];
    for d in (0..BATCH_DIMS).rev() {
        s[d] = if dims[d] == 1 && out[d] != 1 {
            0
        } else {
            acc as u32
        };
        acc *= dims[d];
    }
    Some(s)
}

/// Whether wgpu runs BatchMatmul on `inputs` giving `outs`: f32 operands of
/// rank >= 2, at most [`BATCH_DIMS`] batch dims and [`MAX_BATCH`] output
/// matrices, every tensor within one binding of `max_binding` bytes.
pub fn fits(inputs: &[TensorInfo], outs: &[TensorInfo], max_binding: u64) -> bool {
    f32_within(inputs, outs, max_binding)
        && inputs.iter().all(|i| i.shape.len() >= 2)
        && batch4(&outs[0].shape).is_some_and(|b| b.iter().product::<usize>() <= MAX_BATCH)
}

/// BatchMatmul of `inputs` into `outs[0]` (one dispatch).
pub fn batch_matmul(
    gpu: &Gpu,
    rec: &mut Recorder,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let (a, b, y) = (inputs[0].shape(), inputs[1].shape(), &outs[0].shape);
    let (m, k, n) = (a[a.len() - 2], a[a.len() - 1], b[b.len() - 1]);
    let dims = batch4(y);
    let strides = dims.and_then(|d| Some((batch_strides(a, &d)?, batch_strides(b, &d)?)));
    let (Some(dims), Some((sa, sb))) = (dims, strides) else {
        return Err(super::ops::unsupported(
            Op::BatchMatmul.name(),
            inputs[0].dtype(),
        ));
    };
    let xa = act(gpu, rec, &inputs[0])?;
    let xb = act(gpu, rec, &inputs[1])?;
    let (t, yb) = out(gpu, rec, &outs[0])?;
    let tiles_n = n.div_ceil(TILE);
    let blocks = m.div_ceil(TILE) * tiles_n;
    let mut p: Params = [0; 32];
    p[..4].copy_from_slice(&[m as u32, n as u32, k as u32, tiles_n as u32]);
    for d in 0..BATCH_DIMS {
        p[4 + d] = dims[d] as u32;
    }
    p[8..12].copy_from_slice(&sa);
    p[12..16].copy_from_slice(&sb);
    p[16] = blocks as u32;
    let batch = dims.iter().product::<usize>();
    gpu.dispatch(
        rec,
        "bmm",
        &[&xa, &xb, &yb],
        p,
        (blocks as u64).div_ceil(WG),
        batch as u32,
    )?;
    Ok(vec![t])
}
