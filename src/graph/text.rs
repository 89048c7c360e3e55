//! The hook that lets the text generator (`crate::generate`) drive either
//! path: [`TextEngine`] and [`TextCache`] have the API of the curated
//! [`Llama`] and its [`KvCache`] (`new_cache`, `forward`, `max_ctx`; `len`,
//! `capacity`, `truncate`, `reset`), with a graph variant behind each. A
//! generator holding these instead of `Llama` / `KvCache` runs `--path
//! auto|curated|graph` and `--backend nox` unchanged.

use super::exec::{GraphModel, GraphOptions, GraphSession};
use super::{resolve_path, PathChoice};
use crate::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext, Tensor};
use crate::curated::llama::{KvCache, Llama, LogitRows};
use crate::error::ExecutionError;
use crate::loader::{ExecPath, Model};
use std::sync::Arc;

/// How a text model is bound: the path, backend and graph options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// `--path`.
    pub path: PathChoice,
    /// `--backend`.
    pub backend: BackendChoice,
    /// `-t/--threads`.
    pub threads: usize,
    /// `-c/--ctx-size`.
    pub ctx_size: usize,
    /// Graph path: run the fusion pass (`--no-fuse` clears it).
    pub fuse: bool,
    /// Graph path: keep the execution-trace hash chain (`--trace`).
    pub trace: bool,
}

/// A text decoder on the curated family or on the graph executor.
pub enum TextEngine {
    /// The curated LlamaStyle code.
    Curated(Box<Llama>),
    /// The graph executor (its own dispatcher for `opts.backend`).
    Graph(Arc<GraphModel>),
}

/// One conversation's cache of a [`TextEngine`].
pub enum TextCache {
    /// The curated family's KV cache.
    Curated(KvCache),
    /// A graph session (KV state and trace chain).
    Graph(Box<GraphSession>),
}

impl TextEngine {
    /// Binds `model` on the path [`resolve_path`] picks for `opts`.
    pub fn new(model: Arc<Model>, opts: &EngineOptions) -> Result<TextEngine, ExecutionError> {
        match resolve_path(&model, opts.path, &opts.backend)? {
            ExecPath::Curated(_) => Ok(TextEngine::Curated(Box::new(Llama::new(
                model,
                opts.ctx_size,
            )?))),
            ExecPath::Graph => {
                let gopts = GraphOptions {
                    fuse: opts.fuse,
                    ctx_size: opts.ctx_size,
                    trace: opts.trace,
                    keep_dispatch: false,
                };
                let dispatcher = Dispatcher::new(
                    opts.backend.clone(),
                    &BackendConfig {
                        threads: opts.threads.max(1),
                    },
                )?;
                Ok(TextEngine::Graph(Arc::new(GraphModel::new(
                    model, dispatcher, gopts,
                )?)))
            }
        }
    }

    /// `curated` or `graph`.
    pub fn path_name(&self) -> &'static str {
        match self {
            TextEngine::Curated(_) => "curated",
            TextEngine::Graph(_) => "graph",
        }
    }

    /// Context capacity of each conversation.
    pub fn max_ctx(&self) -> usize {
        match self {
            TextEngine::Curated(l) => l.max_ctx(),
            TextEngine::Graph(g) => g.max_ctx(),
        }
    }

    /// Logits per token.
    pub fn vocab(&self) -> usize {
        match self {
            TextEngine::Curated(l) => l.config.vocab,
            TextEngine::Graph(g) => {
                let graph = g.graph();
                graph
                    .outputs
                    .first()
                    .and_then(|&o| graph.values[o].shape.last().copied().flatten())
                    .unwrap_or(0)
            }
        }
    }

    /// A fresh cache (curated: on `dispatcher`'s primary backend; graph: on the
    /// graph's own).
    pub fn new_cache(&self, dispatcher: &Dispatcher) -> Result<TextCache, ExecutionError> {
        match self {
            TextEngine::Curated(l) => Ok(TextCache::Curated(l.new_cache(dispatcher)?)),
            TextEngine::Graph(g) => Ok(TextCache::Graph(Box::new(g.session()?))),
        }
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
            (TextEngine::Curated(l), TextCache::Curated(c)) => {
                l.forward(dispatcher, ctx, c, ids, rows)
            }
            (TextEngine::Graph(_), TextCache::Graph(s)) => {
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
}

impl TextCache {
    /// Filled rows (the position of the next token).
    pub fn len(&self) -> usize {
        match self {
            TextCache::Curated(c) => c.len(),
            TextCache::Graph(s) => s.position(),
        }
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capacity in tokens.
    pub fn capacity(&self) -> usize {
        match self {
            TextCache::Curated(c) => c.capacity(),
            TextCache::Graph(s) => s.capacity(),
        }
    }

    /// Forgets every cached token without freeing.
    pub fn reset(&mut self) {
        match self {
            TextCache::Curated(c) => c.reset(),
            TextCache::Graph(s) => s.reset(),
        }
    }

    /// Keeps the first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        match self {
            TextCache::Curated(c) => c.truncate(len),
            TextCache::Graph(s) => s.truncate(len),
        }
    }

    /// The execution-trace hash (hex) and node count, on the graph path with tracing on.
    pub fn trace(&self) -> Option<(String, usize)> {
        match self {
            TextCache::Curated(_) => None,
            TextCache::Graph(s) => s.trace(),
        }
    }
}
