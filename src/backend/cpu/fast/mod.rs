//! The fast cpu ops: rayon over rows / heads / output features, SIMD dot
//! products, weights read in place. Outputs come from the frame allocator.
//! Ops without a fast version (layout, conv1d, group norm, sampling, ...)
//! run the reference loops.

mod attention;
pub(super) mod attention_block;
#[cfg(target_arch = "x86_64")]
mod attention_rows;
mod conv_depthwise;
#[cfg(target_arch = "x86_64")]
mod conv_direct;
#[cfg(target_arch = "x86_64")]
mod conv_narrow;
#[cfg(target_arch = "x86_64")]
mod conv_winograd;
mod elementwise;
mod image;
mod index;
mod linear;
#[cfg(target_arch = "x86_64")]
mod packed;
mod par;
#[cfg(target_arch = "x86_64")]
mod repacked;
#[cfg(target_arch = "x86_64")]
mod weight_cache;

use super::reference;
use crate::backend::op::{broadcast_shape, Mask};
use crate::backend::{ExecContext, Op, Tensor, TensorInfo};
use crate::error::ExecutionError;
use rayon::ThreadPool;

/// The index ops with a fast version on f32 values (`Pad`, `StridedSlice`, `Reduce` over
/// one run of axes, `Where`, `ResizeNearest`), their value operands read as f32 (weights
/// decoded); `None` for every other op, and for integer or bool values.
fn index_op(
    op: &Op,
    inputs: &[Tensor],
    ctx: &mut ExecContext,
) -> Result<Option<Vec<Tensor>>, ExecutionError> {
    let values: &[usize] = match op {
        Op::Pad { .. } | Op::StridedSlice { .. } | Op::Reduce { .. } | Op::ResizeNearest { .. } => {
            &[0]
        }
        Op::Where => &[1, 2],
        _ => return Ok(None),
    };
    let ints = |t: &Tensor| t.as_i64().is_some() || t.as_i32().is_some();
    if values.iter().any(|&i| inputs.get(i).is_none_or(ints)) {
        return Ok(None);
    }
    let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
    let outs = op.infer(&infos)?;
    crate::backend::alloc::check_host_room("cpu", &outs)?;
    let name = op.name();
    let x = inputs[values[0]].read_f32(name)?;
    let shape = &infos[0].shape;
    let out = outs[0].shape.as_slice();
    let mut done = true;
    let y = match op {
        Op::Pad { pads, value } => ctx.tensor_with(out, false, |y| {
            index::pad(&x, shape, pads, *value as f32, y);
            Ok(())
        })?,
        Op::StridedSlice { starts, steps, .. } => ctx.tensor_with(out, false, |y| {
            index::strided_slice(&x, shape, starts, steps, out, y);
            Ok(())
        })?,
        Op::Reduce { kind, axes, .. } => ctx.tensor_with(out, false, |y| {
            done = index::reduce(&x, shape, *kind, axes, y);
            Ok(())
        })?,
        Op::ResizeNearest { scales } => ctx.tensor_with(out, false, |y| {
            index::resize_nearest(&x, shape, scales, y);
            Ok(())
        })?,
        _ => {
            let Some(cond) = inputs[0].as_i64() else {
                return Ok(None);
            };
            let b = inputs[2].read_f32(name)?;
            ctx.tensor_with(out, false, |y| {
                let (a, b) = ((&x[..], &infos[1].shape[..]), (&b[..], &infos[2].shape[..]));
                index::select((cond, shape), a, b, out, y);
                Ok(())
            })?
        }
    };
    Ok(done.then(|| vec![y]))
}

