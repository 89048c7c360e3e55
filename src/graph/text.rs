//! The text generator's (`crate::generate`) forward on either side of the
//! switch ([`crate::path`]): [`TextEngine`] and [`TextCache`] have the API of the curated
//! [`Llama`] and its [`KvCache`] (`new_cache`, `forward`, `max_ctx`; `len`,
//! `capacity`, `truncate`, `reset`), with a graph variant behind each. A
//! generator holding these instead of `Llama` / `KvCache` runs `--path
//! auto|curated|graph` and `--backend nox` unchanged.

use super::exec::{GraphOptions, GraphSession};
use crate::backend::{Dispatcher, ExecContext, Op, PendingId, SampleParams, Tensor};
use crate::curated::llama::{KvCache, Llama, LogitRows};
use crate::error::ExecutionError;
use crate::loader::Model;
use crate::path::{Engine, PathChoice};
use std::sync::Arc;

/// A text decoder on the curated family ([`Llama`]) or on the graph executor.
pub type TextEngine = Engine<Llama>;

/// One conversation's cache of a [`TextEngine`]: the family's KV cache, or a
/// graph session (KV state and trace chain).
pub type TextCache = Engine<KvCache, Box<GraphSession>>;

impl TextEngine {
    /// Binds `model` on the path `choice` resolves to ([`crate::path::choose`])
    /// on `dispatcher`'s backends; `graph.ctx_size` is the context of each
    /// conversation on either path.
    pub fn new(
        model: &Arc<Model>,
        choice: PathChoice,
        dispatcher: &Dispatcher,
        graph: GraphOptions,
    ) -> Result<TextEngine, ExecutionError> {
        let ctx_size = graph.ctx_size;
        Engine::bind(model, choice, dispatcher, graph, |_| {
            Llama::new(model.clone(), ctx_size)
        })
    }

    /// Context capacity of each conversation.
    pub fn max_ctx(&self) -> usize {
        match self {
            Engine::Curated(l) => l.max_ctx(),
            Engine::Graph(g) => g.max_ctx(),
        }
    }

    /// Logits per token.
    pub fn vocab(&self) -> usize {
        match self {
            Engine::Curated(l) => l.config.vocab,
            Engine::Graph(g) => {
                let graph = g.graph();
                graph
                    .outputs
                    .first()
                    .and_then(|&o| graph.values[o].shape.last().copied().flatten())
                    .unwrap_or(0)
            }
        }
    }

    /// A fresh cache on the primary backend (curated: `dispatcher`'s; graph:
    /// the one the engine was bound on).
    pub fn new_cache(&self, dispatcher: &Dispatcher) -> Result<TextCache, ExecutionError> {
        match self {
            Engine::Curated(l) => Ok(Engine::Curated(l.new_cache(dispatcher)?)),
            Engine::Graph(g) => Ok(Engine::Graph(Box::new(g.session()?))),
        }
    }

