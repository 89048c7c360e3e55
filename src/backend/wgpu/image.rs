//! Convolutions and group norms of imported image and audio graphs
//! (shaders/conv.wgsl, shaders/group_norm.wgsl); their math is on [`Op`]'s
//! variants.

use super::gpu::{Gpu, Params, Recorder, WG};
use super::ops::{act, out, unsupported, vector, vector_rows};
use crate::backend::{Op, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;

/// Output channels per conv invocation (OC in conv.wgsl).
const OC: usize = 4;

/// One convolution as conv.wgsl reads it: `x [B, Cin, H, W]`, `out [B, Cout,
/// Ho, Wo]`, kernel `[kh, kw]`, and whether it is transposed.
struct Conv {
    x: [usize; 4],
    out: [usize; 4],
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    /// `[top, left]` padding (conv) or cropping (transposed).
    pads: [usize; 2],
    groups: usize,
    transposed: bool,
}

fn dims4(s: &[usize]) -> [usize; 4] {
    [s[0], s[1], s[2], s[3]]
}

impl Conv {
    /// The convolution of `op` on inputs `x`, `w` giving `y`; None for other ops.
    fn of(op: &Op, x: &[usize], w: &[usize], y: &[usize]) -> Option<Conv> {
        if let Some((stride, pads, dilation, groups)) = op.conv_attrs() {
            return Some(Conv {
                x: dims4(x),
                out: dims4(y),
                kernel: [w[2], w[3]],
                stride,
                dilation,
                pads: [pads[0], pads[1]],
                groups,
                transposed: matches!(op, Op::ConvTranspose2d { .. }),
            });
        }
        // [Cin, L] by [Cout, Cin, k]: a Conv2d of one batch entry and height 1.
        let Op::Conv1d { stride, padding } = op else {
            return None;
        };
        Some(Conv {
            x: [1, x[0], 1, x[1]],
            out: [1, y[0], 1, y[1]],
            kernel: [1, w[2]],
            stride: [1, *stride],
            dilation: [1, 1],
            pads: [0, *padding],
            groups: 1,
            transposed: false,
        })
    }

    /// Weight values per row as uploaded: one output channel (conv) or one
    /// input channel (transposed).
    fn weight_row(&self) -> usize {
        let per = if self.transposed {
            self.out[1] / self.groups
        } else {
            self.x[1] / self.groups
        };
        per * self.kernel[0] * self.kernel[1]
    }

    /// Invocations of the kernel: positions x channel blocks of each group.
    fn threads(&self) -> usize {
        let per = self.out[1] / self.groups;
        self.out[0] * self.groups * per.div_ceil(OC) * self.out[2] * self.out[3]
    }

    fn params(&self, has_bias: bool) -> Params {
        let mut p: Params = [0; 32];
        let words = [
            self.x[0],
            self.x[1],
            self.x[2],
            self.x[3],
            self.out[1],
            self.out[2],
            self.out[3],
            usize::from(self.transposed),
            self.kernel[0],
            self.kernel[1],
            self.stride[0],
            self.stride[1],
            self.dilation[0],
            self.dilation[1],
            self.pads[0],
            self.pads[1],
            self.groups,
            usize::from(has_bias),
        ];
        for (d, s) in p.iter_mut().zip(words) {
            *d = s as u32;
        }
        p
    }
}

/// Whether every tensor of a convolution or group norm (inputs `inputs`,
/// outputs `outs`) fits one storage binding of `max_binding` bytes, the
/// weights being non-quantized (decoded to f32 once).
pub fn fits(inputs: &[TensorInfo], outs: &[TensorInfo], max_binding: u64) -> bool {
    let small = |i: &TensorInfo| !i.dtype.is_quantized() && i.dtype != DType::Ternary;
    inputs[1..].iter().all(small)
        && inputs
            .iter()
            .chain(outs)
            .all(|i| (i.numel() as u64 + 1) * 4 <= max_binding)
}

/// Conv2d, ConvTranspose2d or Conv1d of `inputs` into `outs[0]` (one dispatch).
pub fn conv(
    gpu: &Gpu,
    rec: &mut Recorder,
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let c = Conv::of(op, inputs[0].shape(), inputs[1].shape(), &outs[0].shape)
        .ok_or_else(|| unsupported(op.name(), DType::F32))?;
    let x = act(gpu, rec, &inputs[0])?;
    let w = vector_rows(gpu, &inputs[1], c.weight_row())?;
    let b = inputs.get(2).map(|b| vector(gpu, b)).transpose()?;
    let (t, y) = out(gpu, rec, &outs[0])?;
    gpu.dispatch(
        rec,
        "conv",
        &[&x, &w, b.as_ref().unwrap_or(&w), &y],
        c.params(b.is_some()),
        (c.threads() as u64).div_ceil(WG),
        1,
    )?;
    Ok(vec![t])
}

/// GroupNorm (`[x, g, b]`) or GroupNormAffine (`[x, g, b, gamma, beta]`) of
/// `x [B, C, ..]` into `outs[0]`: one workgroup per (batch entry, group).
pub fn group_norm(
    gpu: &Gpu,
    rec: &mut Recorder,
    groups: usize,
    eps: f32,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let shape = inputs[0].shape();
    let (batch, channels) = (shape[0], shape[1]);
    let rest: usize = shape[2..].iter().product();
    let x = act(gpu, rec, &inputs[0])?;
    let v = inputs[1..]
        .iter()
        .map(|t| vector(gpu, t))
        .collect::<Result<Vec<_>, _>>()?;
    let affine = v.len() == 4;
    let (gamma, beta) = if affine {
        (&v[2], &v[3])
    } else {
        (&v[0], &v[1])
    };
    let (t, y) = out(gpu, rec, &outs[0])?;
    let mut p: Params = [0; 32];
    p[..6].copy_from_slice(&[
        (batch * groups) as u32,
        channels as u32,
        groups as u32,
        rest as u32,
        eps.to_bits(),
        u32::from(affine),
    ]);
    gpu.dispatch(
        rec,
        "group_norm",
        &[&x, &v[0], &v[1], gamma, beta, &y],
        p,
        (batch * groups) as u64,
        1,
    )?;
    Ok(vec![t])
}
