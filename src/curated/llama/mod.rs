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
mod forward;
mod graph;

pub use config::{Activation, LlamaConfig};
pub use graph::llama_graph;

use super::sink::{eager::KvRows, EagerSink};
use super::WeightBinder;
use crate::backend::{Dispatcher, ExecContext, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use crate::loader::Model;
use forward::LlamaWeights;
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
    weights: LlamaWeights<Tensor>,
    /// RoPE caches `(cos, sin)`: global, then local (sliding layers; the
    /// global one again when the bases agree).
    ropes: [(Tensor, Tensor); 2],
    max_ctx: usize,
}

impl Llama {
    /// Binds `model`'s weights; `ctx_size` caps the context (and sizes the
    /// RoPE caches) below `max_position_embeddings`.
    pub fn new(model: Arc<Model>, ctx_size: usize) -> Result<Llama, ExecutionError> {
        let config = LlamaConfig::from_config(&model.config)?;
        let max_ctx = ctx_size.clamp(1, config.max_positions);
        let weights = forward::bind(&config, &WeightBinder::new(model, "LlamaStyle"))?;
        let rope_global = crate::backend::rope_cache(max_ctx, &config.inv_freq_global)?;
        let rope_local = if config.inv_freq_local != config.inv_freq_global {
            crate::backend::rope_cache(max_ctx, &config.inv_freq_local)?
        } else {
            rope_global.clone()
        };
        Ok(Llama {
            weights,
            ropes: [rope_global, rope_local],
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
        let ids_t = Tensor::from_i32(&[ids.len()], ids.iter().map(|&i| i as i32).collect())?;
        self.forward_ids(dispatcher, ctx, cache, ids_t, rows)
    }

    /// [`Llama::forward`] of token ids held in a `[s]` i32 tensor, which may
    /// live on the primary backend (a greedy pick left on the device,
    /// [`crate::backend::Backend::argmax_on_device`]).
    pub fn forward_ids(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        cache: &mut KvCache,
        ids_t: Tensor,
        rows: LogitRows,
    ) -> Result<Tensor, ExecutionError> {
        let s = ids_t.numel();
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
        let logits = dispatcher.install(|| {
            ctx.begin_forward();
            let kv = KvRows {
                k: &cache.k,
                v: &cache.v,
                pos,
            };
            let mut sink = EagerSink::new(dispatcher, ctx, s, Some(kv), &self.ropes);
            forward::forward(&self.config, &self.weights, &mut sink, ids_t, rows)
        })?;
        cache.len = pos + s;
        Ok(logits)
    }
}
