//! LlamaStyle: the decoder-only text family of families.md.
//!
//! [`Llama::new`] binds the weights of a loaded [`Model`] (zero-copy views of
//! its mapping; norm gains and biases decoded once to f32) and precomputes the
//! RoPE caches. [`Llama::forward`] runs `seq_len >= 1` tokens at the cache's
//! current position through every layer with ops of the
//! [`Dispatcher`]: one token for decode, many for bulk prefill (its linear
//! layers are then matrix-matrix products). Biases (qwen2) and QK-norm
//! (qwen3, gemma3) are used when their tensors exist; Gemma 2/3 get sandwich
//! norms, the embedding scale, `query_pre_attn_scalar` and sliding-window
//! layers with their own RoPE base.

pub mod config;

pub use config::{Activation, LlamaConfig};

use super::WeightBinder;
use crate::backend::{Dispatcher, ExecContext, Mask, Op, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use crate::loader::Model;
use std::sync::Arc;

/// Which rows of logits [`Llama::forward`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitRows {
    /// Only the last token's row: `[1, vocab]` (generation).
    Last,
    /// One row per input token: `[seq_len, vocab]` (tests, scoring).
    All,
    /// The rows of input tokens `n..`: `[seq_len - n, vocab]` (scoring the
    /// end of a batch, as perplexity does); `n` must be below `seq_len`.
    From(usize),
}

impl LogitRows {
    /// The first input row returned for a forward of `s` tokens.
    pub fn first_row(self, s: usize) -> usize {
        match self {
            LogitRows::Last => s.saturating_sub(1),
            LogitRows::All => 0,
            LogitRows::From(n) => n,
        }
    }
}

struct Layer {
    attn_label: String,
    mlp_label: String,
    input_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    bias: Option<[Tensor; 3]>,
    qk_norm: Option<[Tensor; 2]>,
    /// Sandwich: the norm of the attention output; otherwise the pre-MLP norm.
    post_attn_norm: Tensor,
    /// Sandwich only: `(pre_feedforward, post_feedforward)`.
    ff_norms: Option<[Tensor; 2]>,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    sliding: Option<usize>,
}

/// One conversation's KV cache: per layer, K and V `[max_ctx, Hkv, d]`,
/// allocated once on the primary backend; `len` rows are filled.
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    len: usize,
    max: usize,
}

