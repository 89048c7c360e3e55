//! The eager sink: every op is dispatched at once, with the hand fusions.

use super::{CachedAttention, Label, QkvProjections, Residual, RopeSpec, Sink};
use crate::backend::tensor::F32Read;
use crate::backend::{Dispatcher, ExecContext, Mask, Op, Tensor};
use crate::curated::llama::LogitRows;
use crate::error::ExecutionError;
use std::fmt;

/// The KV cache of one forward: per layer, K and V `[max_ctx, Hkv, d]`; the
/// new rows go at `pos..pos + seq`.
pub(crate) struct KvRows<'a> {
    /// Keys per layer.
    pub k: &'a [Tensor],
    /// Values per layer.
    pub v: &'a [Tensor],
    /// Position of the forward's first token.
    pub pos: usize,
}

/// The KV caches of several sequences decoded together (the beams of a
/// search): per sequence, K and V `[max_ctx, H, d]` per layer (replaced by
/// what `KvAppend` returns) and the position of its first new token.
pub(crate) struct SequenceCaches<'a> {
    /// Per sequence, the `(K, V)` of each layer.
    pub layers: Vec<&'a mut [(Tensor, Tensor)]>,
    /// Per sequence, the position its rows are fed at.
    pub pos: Vec<usize>,
}

/// Dispatches each op at once on `dispatcher` (one forward of `seq` tokens).
pub(crate) struct EagerSink<'a> {
    dispatcher: &'a Dispatcher,
    ctx: &'a mut ExecContext,
    seq: usize,
    cache: Option<KvRows<'a>>,
    sequences: Option<SequenceCaches<'a>>,
    /// Rotation tables `(cos, sin)`, indexed by [`RopeSpec::table`].
    ropes: &'a [(Tensor, Tensor)],
    /// A padded batch's real tokens per sequence (the encoder's).
    lengths: &'a [usize],
}

impl<'a> EagerSink<'a> {
    /// A sink for one forward of `seq` tokens, with its KV cache and rotation
    /// tables where the family has them.
    pub(crate) fn new(
        dispatcher: &'a Dispatcher,
        ctx: &'a mut ExecContext,
        seq: usize,
        cache: Option<KvRows<'a>>,
        ropes: &'a [(Tensor, Tensor)],
    ) -> EagerSink<'a> {
        EagerSink {
            dispatcher,
            ctx,
            seq,
            cache,
            sequences: None,
            ropes,
            lengths: &[],
        }
    }

    /// The sink of a decoder forward over several sequences' caches, the
    /// forward's rows split evenly between them in order.
    pub(crate) fn with_sequences(mut self, caches: SequenceCaches<'a>) -> EagerSink<'a> {
        self.sequences = Some(caches);
        self
    }

    /// The sink of an encoder forward over a batch padded to its longest
    /// sequence, `lengths` real tokens each.
    pub(crate) fn with_lengths(mut self, lengths: &'a [usize]) -> EagerSink<'a> {
        self.lengths = lengths;
        self
    }

    fn run1(&mut self, op: &Op, inputs: &[Tensor]) -> Result<Tensor, ExecutionError> {
        self.dispatcher.run1(op, inputs, self.ctx)
    }

    fn missing(op: &Op, n: usize) -> ExecutionError {
        ExecutionError::ShapeMismatch {
            op: format!("{} (outputs)", op.name()),
            expected: vec![n],
            got: vec![0],
        }
    }
}

fn owned(inputs: &[&Tensor]) -> Vec<Tensor> {
    inputs.iter().map(|t| (*t).clone()).collect()
}

/// `x` reshaped to `[numel / prod(dims), dims...]`.
fn rows_of(x: &Tensor, dims: &[usize]) -> Result<Tensor, ExecutionError> {
    let width: usize = dims.iter().product();
    if width == 0 || !x.numel().is_multiple_of(width) {
        return Err(ExecutionError::ShapeMismatch {
            op: "reshape to rows".into(),
            expected: dims.to_vec(),
            got: x.shape().to_vec(),
        });
    }
    let mut shape = Vec::with_capacity(dims.len() + 1);
    shape.push(x.numel() / width);
    shape.extend_from_slice(dims);
    x.reshaped(&shape)
}

/// The values of `t` on the host: borrowed where they are host f32 values,
/// else decoded or downloaded.
pub(crate) fn host<'t>(t: &'t Tensor, d: &Dispatcher) -> Result<F32Read<'t>, ExecutionError> {
    match t.read_f32("download") {
        Ok(v) => Ok(v),
        Err(_) => d.primary().try_download_f32(t).map(F32Read::Owned),
    }
}

