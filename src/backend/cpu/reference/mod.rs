//! The CPU reference library: every op of ops.md in plain loops, written to be
//! obviously right rather than fast (reductions accumulate in f64). It is the
//! arbiter every other implementation is tested against, and the `reference`
//! backend (`--backend reference`).
//!
//! Weights of any encoding are decoded whole through [`Tensor::read_f32`]
//! (the dequantizers of [`crate::quant`]).

mod attention;
pub(crate) mod image;
mod index;
mod layout;
mod math;
mod norm;
pub(crate) mod rnn;

use crate::backend::op::Mask;
use crate::backend::{Backend, BackendConfig, ExecContext, Op, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::sync::Arc;

pub(crate) use attention::visible;
pub(crate) use math::box_muller;
pub use math::{erf, gelu, gelu_tanh, pow_scalar, sample, silu, softplus};

/// The reference library as a backend. It supports every op.
#[derive(Debug, Default)]
pub struct ReferenceBackend;

/// Starts the reference backend (always succeeds).
pub fn init(_config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    Ok(Arc::new(ReferenceBackend))
}

impl Backend for ReferenceBackend {
    fn name(&self) -> &str {
        "reference"
    }

    fn supports(&self, _op: &Op, _inputs: &[TensorInfo]) -> bool {
        true
    }

    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        _ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        execute(op, inputs)
    }

    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        super::host_alloc(self.name(), shape, dtype)
    }

    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        super::host_upload(data, shape, dtype)
    }

    fn download_f32(&self, t: &Tensor) -> Vec<f32> {
        t.read_f32("download")
            .map_or_else(|_| Vec::new(), |v| v.to_vec())
    }
}