/// Runs one op, fast where a fast version exists; large loops run on `pool`,
/// small ones on the calling thread.
pub fn execute(
    pool: &ThreadPool,
    op: &Op,
    inputs: &[Tensor],
    ctx: &mut ExecContext,
) -> Result<Vec<Tensor>, ExecutionError> {
    if let Some(outs) = index_op(op, inputs, ctx)? {
        return Ok(outs);
    }
    if op.is_index_op() || inputs.iter().any(|t| t.as_i64().is_some()) {
        return reference::execute(op, inputs);
    }
    let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
    let outs = op.infer(&infos)?;
    crate::backend::alloc::check_host_room("cpu", &outs)?;
    let name = op.name();
    let read = |i: usize| inputs[i].read_f32(name);
    let shape0 = outs[0].shape.as_slice();
    let one = |t: Tensor| Ok(vec![t]);
    if let Some(args) = reference::image::Conv2dArgs::of(op, &infos, &outs) {
        let x = read(0)?;
        let b = inputs.get(2).map(|_| read(2)).transpose()?;
        let transposed = matches!(op, Op::ConvTranspose2d { .. });
        #[cfg(target_arch = "x86_64")]
        if let Some(p) = conv_narrow::packed_kernel(&args, &inputs[1]).filter(|_| !transposed) {
            return one(ctx.tensor_with(shape0, false, |y| {
                conv_narrow::conv1d(pool, &args, &x, &p, None, b.as_deref(), [None, None], y);
                Ok(())
            })?);
        }
        let w = read(1)?;
        let kernel = if transposed {
            image::conv_transpose2d
        } else {
            image::conv2d
        };
        return one(ctx.tensor_with(shape0, false, |y| {
            kernel(pool, &args, &x, &w, b.as_deref(), y);
            Ok(())
        })?);
    }
    match op {
        Op::Matmul => one(linear::matmul(
            pool, &inputs[0], &inputs[1], None, shape0, ctx,
        )?),
        Op::AvgPool2d {
            kernel,
            stride,
            pads,
            count_include_pad,
        } => {
            let x = read(0)?;
            let window = image::Window {
                kernel: *kernel,
                stride: *stride,
                pads: *pads,
                count_include_pad: *count_include_pad,
            };
            one(ctx.tensor_with(shape0, false, |y| {
                image::avg_pool2d(pool, &x, &infos[0].shape, &window, shape0, y);
                Ok(())
            })?)
        }
        Op::Embed => {
            let ids = inputs[0]
                .as_i32()
                .ok_or_else(|| reference::not_host(&inputs[0], name))?;
            one(linear::embed(ids, &inputs[1], shape0, ctx)?)
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let (a_shape, b_shape) = (&infos[0].shape, &infos[1].shape);
            // `a` keeps its shape and `b` is a trailing part of it; `a + b` with
            // `b` the larger one swaps roles only for the commutative ops.
            let suffix = |big: &[usize], small: &[usize]| {
                small.len() <= big.len()
                    && big[big.len() - small.len()..] == *small
                    && broadcast_shape(big, small).as_deref() == Some(big)
            };
            let (a, b) = (read(0)?, read(1)?);
            if suffix(a_shape, b_shape) {
                one(ctx.tensor_with(shape0, false, |y| {
                    elementwise::binary_suffix(pool, op, &a, &b, y);
                    Ok(())
                })?)
            } else if matches!(op, Op::Add | Op::Mul) && suffix(b_shape, a_shape) {
                one(ctx.tensor_with(shape0, false, |y| {
                    elementwise::binary_suffix(pool, op, &b, &a, y);
                    Ok(())
                })?)
            } else {
                one(ctx.tensor_with(shape0, false, |y| {
                    elementwise::broadcast_binary(
                        pool,
                        op,
                        (&a, a_shape),
                        (&b, b_shape),
                        shape0,
                        y,
                    );
                    Ok(())
                })?)
            }
        }
        Op::BatchMatmul => {
            let (a, b) = (read(0)?, read(1)?);
            one(ctx.tensor_with(shape0, false, |y| {
                image::batch_matmul(
                    pool,
                    (&a, &infos[0].shape),
                    (&b, &infos[1].shape),
                    shape0,
                    y,
                );
                Ok(())
            })?)
        }
        Op::GroupNorm { groups, eps } => {
            let (x, g, b) = (read(0)?, read(1)?, read(2)?);
            let args = image::GroupNormArgs {
                shape: &infos[0].shape,
                gain: &g,
                bias: &b,
                groups: *groups,
                eps: *eps,
                affine: None,
                modulation: None,
                act: None,
            };
            one(ctx.tensor_with(shape0, false, |y| {
                image::group_norm(pool, &x, &args, y);
                Ok(())
            })?)
        }
        Op::GroupNormAffine { groups, eps } => one(fused_group_norm(
            pool, inputs, &infos, *groups, *eps, None, ctx,
        )?),
        Op::FusedGroupNorm { groups, eps, act } => one(fused_group_norm(
            pool,
            inputs,
            &infos,
            *groups,
            *eps,
            act.as_deref(),
            ctx,
        )?),
        Op::Concat { axis } => {
            let parts = (0..inputs.len()).map(read).collect::<Result<Vec<_>, _>>()?;
            let slices: Vec<(&[f32], &[usize])> = parts
                .iter()
                .zip(&infos)
                .map(|(p, i)| (&**p, i.shape.as_slice()))
                .collect();
            one(ctx.tensor_with(shape0, false, |y| {
                image::concat(pool, &slices, *axis, y);
                Ok(())
            })?)
        }
        Op::Permute(perm) => {
            let x = read(0)?;
            one(ctx.tensor_with(shape0, false, |y| {
                image::permute(pool, &x, &infos[0].shape, perm, y);
                Ok(())
            })?)
        }
        op if op.is_unary_map() => {
            let x = read(0)?;
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::unary(pool, op, &x, y);
                Ok(())
            })?)
        }
        Op::SwiGlu | Op::GeGlu => {
            let (g, u) = (read(0)?, read(1)?);
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::glu(pool, *op == Op::GeGlu, &g, &u, y);
                Ok(())
            })?)
        }
        Op::Softmax => {
            let x = read(0)?;
            let d = shape0.last().copied().unwrap_or(1);
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::softmax(pool, &x, d, y);
                Ok(())
            })?)
        }
        Op::Reshape(shape) => one(inputs[0].reshaped(shape)?),
        Op::RmsNorm { eps, add_one } => {
            let (x, g) = (read(0)?, read(1)?);
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::rms_norm(pool, &x, &g, *eps, *add_one, y);
                Ok(())
            })?)
        }
        Op::LayerNorm { eps } => {
            let (x, g) = (read(0)?, read(1)?);
            let b = if inputs.len() == 3 {
                Some(read(2)?)
            } else {
                None
            };
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::layer_norm(pool, &x, &g, b.as_deref(), *eps, y);
                Ok(())
            })?)
        }
        Op::Rope {
            style,
            rot_dim,
            pos,
            base,
        } => {
            let x = read(0)?;
            let cache = if inputs.len() == 3 {
                Some((read(1)?, read(2)?))
            } else {
                None
            };
            let args = attention::RopeArgs {
                style: *style,
                rot: *rot_dim,
                pos: *pos,
                base: *base,
                cache: cache.as_ref().map(|(c, s)| (&**c, &**s)),
            };
            one(ctx.tensor_with(shape0, false, |y| {
                y.copy_from_slice(&x);
                attention::rope(pool, y, shape0[1], shape0[2], &args);
                Ok(())
            })?)
        }
        Op::Sdpa {
            scale,
            mask,
            q_pos,
            kv_len,
        } => {
            let (q, k, v) = (read(0)?, read(1)?, read(2)?);
            let d = infos[0].shape[2];
            let args = attention::SdpaArgs {
                heads: infos[0].shape[1],
                kv_heads: infos[1].shape[1],
                d,
                dv: infos[2].shape[2],
                scale: scale.unwrap_or(1.0 / (d as f32).sqrt()),
                mask,
                q_pos: *q_pos,
                kv_len: kv_len.unwrap_or(infos[1].shape[0]),
            };
            let blocked = attention_block::applies(&args, infos[0].shape[0]);
            one(ctx.tensor_with(shape0, false, |y| {
                if blocked {
                    attention_block::sdpa(pool, &args, &q, &k, &v, y);
                } else {
                    attention::sdpa(pool, &args, &q, &k, &v, y);
                }
                Ok(())
            })?)
        }
        Op::MatmulBias { act } => {
            let b = read(2)?;
            let finish =
                |_: usize, rows: &mut [f32]| elementwise::bias_act(rows, &b, act.as_deref());
            let y = linear::matmul(pool, &inputs[0], &inputs[1], Some(&finish), shape0, ctx)?;
            one(y)
        }
        Op::FusedLinearAddNorm { eps } => {
            let (bias, residual) = (read(2)?, read(3)?);
            let (g, beta) = (read(4)?, read(5)?);
            let args = elementwise::AddNorm {
                bias: &bias,
                residual: &residual,
                g: &g,
                beta: &beta,
                eps: *eps,
            };
            let finish = |first: usize, rows: &mut [f32]| {
                elementwise::bias_add_norm(first, rows, &args);
            };
            let y = linear::matmul(pool, &inputs[0], &inputs[1], Some(&finish), shape0, ctx)?;
            one(y)
        }
        Op::FusedConvAdd {
            conv,
            leaky,
            second,
        } => {
            let at = 1 + usize::from(*second);
            if *second && infos[1].shape != infos[0].shape {
                // A broadcast second addend: the fused sum with `r`, then `Add`.
                let first = Op::FusedConvAdd {
                    conv: conv.clone(),
                    leaky: *leaky,
                    second: false,
                };
                let mut parts = vec![inputs[0].clone()];
                parts.extend_from_slice(&inputs[at..]);
                let y = execute(pool, &first, &parts, ctx)?.remove(0);
                return execute(pool, &Op::Add, &[y, inputs[1].clone()], ctx);
            }
            let conv_outs = conv.infer(&infos[at..])?;
            let Some(args) = reference::image::Conv2dArgs::of(conv, &infos[at..], &conv_outs)
            else {
                return reference::execute(op, inputs);
            };
            let (r, x) = (read(0)?, read(at)?);
            let s = second.then(|| read(1)).transpose()?;
            let b = inputs.get(at + 2).map(|_| read(at + 2)).transpose()?;
            #[cfg(target_arch = "x86_64")]
            if let Some(p) = conv_narrow::packed_kernel(&args, &inputs[at + 1]) {
                return one(ctx.tensor_with(shape0, false, |y| {
                    let addends = [Some(&r[..]), s.as_deref()];
                    conv_narrow::conv1d(pool, &args, &x, &p, *leaky, b.as_deref(), addends, y);
                    Ok(())
                })?);
            }
            let w = read(at + 1)?;
            one(ctx.tensor_with(shape0, false, |y| {
                let (b, s) = (b.as_deref(), s.as_deref());
                image::conv2d_add(pool, &args, [&x, &w], *leaky, b, &r, s, y);
                Ok(())
            })?)
        }
        Op::FusedAttention => {
            let (q, kt, v) = (read(0)?, read(1)?, read(2)?);
            let (qs, vs) = (&infos[0].shape, &infos[2].shape);
            let r = qs.len();
            let dims = [
                qs[..r - 2].iter().product(),
                qs[r - 2],
                qs[r - 1],
                vs[r - 2],
                vs[r - 1],
            ];
            one(ctx.tensor_with(shape0, false, |y| {
                attention_block::fused_attention(pool, dims, &q, &kt, &v, y);
                Ok(())
            })?)
        }
        Op::SdpaBatch { scale, lengths } => {
            let (q, k, v) = (read(0)?, read(1)?, read(2)?);
            let d = infos[0].shape[2];
            let unmasked = Mask::None;
            let rows = infos[0].shape[0] / lengths.len();
            let args = attention::SdpaArgs {
                heads: infos[0].shape[1],
                kv_heads: infos[1].shape[1],
                d,
                dv: infos[2].shape[2],
                scale: scale.unwrap_or(1.0 / (d as f32).sqrt()),
                mask: &unmasked,
                q_pos: 0,
                kv_len: 0,
            };
            one(ctx.tensor_with(shape0, false, |y| {
                attention_block::sdpa_batch(pool, &args, rows, lengths, &q, &k, &v, y);
                Ok(())
            })?)
        }
        Op::FusedNormMatmul { eps, add_one } => {
            let (x, g) = (read(0)?, read(1)?);
            let mut h = vec![0.0; x.len()];
            elementwise::rms_norm(pool, &x, &g, *eps, *add_one, &mut h);
            one(linear::matmul_values(
                pool, &h, &inputs[2], None, shape0, ctx,
            )?)
        }
        Op::FusedSkipNorm { eps, add_one } => {
            let (x, s, g) = (read(0)?, read(1)?, read(2)?);
            let sum = ctx.tensor_with(shape0, false, |y| {
                elementwise::binary_suffix(pool, &Op::Add, &x, &s, y);
                Ok(())
            })?;
            let normed = {
                let sv = sum.as_f32().unwrap_or(&[]);
                ctx.tensor_with(shape0, false, |y| {
                    elementwise::rms_norm(pool, sv, &g, *eps, *add_one, y);
                    Ok(())
                })?
            };
            Ok(vec![normed, sum])
        }
        Op::FusedSwiGlu => {
            let x = read(0)?;
            let g = linear::matmul_values(pool, &x, &inputs[1], None, shape0, ctx)?;
            let u = linear::matmul_values(pool, &x, &inputs[2], None, shape0, ctx)?;
            let (gv, uv) = (g.as_f32().unwrap_or(&[]), u.as_f32().unwrap_or(&[]));
            one(ctx.tensor_with(shape0, false, |y| {
                elementwise::glu(pool, false, gv, uv, y);
                Ok(())
            })?)
        }
        Op::FusedQkv => {
            let x = read(0)?;
            (1..4)
                .map(|i| linear::matmul_values(pool, &x, &inputs[i], None, &outs[i - 1].shape, ctx))
                .collect()
        }
        Op::FusedRopeAppend { pos, .. } => {
            // The fast rope of q and of k, then the append (as the three ops).
            let rope = op
                .rope_part()
                .ok_or_else(|| reference::not_host(&inputs[0], name))?;
            let tables = [inputs[3].clone(), inputs[4].clone()];
            let mut rotated = Vec::with_capacity(2);
            for x in &inputs[..2] {
                let args = [x.clone(), tables[0].clone(), tables[1].clone()];
                rotated.extend(execute(pool, &rope, &args, ctx)?);
            }
            let [q, k] = <[Tensor; 2]>::try_from(rotated)
                .map_err(|_| reference::not_host(&inputs[0], name))?;
            let append = [inputs[5].clone(), inputs[6].clone(), k, inputs[2].clone()];
            let caches = execute(pool, &Op::KvAppend { pos: *pos }, &append, ctx)?;
            Ok(std::iter::once(q).chain(caches).collect())
        }
        Op::Lstm(spec) => {
            let gemm = |x: &[f32], k: usize, w: &[f32], n: usize, y: &mut [f32]| {
                linear::matmul_into(pool, x, k, &linear::Weight::F32(w), n, y)
            };
            reference::rnn::execute(spec, inputs, &outs, Some(&gemm))
        }
        _ => reference::execute(op, inputs),
    }
}