/// im2col for a kernel-3, padding-1 convolution: row `t` holds, for each input
/// channel `ch`, the inputs at `stride * t - 1 + k` for `k` in 0..3 (zeros outside),
/// laid out `[ch * 3 + k]` to match the `[Cout, Cin, 3]` weight.
fn im2col(
    out_len: usize,
    channels: usize,
    stride: usize,
    at: impl Fn(usize, usize) -> f32 + Sync,
) -> Vec<f32> {
    use rayon::prelude::*;
    let in_len = out_len * stride;
    let mut cols = vec![0.0f32; out_len * channels * 3];
    cols.par_chunks_mut(channels * 3)
        .enumerate()
        .for_each(|(t, row)| {
            for ch in 0..channels {
                for k in 0..3 {
                    let src = (stride * t + k) as isize - 1;
                    if src >= 0 && (src as usize) < in_len {
                        row[ch * 3 + k] = at(ch, src as usize);
                    }
                }
            }
        });
    cols
}

impl EagerSink<'_> {
    /// Self-attention of one sequence over its cache: appends the `k`, `v`
    /// rows at its position and attends `q` to the cache (causal).
    fn sequence_attention(
        &mut self,
        seq: usize,
        layer: usize,
        [q, k, v]: [Tensor; 3],
    ) -> Result<Tensor, ExecutionError> {
        let no_cache = || ExecutionError::InvalidConfig {
            field: "kv cache".into(),
            reason: format!("layer {layer} of sequence {seq} has no cache"),
        };
        let caches = self.sequences.as_mut().ok_or_else(no_cache)?;
        let pos = *caches.pos.get(seq).ok_or_else(no_cache)?;
        let slot = caches
            .layers
            .get_mut(seq)
            .and_then(|l| l.get_mut(layer))
            .ok_or_else(no_cache)?;
        let s = q.shape()[0];
        let (kc, vc) = slot.clone();
        let append = Op::KvAppend { pos };
        let mut kv = self.dispatcher.run(&append, &[kc, vc, k, v], self.ctx)?;
        let (Some(vc), Some(kc)) = (kv.pop(), kv.pop()) else {
            return Err(Self::missing(&append, 2));
        };
        *slot = (kc.clone(), vc.clone());
        let sdpa = Op::Sdpa {
            scale: None,
            mask: Mask::Causal,
            q_pos: pos,
            kv_len: Some(pos + s),
        };
        self.run1(&sdpa, &[q, kc, vc])
    }

    /// Rotates q and k with the table of `rope` at `pos` and appends k and v to
    /// the cache `(kc, vc)`; returns the rotated q.
    fn rope_and_append(
        &mut self,
        rope: RopeSpec,
        pos: usize,
        [q, k, v]: [Tensor; 3],
        [kc, vc]: [&Tensor; 2],
    ) -> Result<Tensor, ExecutionError> {
        let Some((cos, sin)) = self.ropes.get(rope.table) else {
            return Err(ExecutionError::InvalidConfig {
                field: "rope".into(),
                reason: format!("rotation table {} is not bound", rope.table),
            });
        };
        let fused = Op::FusedRopeAppend {
            style: rope.style,
            rot_dim: rope.rot_dim,
            pos,
        };
        let args = [q, k, v, cos.clone(), sin.clone(), kc.clone(), vc.clone()];
        rope_and_append(self.dispatcher, &fused, &args, self.ctx)
    }

    /// [`Sink::cached_attention`] over the sequences' caches (no rotation).
    fn sequences_attention(
        &mut self,
        [q, k, v]: [Tensor; 3],
        layer: usize,
    ) -> Result<Tensor, ExecutionError> {
        let groups = self.sequences.as_ref().map_or(0, |c| c.pos.len());
        if groups <= 1 {
            return self.sequence_attention(0, layer, [q, k, v]);
        }
        let split = Op::Split {
            axis: 0,
            sizes: vec![self.seq / groups; groups],
        };
        let qs = self.dispatcher.run(&split, &[q], self.ctx)?;
        let ks = self.dispatcher.run(&split, &[k], self.ctx)?;
        let vs = self.dispatcher.run(&split, &[v], self.ctx)?;
        let parts = (qs.into_iter().zip(ks).zip(vs).enumerate())
            .map(|(g, ((q, k), v))| self.sequence_attention(g, layer, [q, k, v]))
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        self.run1(&Op::Concat { axis: 0 }, &parts)
    }
}

