//! The curated-or-graph switch shared by every task (`run`, `chat`, `serve`,
//! `perplexity`, `bench`, `embed`, `classify`, `transcribe`; `eval`, `speak`,
//! `diffuse` and the VAD, which run graph sections only, bind through
//! [`bind_graph`]).
//!
//! `--path auto|curated|graph` ([`PathChoice`]) is turned into the code that
//! runs a model ([`ExecPath`]) by one rule, [`choose`]: a graph-only backend
//! (its [`Capabilities::graph_only`], e.g. `nox`) always takes the graph path;
//! `auto` is the curated family when one claims the model, else the graph
//! section. [`Engine::bind`] applies the rule and binds the chosen side on the
//! task's one [`Dispatcher`]: the graph executor shares its backends, it never
//! starts a second set. A task holds the [`Engine`] and matches on it where its
//! forward runs.

use crate::backend::{Backend, BackendChoice, BackendConfig, Capabilities, Dispatcher};
use crate::error::ExecutionError;
use crate::graph::{GraphModel, GraphOptions};
use crate::loader::{ExecPath, Family, Model};
use std::sync::Arc;

/// The `--path` value: which code the user asks to run the model.
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

    /// `auto`, `curated` or `graph` (as [`PathChoice::parse`] reads it).
    pub fn name(self) -> &'static str {
        match self {
            PathChoice::Auto => "auto",
            PathChoice::Curated => "curated",
            PathChoice::Graph => "graph",
        }
    }
}

/// What [`choose`] needs to know about a model: its family and whether it
/// has a graph section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPaths<'a> {
    /// The family claiming the model, if any.
    pub family: Option<Family>,
    /// The model has a `graph` section.
    pub has_graph: bool,
    /// `config.model_type`, for error messages.
    pub model_type: &'a str,
}

impl<'a> ModelPaths<'a> {
    /// The paths `model` offers.
    pub fn of(model: &'a Model) -> ModelPaths<'a> {
        ModelPaths {
            family: model.family,
            has_graph: model.graph.is_some(),
            model_type: &model.config.model_type,
        }
    }
}

fn no_graph_section() -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: "graph".into(),
        reason: "model has no graph section (re-import without --no-graph, or run \
                 `cyb-llm graph MODEL --emit`)"
            .into(),
    }
}

/// The rule of `--path`: `choice` for a model offering `paths` on a backend
/// named `backend` with capabilities `caps`. A graph-only backend takes the
/// graph path (`BackendInit` when the model has no graph section, or when
/// `--path curated` was asked); otherwise `graph` needs a graph section,
/// `curated` a family, and `auto` takes the family when there is one.
pub fn choose(
    paths: ModelPaths<'_>,
    choice: PathChoice,
    backend: &str,
    caps: Capabilities,
) -> Result<ExecPath, ExecutionError> {
    if caps.graph_only {
        if !paths.has_graph {
            return Err(ExecutionError::BackendInit {
                backend: backend.to_string(),
                reason: "model has no graph section".into(),
            });
        }
        if choice == PathChoice::Curated {
            return Err(ExecutionError::BackendInit {
                backend: backend.to_string(),
                reason: format!("{backend} runs only the graph path; use --path graph or auto"),
            });
        }
        return Ok(ExecPath::Graph);
    }
    match (choice, paths.family) {
        (PathChoice::Graph, _) if !paths.has_graph => Err(no_graph_section()),
        (PathChoice::Graph, _) => Ok(ExecPath::Graph),
        (PathChoice::Curated | PathChoice::Auto, Some(f)) => Ok(ExecPath::Curated(f)),
        (PathChoice::Curated, None) => Err(ExecutionError::InvalidConfig {
            field: "model_type".into(),
            reason: format!(
                "no curated family for '{}'; use --path graph or auto",
                paths.model_type
            ),
        }),
        (PathChoice::Auto, None) if paths.has_graph => Ok(ExecPath::Graph),
        (PathChoice::Auto, None) => Err(no_graph_section()),
    }
}

/// [`choose`] for `model` on `backend` (a dispatcher's primary).
pub fn resolve(
    model: &Model,
    choice: PathChoice,
    backend: &dyn Backend,
) -> Result<ExecPath, ExecutionError> {
    choose(
        ModelPaths::of(model),
        choice,
        backend.name(),
        backend.capabilities(),
    )
}

/// The graph side alone, for the tasks that have no curated code (`eval`,
/// `speak`, `diffuse`, the VAD): [`choose`] with `--path graph` on a new
/// dispatcher for `backend` (`threads` workers), then the graph section
/// bound on it with `graph`.
pub fn bind_graph(
    model: Arc<Model>,
    backend: BackendChoice,
    threads: usize,
    graph: GraphOptions,
) -> Result<Arc<GraphModel>, ExecutionError> {
    let dispatcher = Dispatcher::new(backend, &BackendConfig { threads })?;
    resolve(&model, PathChoice::Graph, dispatcher.primary())?;
    Ok(Arc::new(GraphModel::new(model, dispatcher, graph)?))
}