/// `GroupNormAffine`, or `FusedGroupNorm` with its activation `act` (see
/// [`Op::FusedGroupNorm`]), through [`image::group_norm`].
fn fused_group_norm(
    pool: &ThreadPool,
    inputs: &[Tensor],
    infos: &[TensorInfo],
    groups: usize,
    eps: f32,
    act: Option<&Op>,
    ctx: &mut ExecContext,
) -> Result<Tensor, ExecutionError> {
    let read = |i: usize| inputs[i].read_f32("FusedGroupNorm");
    let (x, g, b) = (read(0)?, read(1)?, read(2)?);
    let (gamma, beta) = (read(3)?, read(4)?);
    let modulation = match inputs.len() {
        7 => Some((read(5)?, read(6)?)),
        _ => None,
    };
    let shape = &infos[0].shape;
    let c = shape[1];
    let per = c / groups;
    let gain: Vec<f32> = (0..c).map(|ch| g[ch / per]).collect();
    let bias: Vec<f32> = (0..c).map(|ch| b[ch / per]).collect();
    // One entry of scale / shift serves every batch entry (the broadcast of `Mul` / `Add`).
    let step = |t: &TensorInfo| if t.shape[0] == 1 { 0 } else { c };
    let args = image::GroupNormArgs {
        shape,
        gain: &gain,
        bias: &bias,
        groups,
        eps,
        affine: Some((&gamma, &beta)),
        modulation: modulation
            .as_ref()
            .map(|(s, t)| [(&s[..], step(&infos[5])), (&t[..], step(&infos[6]))]),
        act,
    };
    ctx.tensor_with(shape, false, |y| {
        image::group_norm(pool, &x, &args, y);
        Ok(())
    })
}