impl Sink for EagerSink<'_> {
    type V = Tensor;

    fn section(&mut self, label: fmt::Arguments<'_>) {
        self.ctx.set_label_args(label);
    }

    fn op(&mut self, op: Op, inputs: &[&Tensor], _label: Label) -> Result<Tensor, ExecutionError> {
        self.run1(&op, &owned(inputs))
    }

    fn output(
        &mut self,
        op: Op,
        inputs: &[&Tensor],
        _name: &str,
    ) -> Result<Tensor, ExecutionError> {
        self.run1(&op, &owned(inputs))
    }

    fn rows_of(
        &mut self,
        x: Tensor,
        dims: &[usize],
        _label: Label,
    ) -> Result<Tensor, ExecutionError> {
        rows_of(&x, dims)
    }

    fn residual_norm(
        &mut self,
        r: &mut Residual<Tensor>,
        norm: &Op,
        g: &Tensor,
        _label: Label,
    ) -> Result<Tensor, ExecutionError> {
        let Some(d) = r.pending.take() else {
            return self.run1(norm, &[r.h.clone(), g.clone()]);
        };
        let Op::RmsNorm { eps, add_one } = *norm else {
            return Err(ExecutionError::InvalidConfig {
                field: "residual norm".into(),
                reason: format!(
                    "{} is not RmsNorm, the only norm fused with the skip add",
                    norm.name()
                ),
            });
        };
        let skip = Op::FusedSkipNorm { eps, add_one };
        let mut out = self
            .dispatcher
            .run(&skip, &[r.h.clone(), d, g.clone()], self.ctx)?;
        let (Some(sum), Some(normed)) = (out.pop(), out.pop()) else {
            return Err(Self::missing(&skip, 2));
        };
        r.h = sum;
        Ok(normed)
    }

    fn select_rows(
        &mut self,
        r: &mut Residual<Tensor>,
        rows: LogitRows,
    ) -> Result<(), ExecutionError> {
        let s = self.seq;
        let first = rows.first_row(s);
        if first >= s {
            return Err(ExecutionError::InvalidConfig {
                field: "logit rows".into(),
                reason: format!("rows from {first} asked of a forward of {s} tokens"),
            });
        }
        if first > 0 {
            let keep = Op::Slice {
                axis: 0,
                start: first,
                end: s,
            };
            r.h = self.run1(&keep, std::slice::from_ref(&r.h))?;
            if let Some(d) = r.pending.take() {
                r.pending = Some(self.run1(&keep, &[d])?);
            }
        }
        Ok(())
    }

    fn qkv(
        &mut self,
        x: &Tensor,
        p: QkvProjections<'_, Tensor>,
    ) -> Result<[Tensor; 3], ExecutionError> {
        let QkvProjections {
            w,
            bias,
            heads,
            head_dim,
            ..
        } = p;
        let mut qkv = self.dispatcher.run(
            &Op::FusedQkv,
            &[x.clone(), w[0].clone(), w[1].clone(), w[2].clone()],
            self.ctx,
        )?;
        if let Some(bias) = bias {
            for (t, b) in qkv.iter_mut().zip(bias) {
                *t = self.run1(&Op::Add, &[t.clone(), b.clone()])?;
            }
        }
        let (Some(v), Some(k), Some(q)) = (qkv.pop(), qkv.pop(), qkv.pop()) else {
            return Err(Self::missing(&Op::FusedQkv, 3));
        };
        Ok([
            rows_of(&q, &[heads[0], head_dim])?,
            rows_of(&k, &[heads[1], head_dim])?,
            rows_of(&v, &[heads[2], head_dim])?,
        ])
    }

    fn cached_attention(
        &mut self,
        [q, k, v]: [Tensor; 3],
        rope: Option<RopeSpec>,
        attn: CachedAttention,
    ) -> Result<Tensor, ExecutionError> {
        if self.sequences.is_some() {
            if rope.is_some() {
                return Err(ExecutionError::InvalidConfig {
                    field: "rope".into(),
                    reason: "rotation over several sequences' caches is not supported".into(),
                });
            }
            return self.sequences_attention([q, k, v], attn.layer);
        }
        let no_cache = || ExecutionError::InvalidConfig {
            field: "kv cache".into(),
            reason: format!(
                "layer {} attends over a cache this forward lacks",
                attn.layer
            ),
        };
        let cache = self.cache.as_ref().ok_or_else(no_cache)?;
        let (Some(kc), Some(vc)) = (cache.k.get(attn.layer), cache.v.get(attn.layer)) else {
            return Err(no_cache());
        };
        let (kc, vc, pos) = (kc.clone(), vc.clone(), cache.pos);
        let q = match rope {
            Some(rope) => self.rope_and_append(rope, pos, [q, k, v], [&kc, &vc])?,
            None => {
                let append = [kc.clone(), vc.clone(), k, v];
                self.dispatcher
                    .run(&Op::KvAppend { pos }, &append, self.ctx)?;
                q
            }
        };
        let sdpa = Op::Sdpa {
            scale: attn.scale,
            mask: match attn.window {
                Some(w) => Mask::Sliding(w),
                None => Mask::Causal,
            },
            q_pos: pos,
            kv_len: Some(pos + self.seq),
        };
        self.run1(&sdpa, &[q, kc, vc])
    }

    fn attention(
        &mut self,
        [q, k, v]: [&Tensor; 3],
        _label: Label,
    ) -> Result<Tensor, ExecutionError> {
        let sdpa = Op::Sdpa {
            scale: None,
            mask: Mask::None,
            q_pos: 0,
            kv_len: None,
        };
        self.run1(&sdpa, &[q.clone(), k.clone(), v.clone()])
    }
    fn gated_mlp(
        &mut self,
        x: &Tensor,
        [gate, up]: [&Tensor; 2],
        act: Op,
        _layer: usize,
    ) -> Result<Tensor, ExecutionError> {
        if act == Op::Silu {
            return self.run1(&Op::FusedSwiGlu, &[x.clone(), gate.clone(), up.clone()]);
        }
        let g = self.run1(&Op::Matmul, &[x.clone(), gate.clone()])?;
        let u = self.run1(&Op::Matmul, &[x.clone(), up.clone()])?;
        let g = self.run1(&act, &[g])?;
        self.run1(&Op::Mul, &[g, u])
    }

    fn linear(
        &mut self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        act: Option<Op>,
        _label: Label,
    ) -> Result<Tensor, ExecutionError> {
        if let Some(b) = b {
            let args = [x.clone(), w.clone(), b.clone()];
            let fused = Op::MatmulBias {
                act: act.clone().map(Box::new),
            };
            if self.dispatcher.primary_supports(&fused, &args) {
                return self.run1(&fused, &args);
            }
        }
        let mut y = self.run1(&Op::Matmul, &[x.clone(), w.clone()])?;
        if let Some(b) = b {
            y = self.run1(&Op::Add, &[y, b.clone()])?;
        }
        match act {
            Some(a) => self.run1(&a, &[y]),
            None => Ok(y),
        }
    }

    fn linear_add_norm(
        &mut self,
        x: &Tensor,
        lin: [&Tensor; 2],
        h: Tensor,
        norm: [&Tensor; 2],
        eps: f32,
        label: Label,
    ) -> Result<Tensor, ExecutionError> {
        let fused = Op::FusedLinearAddNorm { eps };
        let args = [
            x.clone(),
            lin[0].clone(),
            lin[1].clone(),
            h.clone(),
            norm[0].clone(),
            norm[1].clone(),
        ];
        if self.dispatcher.primary_supports(&fused, &args) {
            return self.run1(&fused, &args);
        }
        let y = self.linear(x, lin[0], Some(lin[1]), None, label)?;
        let s = self.run1(&Op::Add, &[h, y])?;
        self.run1(
            &Op::LayerNorm { eps },
            &[s, norm[0].clone(), norm[1].clone()],
        )
    }

    fn padded_self_attention(
        &mut self,
        x: &Tensor,
        lin: [[&Tensor; 2]; 3],
        heads: usize,
        head_dim: usize,
        layer: usize,
    ) -> Result<Tensor, ExecutionError> {
        let [q, k, v] = [(lin[0], "query"), (lin[1], "key"), (lin[2], "value")]
            .map(|([w, b], part)| self.linear(x, w, Some(b), None, Label::layer(layer, part)));
        let (q, k, v) = (q?, k?, v?);
        padded_attention(self, [q, k, v], heads, head_dim)
    }

    fn position_table(&mut self, table: &Tensor, _offset: usize) -> Result<Tensor, ExecutionError> {
        Ok(table.clone())
    }

    fn named_rows_of(
        &mut self,
        x: Tensor,
        dims: &[usize],
        _name: &str,
    ) -> Result<Tensor, ExecutionError> {
        rows_of(&x, dims)
    }

    fn gather_rows(&mut self, x: &Tensor, rows: &[usize]) -> Result<Tensor, ExecutionError> {
        let (n, d) = (x.shape()[0], x.numel() / x.shape()[0].max(1));
        let xs = host(x, self.dispatcher)?;
        let mut out = Vec::with_capacity(rows.len() * d);
        for &r in rows {
            let row = xs
                .get(r * d..(r + 1) * d)
                .ok_or(ExecutionError::IndexOutOfRange {
                    op: "gather rows".into(),
                    index: r as i64,
                    len: n,
                })?;
            out.extend_from_slice(row);
        }
        Tensor::from_f32(&[rows.len(), d], out)
    }

    /// Each convolution as im2col rows on the host times the kernel matrix
    /// (`MatmulBias` with the `Gelu`), which equals `Conv1d` of ops.md.
    fn audio_conv_stem(
        &mut self,
        mel: &Tensor,
        [conv1, conv2]: [[&Tensor; 2]; 2],
    ) -> Result<Tensor, ExecutionError> {
        let (n_mels, frames) = match mel.shape() {
            &[c, t] => (c, t),
            other => {
                return Err(ExecutionError::ShapeMismatch {
                    op: "audio conv stem input [n_mels, frames]".into(),
                    expected: vec![0, 0],
                    got: other.to_vec(),
                })
            }
        };
        let d = conv1[0].shape()[0];
        let mel = host(mel, self.dispatcher)?;
        let cols = im2col(frames, n_mels, 1, |ch, t| mel[ch * frames + t]);
        let x = Tensor::from_f32(&[frames, n_mels * 3], cols)?;
        let gelu = Some(Op::Gelu);
        let x = self.linear(
            &x,
            conv1[0],
            Some(conv1[1]),
            gelu.clone(),
            Label::top("conv1"),
        )?;
        let xv = host(&x, self.dispatcher)?;
        let out_len = frames / 2;
        let cols = im2col(
            out_len,
            d,
            2,
            |ch, t| {
                if t < frames {
                    xv[t * d + ch]
                } else {
                    0.0
                }
            },
        );
        let x = Tensor::from_f32(&[out_len, d * 3], cols)?;
        self.linear(&x, conv2[0], Some(conv2[1]), gelu, Label::top("conv2"))
    }

    fn reuse_buffers(&mut self) {
        self.ctx.alloc.reset();
    }
}

