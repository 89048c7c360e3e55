//! Reductions of imported graphs: Reduce over a run of axes
//! (shaders/reduce_axes.wgsl) and AvgPool2d (shaders/avg_pool.wgsl); their
//! math is on [`Op`]'s variants.

use super::gpu::{Gpu, Params, Recorder, WG};
use super::layout::f32_within;
use super::ops::{act, out, unsupported};
use crate::backend::{Op, ReduceKind, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;

/// `shape` as `[outer, R, inner]` for a reduction over the sorted `axes`:
/// None unless they are one run (dims of 1 between them aside) over at least
/// one value.
fn span(shape: &[usize], axes: &[usize]) -> Option<(usize, usize, usize)> {
    let (&first, &last) = (axes.first()?, axes.last()?);
    let gaps = (first..=last).all(|d| axes.contains(&d) || shape.get(d) == Some(&1));
    let r: usize = shape.get(first..=last)?.iter().product();
    (gaps && r > 0).then(|| {
        (
            shape[..first].iter().product(),
            r,
            shape[last + 1..].iter().product(),
        )
    })
}

/// Whether wgpu runs `op` (Reduce or AvgPool2d) on `inputs` giving `outs`:
/// f32 tensors within one binding; a Reduce over one run of axes.
pub fn fits(op: &Op, inputs: &[TensorInfo], outs: &[TensorInfo], max_binding: u64) -> bool {
    let axes_ok = match op {
        Op::Reduce { axes, .. } => span(&inputs[0].shape, axes).is_some(),
        Op::AvgPool2d { .. } => true,
        _ => false,
    };
    axes_ok && f32_within(inputs, outs, max_binding)
}

/// Runs `op` (one of [`fits`]'s) into `outs[0]` (one dispatch).
pub fn run(
    gpu: &Gpu,
    rec: &mut Recorder,
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let shape = inputs[0].shape();
    let mut p: Params = [0; 32];
    let kernel = match op {
        Op::Reduce { kind, axes, .. } => {
            let (_, r, inner) =
                span(shape, axes).ok_or_else(|| unsupported(op.name(), DType::F32))?;
            let code = match kind {
                ReduceKind::Sum => 0,
                ReduceKind::Max => 1,
                ReduceKind::Mean => 2,
            };
            p[..4].copy_from_slice(&[outs[0].numel() as u32, r as u32, inner as u32, code]);
            "reduce_axes"
        }
        Op::AvgPool2d {
            kernel,
            stride,
            pads,
            count_include_pad,
        } => {
            let y = &outs[0].shape;
            let words = [
                outs[0].numel(),
                shape[2],
                shape[3],
                y[2],
                y[3],
                kernel[0],
                kernel[1],
                stride[0],
                stride[1],
                pads[0],
                pads[1],
                usize::from(*count_include_pad),
            ];
            for (d, s) in p.iter_mut().zip(words) {
                *d = s as u32;
            }
            "avg_pool"
        }
        _ => return Err(unsupported(op.name(), DType::F32)),
    };
    let x = act(gpu, rec, &inputs[0])?;
    let (t, y) = out(gpu, rec, &outs[0])?;
    let groups = (outs[0].numel() as u64).div_ceil(WG);
    gpu.dispatch(rec, kernel, &[&x, &y], p, groups, 1)?;
    Ok(vec![t])
}
