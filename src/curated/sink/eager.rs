//! The eager sink: every op is dispatched at once, with the hand fusions.

use super::{CachedAttention, Label, QkvProjections, Residual, RopeSpec, Sink};
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

/// Dispatches each op at once on `dispatcher` (one forward of `seq` tokens).
pub(crate) struct EagerSink<'a> {
    dispatcher: &'a Dispatcher,
    ctx: &'a mut ExecContext,
    seq: usize,
    cache: Option<KvRows<'a>>,
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
            ropes,
            lengths: &[],
        }
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
        rope: RopeSpec,
        attn: CachedAttention,
    ) -> Result<Tensor, ExecutionError> {
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
        let q = rope_and_append(self.dispatcher, &fused, &args, self.ctx)?;
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
        [w, b]: [&Tensor; 2],
        act: Option<Op>,
        _label: Label,
    ) -> Result<Tensor, ExecutionError> {
        let args = [x.clone(), w.clone(), b.clone()];
        let fused = Op::MatmulBias {
            act: act.clone().map(Box::new),
        };
        if self.dispatcher.primary_supports(&fused, &args) {
            return self.run1(&fused, &args);
        }
        let y = self.run1(&Op::Matmul, &[x.clone(), w.clone()])?;
        let y = self.run1(&Op::Add, &[y, b.clone()])?;
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
        let y = self.linear(x, lin, None, label)?;
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
        let q = self.linear(x, lin[0], None, Label::layer(layer, "query"))?;
        let k = self.linear(x, lin[1], None, Label::layer(layer, "key"))?;
        let v = self.linear(x, lin[2], None, Label::layer(layer, "value"))?;
        padded_attention(self, [q, k, v], heads, head_dim)
    }

    fn position_table(&mut self, table: &Tensor, _offset: usize) -> Result<Tensor, ExecutionError> {
        Ok(table.clone())
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