/// Runs one op with the reference loops.
pub fn execute(op: &Op, inputs: &[Tensor]) -> Result<Vec<Tensor>, ExecutionError> {
    let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
    let outs = op.infer(&infos)?;
    crate::backend::alloc::check_host_room("reference", &outs)?;
    if inputs.iter().any(|t| t.as_i64().is_some()) && !op.is_index_op() {
        return index::layout_ints(op, inputs, &outs);
    }
    let name = op.name();
    let read = |i: usize| inputs[i].read_f32(name);
    let one = |data: Vec<f32>| Ok(vec![Tensor::from_f32(&outs[0].shape, data)?]);
    if let Some(args) = image::Conv2dArgs::of(op, &infos, &outs) {
        let b = inputs.get(2).map(|_| read(2)).transpose()?;
        let conv = match op {
            Op::Conv2d { .. } => image::conv2d,
            _ => image::conv_transpose2d,
        };
        return one(conv(&args, &read(0)?, &read(1)?, b.as_deref()));
    }
    match op {
        Op::Matmul => one(math::matmul(
            &read(0)?,
            rows(&infos[0].shape),
            &read(1)?,
            &infos[1].shape,
        )),
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let f: fn(f32, f32) -> f32 = match op {
                Op::Add => |a, b| a + b,
                Op::Sub => |a, b| a - b,
                Op::Mul => |a, b| a * b,
                _ => |a, b| a / b,
            };
            one(layout::broadcast(
                &read(0)?,
                &infos[0].shape,
                &read(1)?,
                &infos[1].shape,
                &outs[0].shape,
                f,
            ))
        }
        Op::Scale(_)
        | Op::Clamp { .. }
        | Op::NanToNum { .. }
        | Op::Silu
        | Op::Gelu
        | Op::GeluTanh
        | Op::Relu
        | Op::LeakyRelu(_)
        | Op::Sigmoid
        | Op::Tanh
        | Op::Softcap(_)
        | Op::Sqrt
        | Op::Log
        | Op::Exp
        | Op::Cos
        | Op::Sin
        | Op::Reciprocal
        | Op::Neg
        | Op::Erf
        | Op::PowScalar(_)
        | Op::Softplus
        | Op::Ceil => one(read(0)?.iter().map(|&x| math::unary(op, x)).collect()),
        Op::BatchMatmul => one(image::batch_matmul(
            &read(0)?,
            &infos[0].shape,
            &read(1)?,
            &infos[1].shape,
            &outs[0].shape,
        )),
        Op::AvgPool2d {
            kernel,
            stride,
            pads,
            count_include_pad,
        } => one(image::avg_pool2d(
            &read(0)?,
            &infos[0].shape,
            &outs[0].shape,
            *kernel,
            *stride,
            *pads,
            *count_include_pad,
        )),
        Op::ResizeNearest { scales } => {
            one(image::resize_nearest(&read(0)?, &infos[0].shape, scales))
        }
        Op::Lstm(spec) => rnn::execute(spec, inputs, &outs, None),
        Op::SwiGlu | Op::GeGlu => {
            let act = if *op == Op::SwiGlu { silu } else { gelu };
            let (g, u) = (read(0)?, read(1)?);
            one(g.iter().zip(u.iter()).map(|(&g, &u)| act(g) * u).collect())
        }
        Op::Softmax => one(math::softmax_rows(&read(0)?, last(&infos[0].shape))),
        Op::Reshape(_) => one(read(0)?.to_vec()),
        Op::Permute(perm) => one(layout::permute(&read(0)?, &infos[0].shape, perm)),
        Op::Concat { axis } => {
            let parts = (0..inputs.len()).map(read).collect::<Result<Vec<_>, _>>()?;
            let slices: Vec<(&[f32], &[usize])> = parts
                .iter()
                .zip(&infos)
                .map(|(p, i)| (&**p, i.shape.as_slice()))
                .collect();
            one(layout::concat(&slices, *axis))
        }
        Op::Slice { axis, start, end } => one(layout::slice(
            &read(0)?,
            &infos[0].shape,
            *axis,
            *start,
            *end,
        )),
        Op::Split { axis, sizes } => {
            let x = read(0)?;
            let mut start = 0;
            let mut res = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let part = layout::slice(&x, &infos[0].shape, *axis, start, start + n);
                res.push(Tensor::from_f32(&outs[i].shape, part)?);
                start += n;
            }
            Ok(res)
        }
        Op::RmsNorm { eps, add_one } => one(norm::rms_norm(&read(0)?, &read(1)?, *eps, *add_one)),
        Op::LayerNorm { eps } => {
            let b = if inputs.len() == 3 {
                Some(read(2)?)
            } else {
                None
            };
            one(norm::layer_norm(&read(0)?, &read(1)?, b.as_deref(), *eps))
        }
        Op::GroupNormAffine { groups, eps } => {
            let (x, shape) = (read(0)?, &infos[0].shape);
            let c = shape[1];
            let per = c / groups;
            let (g, b) = (read(1)?, read(2)?);
            let gain: Vec<f32> = (0..c).map(|ch| g[ch / per]).collect();
            let shift: Vec<f32> = (0..c).map(|ch| b[ch / per]).collect();
            let normed = norm::group_norm(&x, shape, &gain, &shift, *groups, *eps);
            let (gamma, beta) = (read(3)?, read(4)?);
            let rest = x.len() / (shape[0] * c).max(1);
            one(normed
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let ch = (i / rest.max(1)) % c;
                    v * gamma[ch] + beta[ch]
                })
                .collect())
        }
        Op::FusedConvAdd {
            conv,
            leaky,
            second,
        } => {
            let at = 1 + usize::from(*second);
            let mut conv_inputs = inputs[at..].to_vec();
            if let Some(slope) = leaky {
                conv_inputs[0] = execute(&Op::LeakyRelu(*slope), &inputs[at..at + 1])?.remove(0);
            }
            let y = execute(conv, &conv_inputs)?.remove(0);
            let y = Tensor::from_f32(inputs[0].shape(), y.read_f32("FusedConvAdd")?.to_vec())?;
            let mut sum = execute(&Op::Add, &[y, inputs[0].clone()])?;
            if *second {
                sum = execute(&Op::Add, &[sum.remove(0), inputs[1].clone()])?;
            }
            Ok(sum)
        }
        Op::FusedAttention => {
            let scores = execute(&Op::BatchMatmul, &inputs[..2])?;
            let p = execute(&Op::Softmax, &scores)?.remove(0);
            execute(&Op::BatchMatmul, &[p, inputs[2].clone()])
        }
        Op::FusedGroupNorm { groups, eps, act } => {
            let norm = Op::GroupNormAffine {
                groups: *groups,
                eps: *eps,
            };
            let mut y = execute(&norm, &inputs[..5])?.remove(0);
            if let [scale, shift] = &inputs[5..] {
                y = execute(&Op::Mul, &[y, scale.clone()])?.remove(0);
                y = execute(&Op::Add, &[y, shift.clone()])?.remove(0);
            }
            match act {
                Some(a) => execute(a, &[y]),
                None => Ok(vec![y]),
            }
        }
        Op::GroupNorm { groups, eps } => one(norm::group_norm(
            &read(0)?,
            &infos[0].shape,
            &read(1)?,
            &read(2)?,
            *groups,
            *eps,
        )),
        Op::Rope {
            style,
            rot_dim,
            pos,
            base,
        } => {
            let cache = if inputs.len() == 3 {
                Some((read(1)?, read(2)?))
            } else {
                None
            };
            one(attention::rope(
                &read(0)?,
                &infos[0].shape,
                *style,
                *rot_dim,
                *pos,
                *base,
                cache.as_ref().map(|(c, s)| (&**c, &**s)),
            ))
        }
        Op::Sdpa {
            scale,
            mask,
            q_pos,
            kv_len,
        } => {
            let (q, k, v) = (read(0)?, read(1)?, read(2)?);
            one(attention::sdpa(
                &attention::SdpaArgs {
                    q_shape: &infos[0].shape,
                    k_shape: &infos[1].shape,
                    v_dim: infos[2].shape[2],
                    scale: *scale,
                    mask,
                    q_pos: *q_pos,
                    kv_len: kv_len.unwrap_or(infos[1].shape[0]),
                },
                &q,
                &k,
                &v,
            ))
        }
        Op::SdpaBatch { scale, lengths } => {
            let (q, k, v) = (read(0)?, read(1)?, read(2)?);
            let (qs, ks, vs) = (&infos[0].shape, &infos[1].shape, &infos[2].shape);
            let seq = qs[0] / lengths.len();
            let mut out = Vec::with_capacity(q.len() / qs[2] * vs[2]);
            for (b, &len) in lengths.iter().enumerate() {
                let q_rows = seq * qs[1] * qs[2];
                let (k_rows, v_rows) = (seq * ks[1] * ks[2], seq * vs[1] * vs[2]);
                out.extend(attention::sdpa(
                    &attention::SdpaArgs {
                        q_shape: &[seq, qs[1], qs[2]],
                        k_shape: &[len, ks[1], ks[2]],
                        v_dim: vs[2],
                        scale: *scale,
                        mask: &Mask::None,
                        q_pos: 0,
                        kv_len: len,
                    },
                    &q[b * q_rows..][..q_rows],
                    &k[b * k_rows..][..k_rows],
                    &v[b * v_rows..][..v_rows],
                ));
            }
            one(out)
        }
        Op::FusedRopeAppend { pos, .. } => {
            let rope = op.rope_part().ok_or_else(|| not_host(&inputs[0], name))?;
            let rotate = |x: &Tensor| -> Result<Tensor, ExecutionError> {
                let args = [x.clone(), inputs[3].clone(), inputs[4].clone()];
                execute(&rope, &args)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| not_host(x, name))
            };
            let q = rotate(&inputs[0])?;
            let k = rotate(&inputs[1])?;
            let append = [inputs[5].clone(), inputs[6].clone(), k, inputs[2].clone()];
            let caches = execute(&Op::KvAppend { pos: *pos }, &append)?;
            Ok(std::iter::once(q).chain(caches).collect())
        }
        Op::KvAppend { pos } => {
            for (cache, new) in [(&inputs[0], &inputs[2]), (&inputs[1], &inputs[3])] {
                let values = new.read_f32(name)?;
                let row = last(new.shape()) * new.shape()[1];
                let mut state = cache.write_state().ok_or_else(|| not_state(cache))?;
                state[pos * row..pos * row + values.len()].copy_from_slice(&values);
            }
            Ok(vec![inputs[0].clone(), inputs[1].clone()])
        }
        Op::Embed => {
            let ids = inputs[0]
                .as_i32()
                .ok_or_else(|| not_host(&inputs[0], name))?;
            one(math::embed(ids, &read(1)?, infos[1].shape[0])?)
        }
        Op::Conv1d { stride, padding } => {
            let b = if inputs.len() == 3 {
                Some(read(2)?)
            } else {
                None
            };
            one(math::conv1d(
                &read(0)?,
                &infos[0].shape,
                &read(1)?,
                &infos[1].shape,
                b.as_deref(),
                *stride,
                *padding,
            ))
        }
        Op::Argmax => {
            let x = read(0)?;
            let ids = x.chunks(last(&infos[0].shape)).map(math::argmax).collect();
            Ok(vec![Tensor::from_i32(&outs[0].shape, ids)?])
        }
        Op::Sample(params) => {
            let x = read(0)?;
            let v = last(&infos[0].shape);
            let history = match inputs.get(1) {
                Some(h) => h.as_i32().ok_or_else(|| not_host(h, name))?,
                None => &[],
            };
            let id = sample(&x[x.len() - v..], history, params);
            Ok(vec![Tensor::from_i32(&[1], vec![id])?])
        }
        Op::FusedNormMatmul { eps, add_one } => {
            let h = norm::rms_norm(&read(0)?, &read(1)?, *eps, *add_one);
            one(math::matmul(
                &h,
                rows(&infos[0].shape),
                &read(2)?,
                &infos[2].shape,
            ))
        }
        Op::FusedSkipNorm { eps, add_one } => {
            let sum: Vec<f32> = read(0)?
                .iter()
                .zip(read(1)?.iter())
                .map(|(a, b)| a + b)
                .collect();
            let normed = norm::rms_norm(&sum, &read(2)?, *eps, *add_one);
            Ok(vec![
                Tensor::from_f32(&outs[0].shape, normed)?,
                Tensor::from_f32(&outs[1].shape, sum)?,
            ])
        }
        Op::FusedSwiGlu => {
            let x = read(0)?;
            let g = math::matmul(&x, rows(&infos[0].shape), &read(1)?, &infos[1].shape);
            let u = math::matmul(&x, rows(&infos[0].shape), &read(2)?, &infos[2].shape);
            one(g.iter().zip(&u).map(|(&g, &u)| silu(g) * u).collect())
        }
        Op::MatmulBias { act } => {
            let x = read(0)?;
            let mut y = math::matmul(&x, rows(&infos[0].shape), &read(1)?, &infos[1].shape);
            let b = read(2)?;
            for row in y.chunks_mut(b.len().max(1)) {
                for (o, &bias) in row.iter_mut().zip(b.iter()) {
                    *o += bias;
                }
            }
            let y = Tensor::from_f32(&outs[0].shape, y)?;
            match act {
                Some(a) => execute(a, &[y]),
                None => Ok(vec![y]),
            }
        }
        Op::FusedLinearAddNorm { eps } => {
            let linear = Op::MatmulBias { act: None };
            let y = execute(&linear, &inputs[..3])?;
            let sum = execute(&Op::Add, &[inputs[3].clone(), y[0].clone()])?;
            let norm = Op::LayerNorm { eps: *eps };
            execute(
                &norm,
                &[sum[0].clone(), inputs[4].clone(), inputs[5].clone()],
            )
        }

        Op::FusedQkv => {
            let x = read(0)?;
            (1..4)
                .map(|i| {
                    let y = math::matmul(&x, rows(&infos[0].shape), &read(i)?, &infos[i].shape);
                    Tensor::from_f32(&outs[i - 1].shape, y)
                })
                .collect()
        }
        // The run-time integer, index and shape ops.
        op => index::execute(op, inputs, &outs),
    }
}

/// Number of rows of a `[.., K]` activation.
fn rows(shape: &[usize]) -> usize {
    shape[..shape.len().saturating_sub(1)].iter().product()
}

fn last(shape: &[usize]) -> usize {
    shape.last().copied().unwrap_or(1)
}

pub(crate) fn not_state(t: &Tensor) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: "KvAppend (cache inputs must be state tensors: Tensor::state_zeros or Backend::alloc)"
            .into(),
        backend: "cpu".into(),
        input_dtype: t.dtype(),
    }
}

pub(crate) fn not_host(t: &Tensor, op: &str) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: format!("{op} (ids must be a host i32 tensor)"),
        backend: "cpu".into(),
        input_dtype: t.dtype(),
    }
}