/// RoPE of q and k and the KV-cache append (`args` as [`Op::FusedRopeAppend`]
/// takes them): one op where the primary backend fuses them (one GPU
/// dispatch), else rope, rope, append. Returns the rotated q.
fn rope_and_append(
    dispatcher: &Dispatcher,
    fused: &Op,
    args: &[Tensor; 7],
    ctx: &mut ExecContext,
) -> Result<Tensor, ExecutionError> {
    let (q, k, v, cos, sin, kc, vc) = (
        &args[0], &args[1], &args[2], &args[3], &args[4], &args[5], &args[6],
    );
    if dispatcher.primary_supports(fused, args) {
        return dispatcher
            .run(fused, args, ctx)?
            .into_iter()
            .next()
            .ok_or_else(|| EagerSink::missing(fused, 3));
    }
    let (Op::FusedRopeAppend { pos, .. }, Some(rope)) = (fused, fused.rope_part()) else {
        return Err(EagerSink::missing(fused, 3));
    };
    let q = dispatcher.run1(&rope, &[q.clone(), cos.clone(), sin.clone()], ctx)?;
    let k = dispatcher.run1(&rope, &[k.clone(), cos.clone(), sin.clone()], ctx)?;
    let append = [kc.clone(), vc.clone(), k, v.clone()];
    dispatcher.run(&Op::KvAppend { pos: *pos }, &append, ctx)?;
    Ok(q)
}

