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
mod forward;
mod graph;
mod pool;

pub use crate::loader::bert_names::{layer_names, Variant};
pub use config::{Activation, BertConfig, Pooling, ProblemType};
pub use graph::bert_graph;
pub use pool::{l2_normalize, pool};

use super::sink::EagerSink;
use super::{Linear, WeightBinder};
use crate::backend::{Dispatcher, ExecContext, Op, Tensor};
use crate::error::ExecutionError;
use crate::loader::Model;
use forward::{EncoderInputs, EncoderWeights};
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

/// The classification head's linear layers (with a bias).
trait HeadWeights {
    fn linear(&self, prefix: &str) -> Result<Linear, ExecutionError>;
    fn linear_opt(&self, prefix: &str) -> Result<Option<Linear>, ExecutionError>;
}

impl HeadWeights for WeightBinder {
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
}

/// A BertStyle model bound to its weights.
pub struct Bert {
    /// Hyper-parameters and defaults.
    pub config: BertConfig,
    weights: EncoderWeights<Tensor>,
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
        let weights = forward::bind(&config, &b)?;
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
            weights,
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
        let inputs = EncoderInputs {
            tokens: Tensor::from_i32(&[rows], ids)?,
            positions: Tensor::from_i32(&[rows], pos)?,
            token_types: Tensor::from_i32(&[rows], vec![0; rows])?,
        };
        let h = dispatcher.install(|| {
            ctx.begin_forward();
            let mut sink = EagerSink::new(dispatcher, ctx, rows, None, &[]).with_lengths(&lengths);
            forward::forward(c, &self.weights, &mut sink, inputs)
        })?;
        Ok((h.reshaped(&[n, l, d])?, lengths))
    }
}