impl KvCache {
    /// Filled rows (the position of the next token).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Capacity in tokens.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Forgets every cached token without freeing (ops.md `reset_kv_cache`).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` tokens (to re-run from a shared prefix).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// A LlamaStyle model bound to its weights.
pub struct Llama {
    /// Hyper-parameters.
    pub config: LlamaConfig,
    embed: Tensor,
    layers: Vec<Layer>,
    final_norm: Tensor,
    lm_head: Tensor,
    rope_global: (Tensor, Tensor),
    rope_local: Option<(Tensor, Tensor)>,
    max_ctx: usize,
}

impl Llama {
    /// Binds `model`'s weights; `ctx_size` caps the context (and sizes the
    /// RoPE caches) below `max_position_embeddings`.
    pub fn new(model: Arc<Model>, ctx_size: usize) -> Result<Llama, ExecutionError> {
        let config = LlamaConfig::from_config(&model.config)?;
        let max_ctx = ctx_size.clamp(1, config.max_positions);
        let b = WeightBinder::new(model, "LlamaStyle");
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let p = format!("model.layers.{i}");
            let w = |n: &str| b.need(&format!("{p}.{n}"), false);
            let g = |n: &str| b.need(&format!("{p}.{n}"), true);
            let opt = |n: &str| b.get(&format!("{p}.{n}"), true);
            let bias = match (
                opt("self_attn.q_proj.bias")?,
                opt("self_attn.k_proj.bias")?,
                opt("self_attn.v_proj.bias")?,
            ) {
                (Some(q), Some(k), Some(v)) => Some([q, k, v]),
                (None, None, None) => None,
                _ => {
                    return Err(ExecutionError::MissingTensor {
                        name: format!("{p}.self_attn.{{q,k,v}}_proj.bias"),
                        required_by: "LlamaStyle (all three biases or none)".into(),
                    })
                }
            };
            let qk_norm = match (
                opt("self_attn.q_norm.weight")?,
                opt("self_attn.k_norm.weight")?,
            ) {
                (Some(q), Some(k)) => Some([q, k]),
                (None, None) => None,
                _ => {
                    return Err(ExecutionError::MissingTensor {
                        name: format!("{p}.self_attn.{{q,k}}_norm.weight"),
                        required_by: "LlamaStyle (both QK norms or none)".into(),
                    })
                }
            };
            let ff_norms = if config.sandwich {
                Some([
                    g("pre_feedforward_layernorm.weight")?,
                    g("post_feedforward_layernorm.weight")?,
                ])
            } else {
                None
            };
            layers.push(Layer {
                attn_label: format!("layer {i} attention"),
                mlp_label: format!("layer {i} mlp"),
                input_norm: g("input_layernorm.weight")?,
                wq: w("self_attn.q_proj.weight")?,
                wk: w("self_attn.k_proj.weight")?,
                wv: w("self_attn.v_proj.weight")?,
                wo: w("self_attn.o_proj.weight")?,
                bias,
                qk_norm,
                post_attn_norm: g("post_attention_layernorm.weight")?,
                ff_norms,
                gate: w("mlp.gate_proj.weight")?,
                up: w("mlp.up_proj.weight")?,
                down: w("mlp.down_proj.weight")?,
                sliding: config.sliding[i],
            });
        }
        let embed = b.need("model.embed_tokens.weight", false)?;
        let lm_head = match b.get("lm_head.weight", false)? {
            Some(t) => t,
            None => embed.clone(),
        };
        let rope_global = crate::backend::rope_cache(max_ctx, &config.inv_freq_global)?;
        let rope_local = if config.inv_freq_local != config.inv_freq_global {
            Some(crate::backend::rope_cache(max_ctx, &config.inv_freq_local)?)
        } else {
            None
        };
        Ok(Llama {
            final_norm: b.need("model.norm.weight", true)?,
            embed,
            lm_head,
            layers,
            rope_global,
            rope_local,
            max_ctx,
            config,
        })
    }

    /// The context size this model was bound for.
    pub fn max_ctx(&self) -> usize {
        self.max_ctx
    }

