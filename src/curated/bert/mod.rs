//! BertStyle: the encoder family of families.md (bert, roberta, xlm-roberta,
//! distilbert).
//!
//! [`Bert::new`] binds the weights of a loaded [`Model`] (zero-copy views of
//! its mapping; norm gains and biases decoded once to f32). [`Bert::encode`]
//! runs a batch of token sequences through the encoder with ops of the
//! [`Dispatcher`]: the batch is padded to its longest sequence (never to a
//! fixed length), the linear layers run over all `batch x longest` rows at
//! once, and attention runs per sequence with a padding mask, so padded keys
//! never contribute. Layers are post-norm:
//!
//! ```text
//! h = LayerNorm(word[ids] + position[offset + i] + token_type[0])
//! per layer: h = LayerNorm(h + Attn(h));  h = LayerNorm(h + Out(act(In(h))))
//! ```
//!
//! [`pool`] turns the final hidden states into one vector per sequence (cls,
//! mean or max over the non-padding tokens), [`l2_normalize`] normalizes it,
//! and [`Bert::classify`] runs the classification head on the first token:
//! BERT's `pooler` (tanh) then `classifier`, RoBERTa's `classifier.dense`
//! (tanh) then `classifier.out_proj`, or DistilBERT's `pre_classifier` (ReLU)
//! then `classifier`. DistilBERT keeps its own tensor names
//! (`transformer.layer.N.attention.q_lin`, ...) and has no token types.

pub mod config;
mod pool;

pub use crate::loader::bert_names::{layer_names, Variant};
pub use config::{Activation, BertConfig, Pooling, ProblemType};
pub use pool::{l2_normalize, pool};

use super::{Linear, WeightBinder};
use crate::backend::{Dispatcher, ExecContext, Mask, Op, Tensor};
use crate::error::ExecutionError;
use crate::loader::Model;
use std::sync::Arc;

/// The final hidden states of a batch: `[batch, longest, hidden]` host f32,
/// right-padded; row `b` holds `lengths[b]` real tokens.
#[derive(Debug, Clone)]
pub struct Hidden {
    /// `[batch, longest, hidden]`, host f32.
    pub states: Tensor,
    /// Real (non-padding) tokens per sequence.
    pub lengths: Vec<usize>,
}

impl Hidden {
    /// Sequences in the batch.
    pub fn batch(&self) -> usize {
        self.lengths.len()
    }

    /// Padded length (the longest sequence).
    pub fn longest(&self) -> usize {
        self.states.shape().get(1).copied().unwrap_or(0)
    }

    /// Width of one state.
    pub fn hidden(&self) -> usize {
        self.states.shape().get(2).copied().unwrap_or(0)
    }

    /// The padding mask, `[batch * longest]`: `true` for real tokens.
    pub fn mask(&self) -> Vec<bool> {
        let l = self.longest();
        self.lengths
            .iter()
            .flat_map(|&n| (0..l).map(move |i| i < n))
            .collect()
    }

    /// The state of token `i` of sequence `b` (padding rows included).
    pub fn token(&self, b: usize, i: usize) -> Option<&[f32]> {
        let (l, d) = (self.longest(), self.hidden());
        if b >= self.batch() || i >= l {
            return None;
        }
        let start = (b * l + i) * d;
        self.states.as_f32()?.get(start..start + d)
    }
}

/// LayerNorm gain and bias (f32).
struct Norm {
    g: Tensor,
    b: Tensor,
}

struct Layer {
    attn_label: String,
    mlp_label: String,
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    inter: Linear,
    out: Linear,
    out_norm: Norm,
}

/// The classification head on the first token's state.
enum Head {
    /// BERT: optional `pooler.dense` (tanh), then `classifier`.
    Bert {
        pooler: Option<Linear>,
        classifier: Linear,
    },
    /// RoBERTa: `classifier.dense` (tanh), then `classifier.out_proj`.
    Roberta { dense: Linear, out_proj: Linear },
    /// DistilBERT: `pre_classifier` (ReLU), then `classifier`.
    Distil { pre: Linear, classifier: Linear },
}

/// BertStyle's composite weights: linear layers with a bias, LayerNorms.
trait BertWeights {
    fn linear(&self, prefix: &str) -> Result<Linear, ExecutionError>;
    fn linear_opt(&self, prefix: &str) -> Result<Option<Linear>, ExecutionError>;
    fn norm(&self, prefix: &str) -> Result<Norm, ExecutionError>;
}

impl BertWeights for WeightBinder {
    fn linear(&self, prefix: &str) -> Result<Linear, ExecutionError> {
        Ok(Linear {
            w: self.need(&format!("{prefix}.weight"), false)?,
            b: Some(self.need(&format!("{prefix}.bias"), true)?),
        })
    }

