//! The encoder API of the execution contract: texts or token ids in, hidden
//! states, pooled embeddings or classification scores out.
//!
//! ```no_run
//! use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher};
//! use cyb_llm::encode::{EmbedOptions, Encoder};
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let model = std::sync::Arc::new(cyb_llm::load("minilm.model")?);
//! let dispatcher = Dispatcher::new(BackendChoice::Auto, &BackendConfig::default())?;
//! let mut enc = Encoder::new(model, dispatcher)?;
//! let tokens = enc.tokenize(&["A man is eating food."])?.tokens;
//! let h = enc.encode(&tokens)?; // final hidden states, [batch, longest, hidden]
//! let opts = EmbedOptions::defaults(enc.bert()); // the model's pooling / normalize
//! let emb = enc.embed(&["A man is eating food."], &opts, &mut |_| {})?;
//! # let _ = (h, emb); Ok(()) }
//! ```
//!
//! Batches are sorted by token count and padded to their longest sequence
//! only; results come back in input order. Texts longer than the model's
//! maximum (`max_seq_length`, else the position table) are truncated, keeping
//! the final special token, with a warning.

pub mod input;

pub use crate::curated::bert::{l2_normalize, pool, Bert, Hidden, Pooling, ProblemType};

use crate::backend::{Dispatcher, ExecContext};
use crate::error::ExecutionError;
use crate::graph::{GraphOptions, GraphSession};
use crate::loader::{Model, Task};
use crate::path::{Engine, PathChoice};
use crate::tokenizer::Tokenizer;
use std::sync::Arc;

/// Per-text warnings printed before they are summarized.
const WARN_LIMIT: usize = 5;

/// How [`Encoder::embed`] pools and batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Pooling method.
    pub pooling: Pooling,
    /// L2-normalize each embedding.
    pub normalize: bool,
    /// Texts per forward.
    pub batch_size: usize,
}

impl EmbedOptions {
    /// The model's defaults (`pooling`, `normalize` of its config), 32 texts per batch.
    pub fn defaults(bert: &Bert) -> EmbedOptions {
        EmbedOptions {
            pooling: bert.config.pooling,
            normalize: bert.config.normalize,
            batch_size: 32,
        }
    }
}

/// Token ids of some texts, truncated to the model's maximum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokenized {
    /// Ids per text, special tokens included.
    pub tokens: Vec<Vec<u32>>,
    /// `(text index, token count before truncation)` of every truncated text.
    pub truncated: Vec<(usize, usize)>,
}

/// The classification of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// Raw logits, label-id order.
    pub logits: Vec<f32>,
    /// Softmax / sigmoid of the logits (or the logits for regression).
    pub scores: Vec<f32>,
}

/// A BertStyle model with its tokenizer and backends: the encoder API.
pub struct Encoder {
    model: Arc<Model>,
    bert: Bert,
    /// The curated path runs `bert`; the graph path a session of the graph section.
    engine: Engine<(), GraphSession>,
    tokenizer: Tokenizer,
    dispatcher: Dispatcher,
    ctx: ExecContext,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("model", &self.model)
            .field("bert", &self.bert)
            .finish()
    }
}

impl Encoder {
    /// Binds `model` (which must be a BertStyle encoder) to `dispatcher`.
    pub fn new(model: Arc<Model>, dispatcher: Dispatcher) -> Result<Encoder, ExecutionError> {
        Encoder::with_path(model, dispatcher, PathChoice::Auto)
    }

    /// [`Encoder::new`] on the execution path `path` (`--path`): the graph
    /// path runs the model's `graph` section on the executor (one sequence
    /// per graph call); `--backend nox` always takes it. Classification is
    /// curated only.
    pub fn with_path(
        model: Arc<Model>,
        dispatcher: Dispatcher,
        path: PathChoice,
    ) -> Result<Encoder, ExecutionError> {
        if model.task() != Some(Task::Encode) {
            let what = match model.family {
                Some(f) => format!("a {} model ({})", f.name(), model.commands()),
                None => format!("not handled by a curated family ({})", model.commands()),
            };
            return Err(ExecutionError::InvalidConfig {
                field: "model_type".into(),
                reason: format!(
                    "`{}` is {what}; embeddings and classification need a BertStyle encoder \
                     (bert, roberta, xlm-roberta)",
                    model.config.model_type
                ),
            });
        }
        let tokenizer = Tokenizer::from_model(&model)?;
        let bert = Bert::new(model.clone())?;
        let ctx = ExecContext::new(dispatcher.threads());
        let engine = Engine::bind(&model, path, &dispatcher, GraphOptions::default(), |_| {
            Ok(())
        })?
        .map_graph(|g| g.session())?;
        Ok(Encoder {
            model,
            bert,
            engine,
            tokenizer,
            dispatcher,
            ctx,
        })
    }