    /// Short forwards on a throwaway cache: sixteen tokens (the kernels of
    /// long prompts, where a backend tiles prompt rows), two (those of short
    /// prompts), then one (the decode kernels) and a greedy pick, so that a
    /// backend that prepares weights and kernels at first use
    /// ([`crate::backend::Capabilities::warm_up_at_load`]) does it now.
    pub fn warm_up(&self, dispatcher: &Dispatcher) -> Result<(), ExecutionError> {
        const LONG_PROMPT: usize = 16;
        let mut cache = self.new_cache(dispatcher)?;
        if cache.capacity() < 3 {
            return Ok(());
        }
        let mut ctx = ExecContext::new(dispatcher.threads());
        if cache.capacity() >= LONG_PROMPT + 3 {
            let ids = [0; LONG_PROMPT];
            self.forward(dispatcher, &mut ctx, &mut cache, &ids, LogitRows::Last)?;
        }
        self.forward(dispatcher, &mut ctx, &mut cache, &[0, 0], LogitRows::Last)?;
        let logits = self.forward(dispatcher, &mut ctx, &mut cache, &[0], LogitRows::Last)?;
        let greedy = SampleParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: 0,
            u: 0.0,
        };
        dispatcher.run1(&Op::Sample(greedy), &[logits], &mut ctx)?;
        Ok(())
    }

    /// Runs `ids` after the cached tokens (as [`Llama::forward`]). The graph
    /// path's graph returns the last row of a forward only, so more rows than
    /// the last run the tokens there one forward each (same values, slower).
    pub fn forward(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        cache: &mut TextCache,
        ids: &[u32],
        rows: LogitRows,
    ) -> Result<Tensor, ExecutionError> {
        match (self, cache) {
            (Engine::Curated(l), Engine::Curated(c)) => l.forward(dispatcher, ctx, c, ids, rows),
            (Engine::Graph(_), Engine::Graph(s)) => {
                let first = rows.first_row(ids.len());
                if first + 1 < ids.len() {
                    let mut kept = Vec::new();
                    for (i, &id) in ids.iter().enumerate() {
                        let row = s.forward_in(&[id], ctx)?;
                        if i >= first {
                            kept.extend(row);
                        }
                    }
                    let n = ids.len() - first;
                    return Tensor::from_f32(&[n, kept.len() / n], kept);
                }
                let logits = s.forward_in(ids, ctx)?;
                Tensor::from_f32(&[1, logits.len()], logits)
            }
            _ => Err(ExecutionError::InvalidConfig {
                field: "path".into(),
                reason: "a cache of one path was given to the other".into(),
            }),
        }
    }

    /// Whether [`TextEngine::forward_and_pick`] runs here (the curated path;
    /// the graph path's forward takes host ids).
    pub fn takes_id_tensors(&self) -> bool {
        matches!(self, Engine::Curated(_))
    }

    /// One token whose id is a `[1]` i32 tensor, possibly still on the
    /// device ([`Llama::forward_ids`]), then the greedy pick from its logits
    /// on the device ([`crate::backend::Backend::argmax_on_device`] of the
    /// primary backend): the logits, and the pick where the backend has one.
    pub fn forward_and_pick(
        &self,
        dispatcher: &Dispatcher,
        ctx: &mut ExecContext,
        cache: &mut TextCache,
        id: Tensor,
    ) -> Result<(Tensor, Option<(Tensor, PendingId)>), ExecutionError> {
        let logits = match (self, cache) {
            (Engine::Curated(l), Engine::Curated(c)) => {
                l.forward_ids(dispatcher, ctx, c, id, LogitRows::Last)?
            }
            _ => {
                return Err(ExecutionError::InvalidConfig {
                    field: "path".into(),
                    reason: "token ids on the device run on the curated path only".into(),
                })
            }
        };
        let pick = dispatcher.primary().argmax_on_device(&logits).transpose()?;
        Ok((logits, pick))
    }
}

impl TextCache {
    /// Filled rows (the position of the next token).
    pub fn len(&self) -> usize {
        match self {
            Engine::Curated(c) => c.len(),
            Engine::Graph(s) => s.position(),
        }
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capacity in tokens.
    pub fn capacity(&self) -> usize {
        match self {
            Engine::Curated(c) => c.capacity(),
            Engine::Graph(s) => s.capacity(),
        }
    }

    /// Forgets every cached token without freeing.
    pub fn reset(&mut self) {
        match self {
            Engine::Curated(c) => c.reset(),
            Engine::Graph(s) => s.reset(),
        }
    }

    /// Keeps the first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        match self {
            Engine::Curated(c) => c.truncate(len),
            Engine::Graph(s) => s.truncate(len),
        }
    }

    /// The execution-trace hash (hex) and node count, on the graph path with tracing on.
    pub fn trace(&self) -> Option<(String, usize)> {
        match self {
            Engine::Curated(_) => None,
            Engine::Graph(s) => s.trace(),
        }
    }
}