    fn linear_opt(&self, prefix: &str) -> Result<Option<Linear>, ExecutionError> {
        if !self.has(&format!("{prefix}.weight")) {
            return Ok(None);
        }
        self.linear(prefix).map(Some)
    }

    fn norm(&self, prefix: &str) -> Result<Norm, ExecutionError> {
        Ok(Norm {
            g: self.need(&format!("{prefix}.weight"), true)?,
            b: self.need(&format!("{prefix}.bias"), true)?,
        })
    }
}

/// A BertStyle model bound to its weights.
pub struct Bert {
    /// Hyper-parameters and defaults.
    pub config: BertConfig,
    word: Tensor,
    position: Tensor,
    token_type: Option<Tensor>,
    embed_norm: Norm,
    layers: Vec<Layer>,
    head: Option<Head>,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("config", &self.config)
            .field("classifier", &self.head.is_some())
            .finish()
    }
}

impl Bert {
    /// Binds `model`'s weights (the classification head too, when present).
    pub fn new(model: Arc<Model>) -> Result<Bert, ExecutionError> {
        let config = BertConfig::from_config(&model.config)?;
        let b = WeightBinder::new(model, "BertStyle");
        let (stack, [q, k, v, o, on, fi, fo, fon]) = layer_names(config.variant);
        let layers = (0..config.layers)
            .map(|i| {
                let p = format!("{stack}.{i}");
                Ok(Layer {
                    attn_label: format!("layer {i} attention"),
                    mlp_label: format!("layer {i} mlp"),
                    query: b.linear(&format!("{p}.{q}"))?,
                    key: b.linear(&format!("{p}.{k}"))?,
                    value: b.linear(&format!("{p}.{v}"))?,
                    attn_out: b.linear(&format!("{p}.{o}"))?,
                    attn_norm: b.norm(&format!("{p}.{on}"))?,
                    inter: b.linear(&format!("{p}.{fi}"))?,
                    out: b.linear(&format!("{p}.{fo}"))?,
                    out_norm: b.norm(&format!("{p}.{fon}"))?,
                })
            })
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        let head = match (
            b.linear_opt("classifier.dense")?,
            b.linear_opt("classifier.out_proj")?,
            b.linear_opt("pre_classifier")?,
        ) {
            (Some(dense), Some(out_proj), _) => Some(Head::Roberta { dense, out_proj }),
            (_, _, Some(pre)) => Some(Head::Distil {
                pre,
                classifier: b.linear("classifier")?,
            }),
            _ => match b.linear_opt("classifier")? {
                Some(classifier) => Some(Head::Bert {
                    pooler: b.linear_opt("pooler.dense")?,
                    classifier,
                }),
                None => None,
            },
        };
        Ok(Bert {
            word: b.need("embeddings.word_embeddings.weight", false)?,
            position: b.need("embeddings.position_embeddings.weight", false)?,
            token_type: b.get("embeddings.token_type_embeddings.weight", false)?,
            embed_norm: b.norm("embeddings.LayerNorm")?,
            layers,
            head,
            config,
        })
    }

    /// Number of classification outputs, `None` without a classification head.
    pub fn num_labels(&self) -> Option<usize> {
        let w = match self.head.as_ref()? {
            Head::Bert { classifier, .. } | Head::Distil { classifier, .. } => &classifier.w,
            Head::Roberta { out_proj, .. } => &out_proj.w,
        };
        w.shape().first().copied()
    }