    /// The loaded model file.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The path `encode` runs on: `curated` or `graph`.
    pub fn path_name(&self) -> &'static str {
        self.engine.path_name()
    }

    /// The bound family (config, labels, raw `encode` / `classify`).
    pub fn bert(&self) -> &Bert {
        &self.bert
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The dispatcher (backends and their fallbacks).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// The execution context of the last forward (dispatch log, counts).
    pub fn context(&self) -> &ExecContext {
        &self.ctx
    }

    /// Longest input in tokens, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.bert.config.max_tokens
    }

    /// Tokenizes `texts` with their special tokens (`[CLS] .. [SEP]`);
    /// sequences longer than [`Encoder::max_tokens`] keep their first
    /// `max - 1` tokens and their final special token (as Hugging Face's
    /// truncation does), with a warning.
    pub fn tokenize<S: AsRef<str>>(&self, texts: &[S]) -> Result<Tokenized, ExecutionError> {
        use rayon::prelude::*;
        let max = self.max_tokens();
        let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        // On the worker pool, a few texts per task (the texts are independent).
        let encoded: Vec<_> = self.dispatcher.install(|| {
            texts
                .par_iter()
                .with_min_len(16)
                .map(|text| self.tokenizer.encode_with(text, true, false))
                .collect()
        });
        let mut tokens = Vec::with_capacity(texts.len());
        let mut truncated = Vec::new();
        for (i, ids) in encoded.into_iter().enumerate() {
            let mut ids = ids?;
            if ids.len() > max {
                let n = ids.len();
                let last = ids[n - 1];
                ids.truncate(max);
                ids[max - 1] = last;
                if truncated.len() < WARN_LIMIT {
                    tracing::warn!(
                        "text {}: {n} tokens, truncated to the model's maximum of {max}",
                        i + 1
                    );
                }
                truncated.push((i, n));
            }
            tokens.push(ids);
        }
        if truncated.len() > WARN_LIMIT {
            tracing::warn!(
                "{} texts in all were truncated to {max} tokens",
                truncated.len()
            );
        }
        Ok(Tokenized { tokens, truncated })
    }

    /// The contract's `model.encode(tokens)`: final hidden states of one
    /// batch (padded to its longest sequence).
    pub fn encode(&mut self, tokens: &[Vec<u32>]) -> Result<Hidden, ExecutionError> {
        let batch: Vec<&[u32]> = tokens.iter().map(Vec::as_slice).collect();
        match &mut self.engine {
            Engine::Curated(()) => self.bert.encode(&self.dispatcher, &mut self.ctx, &batch),
            Engine::Graph(session) => crate::graph::bert::encode(session, &batch),
        }
    }

    /// The contract's `model.classify(tokens)`: logits and scores of one batch.
    pub fn classify_batch(
        &mut self,
        tokens: &[Vec<u32>],
    ) -> Result<Vec<Classification>, ExecutionError> {
        if let Engine::Graph(_) = self.engine {
            return Err(ExecutionError::InvalidConfig {
                field: "path".into(),
                reason: "classification runs on the curated path only (the graph has no head)"
                    .into(),
            });
        }
        let batch: Vec<&[u32]> = tokens.iter().map(Vec::as_slice).collect();
        let logits = self
            .bert
            .classify(&self.dispatcher, &mut self.ctx, &batch)?;
        let scores = self.bert.scores(&self.dispatcher, &mut self.ctx, &logits)?;
        let labels = logits.shape().get(1).copied().unwrap_or(0).max(1);
        let rows = |t: &crate::backend::Tensor| -> Vec<Vec<f32>> {
            t.as_f32()
                .unwrap_or(&[])
                .chunks(labels)
                .map(<[f32]>::to_vec)
                .collect()
        };
        Ok(rows(&logits)
            .into_iter()
            .zip(rows(&scores))
            .map(|(logits, scores)| Classification { logits, scores })
            .collect())
    }

    /// Embeddings of `texts`, in input order. `progress` is called with the
    /// number of texts done after every batch.
    pub fn embed<S: AsRef<str>>(
        &mut self,
        texts: &[S],
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let tokens = self.tokenize(texts)?.tokens;
        self.embed_tokens(&tokens, opts, progress)
    }

    /// Embeddings of tokenized texts (see [`Encoder::tokenize`]), in input order.
    pub fn embed_tokens(
        &mut self,
        tokens: &[Vec<u32>],
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let (pooling, normalize) = (opts.pooling, opts.normalize);
        self.batched(tokens, opts.batch_size, progress, |enc, batch| {
            let h = enc.encode(batch)?;
            let mut out = pool(&h, pooling)?;
            if normalize {
                out.iter_mut().for_each(|v| l2_normalize(v));
            }
            Ok(out)
        })
    }

    /// Classifications of `texts`, in input order, `batch_size` texts per forward.
    pub fn classify<S: AsRef<str>>(
        &mut self,
        texts: &[S],
        batch_size: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Classification>, ExecutionError> {
        let tokens = self.tokenize(texts)?.tokens;
        self.classify_tokens(&tokens, batch_size, progress)
    }

    /// Classifications of tokenized texts, in input order.
    pub fn classify_tokens(
        &mut self,
        tokens: &[Vec<u32>],
        batch_size: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Classification>, ExecutionError> {
        self.batched(tokens, batch_size, progress, |enc, batch| {
            enc.classify_batch(batch)
        })
    }

    /// Runs `f` over batches of similar length (longest first) and puts the
    /// results back in input order.
    fn batched<T>(
        &mut self,
        tokens: &[Vec<u32>],
        batch_size: usize,
        progress: &mut dyn FnMut(usize),
        mut f: impl FnMut(&mut Encoder, &[Vec<u32>]) -> Result<Vec<T>, ExecutionError>,
    ) -> Result<Vec<T>, ExecutionError> {
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].len()));
        let mut out: Vec<Option<T>> = (0..tokens.len()).map(|_| None).collect();
        let mut done = 0;
        for chunk in order.chunks(batch_size.max(1)) {
            let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| tokens[i].clone()).collect();
            let results = f(self, &batch)?;
            if results.len() != chunk.len() {
                return Err(ExecutionError::ShapeMismatch {
                    op: "encoder batch (results)".into(),
                    expected: vec![chunk.len()],
                    got: vec![results.len()],
                });
            }
            for (&i, r) in chunk.iter().zip(results) {
                out[i] = Some(r);
            }
            done += chunk.len();
            progress(done);
        }
        Ok(out.into_iter().flatten().collect())
    }
}
