//! The graph path (`../shared/spec/graph.md`): the graph writers, the fusion
//! pass and the executor of the validated graph IR ([`crate::ir`]).
//!
//! - [`writers`]: the graph of a model of any family ([`graph_for`]), added at
//!   import and by `cyb-llm graph --emit`.
//! - [`bert`]: the BertStyle graph writer and the encoder call.
//! - [`whisper`]: the WhisperStyle graph writer (encoder and decoder) and its two calls.
//! - [`fuse`]: the fusion pass.
//! - [`exec`]: the executor, one [`exec::GraphSession`] (KV cache) per conversation.
//! - [`text`]: [`text::TextEngine`] / [`text::TextCache`], the curated-or-graph
//!   hook for the text generator.

pub mod bert;
mod bind;
pub mod exec;
pub mod fuse;
pub mod text;
pub mod whisper;
pub mod writers;

pub use exec::{GraphModel, GraphOptions, GraphSession, TextForward};
pub use writers::{emit_graph, graph_for, write_graph_section};

/// The `--path` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChoice {
    /// Curated when a family claims the model, else graph.
    Auto,
    /// Curated family code (an error when no family claims the model).
    Curated,
    /// The graph executor (an error without a graph section).
    Graph,
}

impl PathChoice {
    /// Parses `auto | curated | graph`.
    pub fn parse(s: &str) -> Option<PathChoice> {
        match s {
            "auto" => Some(PathChoice::Auto),
            "curated" => Some(PathChoice::Curated),
            "graph" => Some(PathChoice::Graph),
            _ => None,
        }
    }
}

/// Which path runs `model` for `--path` and `--backend`: a graph-only backend
/// (nox) always takes the graph path (a model without a graph section is
/// `BackendInit { backend: "nox", reason: "model has no graph section" }`, and
/// `--path curated` with it is refused); auto is curated when a family
/// exists, else graph.
pub fn resolve_path(
    model: &crate::loader::Model,
    path: PathChoice,
    backend: &crate::backend::BackendChoice,
) -> Result<crate::loader::ExecPath, crate::error::ExecutionError> {
    use crate::backend::BackendChoice;
    use crate::error::ExecutionError;
    use crate::loader::ExecPath;
    if let (BackendChoice::Named(name), true) = (backend, backend.capabilities().graph_only) {
        if model.graph.is_none() {
            return Err(ExecutionError::BackendInit {
                backend: name.clone(),
                reason: "model has no graph section".into(),
            });
        }
        if path == PathChoice::Curated {
            return Err(ExecutionError::BackendInit {
                backend: name.clone(),
                reason: format!("{name} runs only the graph path; use --path graph or auto"),
            });
        }
        return Ok(ExecPath::Graph);
    }
    let no_graph = || {
        ExecutionError::InvalidConfig {
        field: "graph".into(),
        reason: "model has no graph section (re-import without --no-graph, or run `cyb-llm graph MODEL --emit`)".into(),
    }
    };
    match (path, model.family) {
        (PathChoice::Graph, _) if model.graph.is_none() => Err(no_graph()),
        (PathChoice::Graph, _) => Ok(ExecPath::Graph),
        (PathChoice::Curated, Some(f)) | (PathChoice::Auto, Some(f)) => Ok(ExecPath::Curated(f)),
        (PathChoice::Curated, None) => Err(ExecutionError::InvalidConfig {
            field: "model_type".into(),
            reason: format!("no curated family for '{}'", model.config.model_type),
        }),
        (PathChoice::Auto, None) if model.graph.is_some() => Ok(ExecPath::Graph),
        (PathChoice::Auto, None) => Err(no_graph()),
    }
}