    /// The name of class `i`: from the config's `labels`, else `LABEL_i`.
    pub fn label(&self, i: usize) -> String {
        self.config
            .labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("LABEL_{i}"))
    }

    /// Runs the encoder over `batch` (each sequence with its special tokens,
    /// at most `config.max_tokens` long) and returns the final hidden states.
    pub fn encode(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        batch: &[&[u32]],
    ) -> Result<Hidden, ExecutionError> {
        let (h, lengths) = self.forward(dispatcher, ctx, batch)?;
        let states = match h.as_f32() {
            Some(_) => h,
            None => Tensor::from_f32(h.shape(), dispatcher.primary().try_download_f32(&h)?)?,
        };
        Ok(Hidden { states, lengths })
    }

    /// Runs the encoder and the classification head over `batch`: logits
    /// `[batch, num_labels]` (host f32). A model without a head is `MissingTensor`.
    pub fn classify(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        batch: &[&[u32]],
    ) -> Result<Tensor, ExecutionError> {
        let head = self
            .head
            .as_ref()
            .ok_or_else(|| ExecutionError::MissingTensor {
                name: "classifier.weight".into(),
                required_by: format!(
                    "classify ({}): this model has no classification head; use embed",
                    self.config.model_type
                ),
            })?;
        let (h, lengths) = self.forward(dispatcher, ctx, batch)?;
        let (n, l, d) = (lengths.len(), h.shape()[1], self.config.hidden);
        ctx.set_label("classifier");
        let run1 =
            |op: &Op, inputs: &[Tensor], ctx: &mut ExecContext| dispatcher.run1(op, inputs, ctx);
        let linear = |x: &Tensor, lin: &Linear, act: Option<&Op>, ctx: &mut ExecContext| {
            lin.apply(dispatcher, x, act, ctx)
        };
        let first = if l == 1 {
            h
        } else {
            let op = Op::Slice {
                axis: 1,
                start: 0,
                end: 1,
            };
            run1(&op, &[h], ctx)?
        }
        .reshaped(&[n, d])?;
        let logits = match head {
            Head::Bert { pooler, classifier } => {
                let x = match pooler {
                    Some(p) => linear(&first, p, Some(&Op::Tanh), ctx)?,
                    None => first,
                };
                linear(&x, classifier, None, ctx)?
            }
            Head::Roberta { dense, out_proj } => {
                let y = linear(&first, dense, Some(&Op::Tanh), ctx)?;
                linear(&y, out_proj, None, ctx)?
            }
            Head::Distil { pre, classifier } => {
                let y = linear(&first, pre, Some(&Op::Relu), ctx)?;
                linear(&y, classifier, None, ctx)?
            }
        };
        match logits.as_f32() {
            Some(_) => Ok(logits),
            None => Tensor::from_f32(
                logits.shape(),
                dispatcher.primary().try_download_f32(&logits)?,
            ),
        }
    }

    /// Scores of `logits` `[batch, labels]` per `problem_type`: softmax
    /// (single label), sigmoid (multi label) or the logits (regression).
    pub fn scores(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        logits: &Tensor,
    ) -> Result<Tensor, ExecutionError> {
        let op = match self.config.problem_type {
            ProblemType::SingleLabel => Op::Softmax,
            ProblemType::MultiLabel => Op::Sigmoid,
            ProblemType::Regression => return Ok(logits.clone()),
        };
        ctx.set_label("scores");
        let s = dispatcher.run1(&op, std::slice::from_ref(logits), ctx)?;
        match s.as_f32() {
            Some(_) => Ok(s),
            None => Tensor::from_f32(s.shape(), dispatcher.primary().try_download_f32(&s)?),
        }
    }

    /// The encoder: `[batch, longest, hidden]` on the dispatcher's backends,
    /// and the sequence lengths.
    /// On the cpu worker pool ([`Dispatcher::install`]), as every family's forward.
    fn forward(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        batch: &[&[u32]],
    ) -> Result<(Tensor, Vec<usize>), ExecutionError> {
        dispatcher.install(|| self.forward_on_pool(dispatcher, ctx, batch))
    }

    fn forward_on_pool(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        batch: &[&[u32]],
    ) -> Result<(Tensor, Vec<usize>), ExecutionError> {
        let c = &self.config;
        let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        if batch.is_empty() || lengths.contains(&0) {
            return Err(ExecutionError::ShapeMismatch {
                op: "BertStyle encode (a batch of non-empty token sequences)".into(),
                expected: vec![1],
                got: vec![lengths.iter().copied().min().unwrap_or(0)],
            });
        }
        if longest > c.max_tokens {
            return Err(ExecutionError::ContextOverflow {
                max: c.max_tokens,
                requested: longest,
            });
        }
        let (n, l, d) = (batch.len(), longest, c.hidden);
        let rows = n * l;
        let mut ids = Vec::with_capacity(rows);
        let mut pos = Vec::with_capacity(rows);
        for seq in batch {
            for i in 0..l {
                match seq.get(i) {
                    Some(&id) => {
                        ids.push(i32::try_from(id).unwrap_or(i32::MAX));
                        pos.push((c.position_offset + i) as i32);
                    }
                    None => {
                        ids.push(c.pad_id as i32);
                        pos.push(c.position_offset.saturating_sub(1) as i32);
                    }
                }
            }
        }
        ctx.begin_forward();
        ctx.set_label("embeddings");
        let run1 =
            |op: &Op, inputs: &[Tensor], ctx: &mut ExecContext| dispatcher.run1(op, inputs, ctx);
        let linear = |x: &Tensor, lin: &Linear, act: Option<&Op>, ctx: &mut ExecContext| {
            lin.apply(dispatcher, x, act, ctx)
        };
        let layer_norm = Op::LayerNorm { eps: c.eps };
        // `LayerNorm(h + (x W^T + b))`, the post-norm end of a sub-block.
        let post_norm = Op::FusedLinearAddNorm { eps: c.eps };
        let linear_add_norm = |x: &Tensor, lin: &Linear, h: Tensor, norm: &Norm, ctx: &mut _| {
            if let Some(b) = &lin.b {
                let args = [
                    x.clone(),
                    lin.w.clone(),
                    b.clone(),
                    h.clone(),
                    norm.g.clone(),
                    norm.b.clone(),
                ];
                if dispatcher.primary_supports(&post_norm, &args) {
                    return run1(&post_norm, &args, ctx);
                }
            }
            let y = linear(x, lin, None, ctx)?;
            let s = run1(&Op::Add, &[h, y], ctx)?;
            run1(&layer_norm, &[s, norm.g.clone(), norm.b.clone()], ctx)
        };

        let ids = Tensor::from_i32(&[rows], ids)?;
        let pos = Tensor::from_i32(&[rows], pos)?;
        let word = run1(&Op::Embed, &[ids, self.word.clone()], ctx)?;
        let position = run1(&Op::Embed, &[pos, self.position.clone()], ctx)?;
        let mut e = run1(&Op::Add, &[word, position], ctx)?;
        if let Some(tt) = &self.token_type {
            let types = Tensor::from_i32(&[rows], vec![0; rows])?;
            let t = run1(&Op::Embed, &[types, tt.clone()], ctx)?;
            e = run1(&Op::Add, &[e, t], ctx)?;
        }
        let mut h = run1(
            &layer_norm,
            &[e, self.embed_norm.g.clone(), self.embed_norm.b.clone()],
            ctx,
        )?;

        let (heads, hd) = (c.heads, c.head_dim);
        // Keys and values of each sequence are cut to its real tokens: attention over
        // them without a mask equals attention over the padded keys with a padding mask
        // (masked keys weigh exactly 0), and takes the unmasked kernels. Every query row,
        // padding rows too, sees the real keys, as with the mask.
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
        let sdpa = Op::Sdpa {
            scale: None,
            mask: Mask::None,
            q_pos: 0,
            kv_len: None,
        };
        let sdpa_batch = Op::SdpaBatch {
            scale: None,
            lengths: lengths.clone(),
        };
        let act = match c.act {
            Activation::Gelu => Op::Gelu,
            Activation::GeluTanh => Op::GeluTanh,
            Activation::Relu => Op::Relu,
        };
        let split = Op::Split {
            axis: 0,
            sizes: vec![l; n],
        };
        for layer in &self.layers {
            // One allocator frame per layer: every layer has the same shapes, so the
            // buffers the last one released (all but `h`) serve this one, warm, instead
            // of a whole forward's worth of fresh ones per batch.
            ctx.alloc.reset();
            ctx.set_label(&layer.attn_label);
            let q = linear(&h, &layer.query, None, ctx)?;
            let k = linear(&h, &layer.key, None, ctx)?;
            let v = linear(&h, &layer.value, None, ctx)?;
            let shape = [l, heads, hd];
            let batched = [
                q.reshaped(&[rows, heads, hd])?,
                k.reshaped(&[rows, heads, hd])?,
                v.reshaped(&[rows, heads, hd])?,
            ];
            let attn = if n > 1 && dispatcher.primary_supports(&sdpa_batch, &batched) {
                run1(&sdpa_batch, &batched, ctx)?
            } else if n == 1 {
                run1(
                    &sdpa,
                    &[
                        q.reshaped(&shape)?,
                        k.reshaped(&shape)?,
                        v.reshaped(&shape)?,
                    ],
                    ctx,
                )?
            } else {
                let qs = dispatcher.run(&split, &[q], ctx)?;
                let ks = dispatcher.run(&kv_split, &[k], ctx)?;
                let vs = dispatcher.run(&kv_split, &[v], ctx)?;
                let mut outs = Vec::with_capacity(n);
                for ((qb, &len), &piece) in qs.iter().zip(&lengths).zip(&kv_pieces) {
                    let kv_shape = [len, heads, hd];
                    outs.push(run1(
                        &sdpa,
                        &[
                            qb.reshaped(&shape)?,
                            ks[piece].reshaped(&kv_shape)?,
                            vs[piece].reshaped(&kv_shape)?,
                        ],
                        ctx,
                    )?);
                }
                run1(&Op::Concat { axis: 0 }, &outs, ctx)?
            }
            .reshaped(&[rows, d])?;
            h = linear_add_norm(&attn, &layer.attn_out, h, &layer.attn_norm, ctx)?;

            ctx.set_label(&layer.mlp_label);
            let f = linear(&h, &layer.inter, Some(&act), ctx)?;
            h = linear_add_norm(&f, &layer.out, h, &layer.out_norm, ctx)?;
        }
        Ok((h.reshaped(&[n, l, d])?, lengths))
    }
}