/// A model bound on the path [`choose`] picked: the curated side `C` (a
/// family binding, or a task's state on it) or the graph side `G` (by
/// default the shared [`GraphModel`]; a task may map it to its per-use
/// state, e.g. a `GraphSession`).
#[derive(Debug)]
pub enum Engine<C, G = Arc<GraphModel>> {
    /// Hand-written family code.
    Curated(C),
    /// The graph executor.
    Graph(G),
}

impl<C> Engine<C> {
    /// Resolves `choice` for `model` on `dispatcher`'s primary backend; the
    /// curated side is made by `curated(family)`, the graph side binds the
    /// graph section with `graph` on a handle to `dispatcher` (the same
    /// backends).
    pub fn bind(
        model: &Arc<Model>,
        choice: PathChoice,
        dispatcher: &Dispatcher,
        graph: GraphOptions,
        curated: impl FnOnce(Family) -> Result<C, ExecutionError>,
    ) -> Result<Engine<C>, ExecutionError> {
        match resolve(model, choice, dispatcher.primary())? {
            ExecPath::Curated(family) => Ok(Engine::Curated(curated(family)?)),
            ExecPath::Graph => Ok(Engine::Graph(Arc::new(GraphModel::new(
                model.clone(),
                dispatcher.clone(),
                graph,
            )?))),
        }
    }
}

impl<C, G> Engine<C, G> {
    /// `curated` or `graph`.
    pub fn path_name(&self) -> &'static str {
        match self {
            Engine::Curated(_) => "curated",
            Engine::Graph(_) => "graph",
        }
    }

    /// The same path with the graph side mapped by `f` (e.g. to a session).
    pub fn map_graph<H>(
        self,
        f: impl FnOnce(G) -> Result<H, ExecutionError>,
    ) -> Result<Engine<C, H>, ExecutionError> {
        match self {
            Engine::Curated(c) => Ok(Engine::Curated(c)),
            Engine::Graph(g) => Ok(Engine::Graph(f(g)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOX: Capabilities = Capabilities {
        deterministic: true,
        graph_only: true,
        widened_f32_weights: false,
        warm_up_at_load: false,
    };

    fn paths(family: Option<Family>, has_graph: bool) -> ModelPaths<'static> {
        ModelPaths {
            family,
            has_graph,
            model_type: "m",
        }
    }

    fn pick(p: ModelPaths<'_>, c: PathChoice, caps: Capabilities) -> Option<ExecPath> {
        choose(p, c, "b", caps).ok()
    }

    #[test]
    fn parse_names() {
        assert_eq!(PathChoice::parse("auto"), Some(PathChoice::Auto));
        assert_eq!(PathChoice::parse("curated"), Some(PathChoice::Curated));
        assert_eq!(PathChoice::parse("graph"), Some(PathChoice::Graph));
        assert_eq!(PathChoice::parse("Graph"), None);
        for c in [PathChoice::Auto, PathChoice::Curated, PathChoice::Graph] {
            assert_eq!(PathChoice::parse(c.name()), Some(c));
        }
    }

    #[test]
    fn auto_prefers_the_family_then_the_graph() {
        let none = Capabilities::NONE;
        let llama = Some(Family::LlamaStyle);
        let cur = Some(ExecPath::Curated(Family::LlamaStyle));
        assert_eq!(pick(paths(llama, true), PathChoice::Auto, none), cur);
        assert_eq!(pick(paths(llama, false), PathChoice::Auto, none), cur);
        assert_eq!(
            pick(paths(None, true), PathChoice::Auto, none),
            Some(ExecPath::Graph)
        );
        assert_eq!(pick(paths(None, false), PathChoice::Auto, none), None);
    }

    #[test]
    fn explicit_paths_need_what_they_run() {
        let none = Capabilities::NONE;
        let w = Some(Family::WhisperStyle);
        assert_eq!(
            pick(paths(w, true), PathChoice::Graph, none),
            Some(ExecPath::Graph)
        );
        assert_eq!(
            pick(paths(w, true), PathChoice::Curated, none),
            Some(ExecPath::Curated(Family::WhisperStyle))
        );
        match choose(paths(w, false), PathChoice::Graph, "cpu", none) {
            Err(ExecutionError::InvalidConfig { field, .. }) => assert_eq!(field, "graph"),
            other => panic!("{other:?}"),
        }
        match choose(paths(None, true), PathChoice::Curated, "cpu", none) {
            Err(ExecutionError::InvalidConfig { field, reason }) => {
                assert_eq!(field, "model_type");
                assert!(reason.contains("'m'") && reason.contains("--path graph"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_graph_only_backend_forces_the_graph() {
        let b = Some(Family::BertStyle);
        for c in [PathChoice::Auto, PathChoice::Graph] {
            assert_eq!(pick(paths(b, true), c, NOX), Some(ExecPath::Graph));
        }
        match choose(paths(b, true), PathChoice::Curated, "nox", NOX) {
            Err(ExecutionError::BackendInit { backend, reason }) => {
                assert_eq!(backend, "nox");
                assert!(reason.contains("--path graph"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        match choose(paths(b, false), PathChoice::Auto, "nox", NOX) {
            Err(ExecutionError::BackendInit { reason, .. }) => {
                assert_eq!(reason, "model has no graph section")
            }
            other => panic!("{other:?}"),
        }
    }
}