    /// A fresh KV cache of `max_ctx` tokens on `dispatcher`'s primary backend.
    pub fn new_cache(&self, dispatcher: &Dispatcher) -> Result<KvCache, ExecutionError> {
        let c = &self.config;
        let shape = [self.max_ctx, c.kv_heads, c.head_dim];
        let backend = dispatcher.primary();
        let mut k = Vec::with_capacity(c.layers);
        let mut v = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            k.push(backend.alloc(&shape, DType::F32)?);
            v.push(backend.alloc(&shape, DType::F32)?);
        }
        Ok(KvCache {
            k,
            v,
            len: 0,
            max: self.max_ctx,
        })
    }

    /// Runs `ids` (at positions `cache.len()..`) through the model, appends
    /// their keys and values to `cache`, and returns the logits of `rows`.
    /// Appending past the cache is `ContextOverflow` (nothing is run).
    ///
    /// The whole forward runs on the cpu worker pool ([`Dispatcher::install`]):
    /// the ops' parallel loops then start from a worker instead of handing
    /// every op over to the pool.
    pub fn forward(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        cache: &mut KvCache,
        ids: &[u32],
        rows: LogitRows,
    ) -> Result<Tensor, ExecutionError> {
        dispatcher.install(|| self.forward_on_pool(dispatcher, ctx, cache, ids, rows))
    }

    fn forward_on_pool(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        cache: &mut KvCache,
        ids: &[u32],
        rows: LogitRows,
    ) -> Result<Tensor, ExecutionError> {
        let c = &self.config;
        let s = ids.len();
        let pos = cache.len;
        if s == 0 {
            return Err(ExecutionError::ShapeMismatch {
                op: "LlamaStyle forward (token count)".into(),
                expected: vec![1],
                got: vec![0],
            });
        }
        if pos + s > cache.max {
            return Err(ExecutionError::ContextOverflow {
                max: cache.max,
                requested: pos + s,
            });
        }
        ctx.begin_forward();
        ctx.set_label("embed");
        let ids_t = Tensor::from_i32(&[s], ids.iter().map(|&i| i as i32).collect())?;
        let run1 =
            |op: &Op, inputs: &[Tensor], ctx: &mut ExecContext| dispatcher.run1(op, inputs, ctx);
        let mut h = run1(&Op::Embed, &[ids_t, self.embed.clone()], ctx)?;
        if let Some(scale) = c.embed_scale {
            h = run1(&Op::Scale(scale), &[h], ctx)?;
        }
        let norm = Op::RmsNorm {
            eps: c.eps,
            add_one: false,
        };
        let skip_norm = Op::FusedSkipNorm {
            eps: c.eps,
            add_one: false,
        };
        // `h + pending` is the residual stream; the add is fused into the next norm.
        let mut pending: Option<Tensor> = None;
        let add_norm = |h: &mut Tensor,
                        pending: &mut Option<Tensor>,
                        g: &Tensor,
                        ctx: &mut ExecContext|
         -> Result<Tensor, ExecutionError> {
            match pending.take() {
                None => run1(&norm, &[h.clone(), g.clone()], ctx),
                Some(d) => {
                    let mut out = dispatcher.run(&skip_norm, &[h.clone(), d, g.clone()], ctx)?;
                    let (normed, sum) = match (out.pop(), out.pop()) {
                        (Some(sum), Some(normed)) => (normed, sum),
                        _ => {
                            return Err(ExecutionError::ShapeMismatch {
                                op: "FusedSkipNorm (outputs)".into(),
                                expected: vec![2],
                                got: vec![0],
                            })
                        }
                    };
                    *h = sum;
                    Ok(normed)
                }
            }
        };
        let (hd, nh, nkv) = (c.head_dim, c.heads, c.kv_heads);
        for (li, layer) in self.layers.iter().enumerate() {
            ctx.set_label(&layer.attn_label);
            let a = add_norm(&mut h, &mut pending, &layer.input_norm, ctx)?;
            let mut qkv = dispatcher.run(
                &Op::FusedQkv,
                &[a, layer.wq.clone(), layer.wk.clone(), layer.wv.clone()],
                ctx,
            )?;
            if let Some(bias) = &layer.bias {
                for (t, b) in qkv.iter_mut().zip(bias) {
                    *t = run1(&Op::Add, &[t.clone(), b.clone()], ctx)?;
                }
            }
            let (Some(v), Some(k), Some(q)) = (qkv.pop(), qkv.pop(), qkv.pop()) else {
                return Err(ExecutionError::ShapeMismatch {
                    op: "FusedQkv (outputs)".into(),
                    expected: vec![3],
                    got: vec![0],
                });
            };
            let mut q = q.reshaped(&[s, nh, hd])?;
            let mut k = k.reshaped(&[s, nkv, hd])?;
            let v = v.reshaped(&[s, nkv, hd])?;
            if let Some([qn, kn]) = &layer.qk_norm {
                q = run1(&norm, &[q, qn.clone()], ctx)?;
                k = run1(&norm, &[k, kn.clone()], ctx)?;
            }
            let (cos, sin) = match (layer.sliding, &self.rope_local) {
                (Some(_), Some(local)) => local,
                _ => &self.rope_global,
            };
            let fused = Op::FusedRopeAppend {
                style: c.rope_style,
                rot_dim: c.rot_dim,
                pos,
            };
            let (kc, vc) = (cache.k[li].clone(), cache.v[li].clone());
            let args = [q, k, v, cos.clone(), sin.clone(), kc, vc];
            q = rope_and_append(dispatcher, &fused, &args, ctx)?;
            let sdpa = Op::Sdpa {
                scale: Some(c.attn_scale),
                mask: match layer.sliding {
                    Some(w) => Mask::Sliding(w),
                    None => Mask::Causal,
                },
                q_pos: pos,
                kv_len: Some(pos + s),
            };
            let o = run1(&sdpa, &[q, cache.k[li].clone(), cache.v[li].clone()], ctx)?;
            let o = o.reshaped(&[s, nh * hd])?;
            let mut o = run1(&Op::Matmul, &[o, layer.wo.clone()], ctx)?;
            ctx.set_label(&layer.mlp_label);
            let f = match &layer.ff_norms {
                Some([pre, _]) => {
                    o = run1(&norm, &[o, layer.post_attn_norm.clone()], ctx)?;
                    pending = Some(o);
                    add_norm(&mut h, &mut pending, pre, ctx)?
                }
                None => {
                    pending = Some(o);
                    add_norm(&mut h, &mut pending, &layer.post_attn_norm, ctx)?
                }
            };
            let mut f = match c.act {
                Activation::Silu => run1(
                    &Op::FusedSwiGlu,
                    &[f, layer.gate.clone(), layer.up.clone()],
                    ctx,
                )?,
                act => {
                    let g = run1(&Op::Matmul, &[f.clone(), layer.gate.clone()], ctx)?;
                    let u = run1(&Op::Matmul, &[f, layer.up.clone()], ctx)?;
                    let g = run1(
                        if act == Activation::Gelu {
                            &Op::Gelu
                        } else {
                            &Op::GeluTanh
                        },
                        &[g],
                        ctx,
                    )?;
                    run1(&Op::Mul, &[g, u], ctx)?
                }
            };
            f = run1(&Op::Matmul, &[f, layer.down.clone()], ctx)?;
            if let Some([_, post]) = &layer.ff_norms {
                f = run1(&norm, &[f, post.clone()], ctx)?;
            }
            pending = Some(f);
        }
        ctx.set_label("output");
        let first = rows.first_row(s);
        if first >= s {
            return Err(ExecutionError::InvalidConfig {
                field: "logit rows".into(),
                reason: format!("rows from {first} asked of a forward of {s} tokens"),
            });
        }
        if first > 0 {
            let last = Op::Slice {
                axis: 0,
                start: first,
                end: s,
            };
            h = run1(&last, &[h], ctx)?;
            pending = match pending {
                Some(d) => Some(run1(&last, &[d], ctx)?),
                None => None,
            };
        }
        let x = add_norm(&mut h, &mut pending, &self.final_norm, ctx)?;
        let mut logits = run1(&Op::Matmul, &[x, self.lm_head.clone()], ctx)?;
        if let Some(cap) = c.final_softcap {
            logits = run1(&Op::Softcap(cap), &[logits], ctx)?;
        }
        cache.len = pos + s;
        Ok(logits)
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
    let missing = || ExecutionError::ShapeMismatch {
        op: format!("{} (outputs)", fused.name()),
        expected: vec![3],
        got: vec![0],
    };
    if dispatcher.primary_supports(fused, args) {
        return dispatcher
            .run(fused, args, ctx)?
            .into_iter()
            .next()
            .ok_or_else(missing);
    }
    let (Op::FusedRopeAppend { pos, .. }, Some(rope)) = (fused, fused.rope_part()) else {
        return Err(missing());
    };
    let q = dispatcher.run1(&rope, &[q.clone(), cos.clone(), sin.clone()], ctx)?;
    let k = dispatcher.run1(&rope, &[k.clone(), cos.clone(), sin.clone()], ctx)?;
    let append = [kc.clone(), vc.clone(), k, v.clone()];
    dispatcher.run(&Op::KvAppend { pos: *pos }, &append, ctx)?;
    Ok(q)
}