/// Attention of each sequence's queries over its real keys, for q, k, v
/// `[n * l, heads * head_dim]` of a batch padded to `l`: one `SdpaBatch` where
/// the primary backend has it, one `Sdpa` for a single sequence, else per
/// sequence. Keys and values are cut to the real tokens: attention over them
/// without a mask equals attention over the padded keys with a padding mask
/// (masked keys weigh exactly 0) and takes the unmasked kernels; every query
/// row, padding rows too, sees the real keys, as with the mask.
fn padded_attention(
    sink: &mut EagerSink<'_>,
    [q, k, v]: [Tensor; 3],
    heads: usize,
    hd: usize,
) -> Result<Tensor, ExecutionError> {
    let lengths = sink.lengths;
    let (n, rows) = (lengths.len(), sink.seq);
    if n == 0 || !rows.is_multiple_of(n) {
        return Err(ExecutionError::ShapeMismatch {
            op: "padded attention (rows of the batch)".into(),
            expected: vec![n],
            got: vec![rows],
        });
    }
    let l = rows / n;
    let shape = [l, heads, hd];
    let sdpa = Op::Sdpa {
        scale: None,
        mask: Mask::None,
        q_pos: 0,
        kv_len: None,
    };
    let batched = [
        q.reshaped(&[rows, heads, hd])?,
        k.reshaped(&[rows, heads, hd])?,
        v.reshaped(&[rows, heads, hd])?,
    ];
    let sdpa_batch = Op::SdpaBatch {
        scale: None,
        lengths: lengths.to_vec(),
    };
    let attn = if n > 1 && sink.dispatcher.primary_supports(&sdpa_batch, &batched) {
        sink.run1(&sdpa_batch, &batched)?
    } else if n == 1 {
        let args = [
            q.reshaped(&shape)?,
            k.reshaped(&shape)?,
            v.reshaped(&shape)?,
        ];
        sink.run1(&sdpa, &args)?
    } else {
        let kv_sizes: Vec<usize> = lengths
            .iter()
            .flat_map(|&len| [len, l - len])
            .filter(|&s| s > 0)
            .collect();
        let kv_split = Op::Split {
            axis: 0,
            sizes: kv_sizes,
        };
        // Index of each sequence's real rows among the pieces of `kv_split`.
        let kv_pieces: Vec<usize> = lengths
            .iter()
            .scan(0, |next, &len| {
                let at = *next;
                *next += if len < l { 2 } else { 1 };
                Some(at)
            })
            .collect();
        let split = Op::Split {
            axis: 0,
            sizes: vec![l; n],
        };
        let (dispatcher, ctx) = (sink.dispatcher, &mut *sink.ctx);
        let qs = dispatcher.run(&split, &[q], ctx)?;
        let ks = dispatcher.run(&kv_split, &[k], ctx)?;
        let vs = dispatcher.run(&kv_split, &[v], ctx)?;
        let mut outs = Vec::with_capacity(n);
        for ((qb, &len), &piece) in qs.iter().zip(lengths).zip(&kv_pieces) {
            let kv_shape = [len, heads, hd];
            let (Some(kp), Some(vp)) = (ks.get(piece), vs.get(piece)) else {
                return Err(EagerSink::missing(&kv_split, piece + 1));
            };
            let args = [
                qb.reshaped(&shape)?,
                kp.reshaped(&kv_shape)?,
                vp.reshaped(&kv_shape)?,
            ];
            outs.push(dispatcher.run1(&sdpa, &args, ctx)?);
        }
        dispatcher.run1(&Op::Concat { axis: 0 }, &outs, ctx)?
    };
    attn.reshaped(&[rows, heads * hd])
}

#[cfg(test)]
mod tests {
    use super::im2col;

    #[test]
    fn im2col_is_a_padded_conv_window() {
        // 1 channel, input [1, 2, 3, 4], stride 2 -> rows for t = 0, 1.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let c = im2col(2, 1, 2, |_, t| x[t]);
        assert_eq!(c, vec![0.0, 1.0, 2.0, 2.0, 3.0, 4.0]);
    }
}
