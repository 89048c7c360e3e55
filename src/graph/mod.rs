//! The graph path (`../shared/spec/graph.md`): the IR of the `graph` section,
//! its load-time validation, the graph writers, the fusion pass and the
//! executor.
//!
//! - [`ir`]: the TOML form ([`GraphDoc`]).
//! - [`ops`]: the stable op tag table and the graph ops ([`GraphOp`]).
//! - [`Graph`]: the validated form: every name resolved to an input, a state,
//!   a weight or an earlier node's output; shapes inferred with each op's
//!   rule (`None` = a dynamic dimension); each violation is a load error
//!   naming the node id and op.
//! - [`llama`]: the graph writer of the LlamaStyle family (and [`llama::graph_for`],
//!   the writer of any family).
//! - [`bert`]: the BertStyle graph writer and the encoder call.
//! - [`whisper`]: the WhisperStyle graph writer (encoder and decoder) and its two calls.
//! - [`fuse`]: the fusion pass.
//! - [`exec`]: the executor, one [`exec::GraphSession`] (KV cache) per conversation.
//! - [`text`]: [`text::TextEngine`] / [`text::TextCache`], the curated-or-graph
//!   hook for the text generator.

pub mod bert;
mod bind;
mod build;
pub mod exec;
pub mod fuse;
pub mod ir;
pub mod llama;
pub mod ops;
pub mod text;
pub mod whisper;

pub use exec::{GraphModel, GraphOptions, GraphSession, TextForward};
pub use ir::{GraphDoc, InputDecl, NodeDecl, StateDecl};
pub use ops::{op_tag, GraphOp, MaskKind, OP_TAGS};

use crate::backend::{Op, TensorInfo};
use crate::dtype::DType;
use crate::error::LoadError;
use std::collections::HashMap;
use std::path::Path;

/// A dimension: `Some(n)` static, `None` resolved per call.
pub type Dim = Option<usize>;

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Graph input `i` (index into [`Graph::input_decls`]).
    Input(usize),
    /// State `i` (index into [`Graph::states`]).
    State(usize),
    /// A tensor of the `tensors` section.
    Weight,
    /// An output of node `i` (index into [`Graph::nodes`]).
    Node(usize),
}

/// A named value of the graph with its inferred shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// Name in the `graph` section.
    pub name: String,
    /// Producer.
    pub source: Source,
    /// Inferred dimensions.
    pub shape: Vec<Dim>,
    /// Encoding.
    pub dtype: DType,
}

/// A validated node: op and value indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Id from the `graph` section (a fused node keeps the first node's id).
    pub id: usize,
    /// The op.
    pub op: GraphOp,
    /// Input values (indices into [`Graph::values`]).
    pub inputs: Vec<usize>,
    /// Output values.
    pub outputs: Vec<usize>,
    /// Preferred backend.
    pub backend_hint: Option<String>,
}

/// A validated graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// Every value: inputs, states, weights used, node outputs.
    pub values: Vec<Value>,
    /// The input declarations, in order.
    pub input_decls: Vec<InputDecl>,
    /// The value of each input declaration.
    pub inputs: Vec<usize>,
    /// The values returned, in order.
    pub outputs: Vec<usize>,
    /// The state declarations.
    pub states: Vec<StateDecl>,
    /// Nodes in execution order.
    pub nodes: Vec<Node>,
}

/// A validation failure: node id (none for graph-level problems), op and reason.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphError {
    /// Node id.
    pub node: Option<usize>,
    /// Op name (or the graph part, e.g. `inputs`).
    pub op: String,
    /// What is wrong.
    pub reason: String,
    /// The op is unknown to this runtime.
    pub unsupported: bool,
}

impl GraphError {
    fn at(node: usize, op: &str, reason: impl Into<String>) -> Self {
        GraphError {
            node: Some(node),
            op: op.to_string(),
            reason: reason.into(),
            unsupported: false,
        }
    }

    fn graph(part: &str, reason: impl Into<String>) -> Self {
        GraphError {
            node: None,
            op: part.to_string(),
            reason: reason.into(),
            unsupported: false,
        }
    }

    /// The load error for a graph in file `path`.
    pub fn into_load_error(self, path: &Path) -> LoadError {
        match (self.unsupported, self.node) {
            (true, Some(node)) => LoadError::UnsupportedOp {
                path: path.to_path_buf(),
                node,
                op: self.op,
            },
            _ => LoadError::Graph {
                path: path.to_path_buf(),
                node: self.node,
                op: self.op,
                reason: self.reason,
            },
        }
    }
}

impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(n) = self.node {
            write!(f, "node {n} ")?;
        }
        write!(f, "{}: {}", self.op, self.reason)
    }
}

/// Two probe lengths substituted for dynamic dims: a dimension that differs
/// between the two inferences is dynamic.
const PROBES: [usize; 2] = [3, 5];

fn concrete(shape: &[Dim], probe: usize) -> Vec<usize> {
    shape.iter().map(|d| d.unwrap_or(probe)).collect()
}

/// The backend op and inputs used to infer a graph op's shapes under a probe.
fn probe_op(op: &GraphOp, infos: &[TensorInfo]) -> Result<(Op, Vec<TensorInfo>), String> {
    Ok(match op {
        GraphOp::Fixed(op) => (op.clone(), infos.to_vec()),
        GraphOp::Reshape(shape) => {
            let x = infos.first().ok_or("needs 1 input")?;
            let target = ops::reshape_target(shape, x.numel())
                .ok_or_else(|| format!("cannot reshape {:?} into {shape:?}", x.shape))?;
            (Op::Reshape(target), infos.to_vec())
        }
        GraphOp::Slice { axis, start, end } => {
            let x = infos.first().ok_or("needs 1 input")?;
            let len = *x
                .shape
                .get(*axis)
                .ok_or_else(|| format!("axis {axis} out of range for {:?}", x.shape))?;
            let (start, end) = ops::slice_range(*start, *end, len);
            let op = Op::Slice {
                axis: *axis,
                start,
                end,
            };
            (op, infos.to_vec())
        }
        GraphOp::Rope { style, rot_dim, .. } => {
            if infos.len() != 2 {
                return Err(format!("needs 2 inputs [x, pos], got {}", infos.len()));
            }
            let pos = &infos[1];
            if pos.dtype != DType::I32 || pos.numel() != 1 {
                return Err(format!(
                    "input 1 (pos) must be one i32 value, got {}{:?}",
                    pos.dtype, pos.shape
                ));
            }
            let d = infos[0].shape.last().copied().unwrap_or(0);
            let op = Op::Rope {
                style: *style,
                rot_dim: rot_dim.unwrap_or(d),
                pos: 0,
                base: 10000.0,
            };
            (op, infos[..1].to_vec())
        }
        GraphOp::Sdpa { scale, mask } => {
            let mut infos = infos.to_vec();
            let keep = if *mask == MaskKind::Padding {
                if infos.len() != 4 {
                    return Err(format!(
                        "the padding mask needs 4 inputs [q, k, v, mask], got {}",
                        infos.len()
                    ));
                }
                let m = infos
                    .pop()
                    .unwrap_or_else(|| TensorInfo::new(&[], DType::I32));
                let keys = infos[1].shape.first().copied().unwrap_or(0);
                if m.dtype != DType::I32 || m.shape.len() != 1 {
                    return Err(format!(
                        "input 3 (mask) must be i32 [keys], got {}{:?}",
                        m.dtype, m.shape
                    ));
                }
                ops::padding_keep(&vec![1; m.numel()], keys)?
            } else {
                Vec::new()
            };
            let op = Op::Sdpa {
                scale: *scale,
                mask: ops::backend_mask(*mask, keep),
                q_pos: 0,
                kv_len: None,
            };
            (op, infos)
        }
        GraphOp::KvAppend => return Err("KvAppend is inferred from its state".into()),
        other => return Err(format!("{} is inferred from its dims", other.name())),
    })
}

/// The concrete shapes of a value under the two probes.
type Probed = [Vec<usize>; 2];

fn probed_of(shape: &[Dim]) -> Probed {
    [concrete(shape, PROBES[0]), concrete(shape, PROBES[1])]
}

/// An output's inferred dims, encoding and probe shapes.
type Inferred = (Vec<Dim>, DType, Probed);

/// Infers a node's outputs. Each probe run starts from the inputs' own probe
/// shapes (so a dimension twice the dynamic one stays twice it through reshapes).
fn infer_node(
    op: &GraphOp,
    inputs: &[&Value],
    probed: &[&Probed],
    states: &[StateDecl],
) -> Result<Vec<Inferred>, String> {
    if let GraphOp::KvAppend = op {
        if inputs.len() != 3 {
            return Err(format!(
                "needs 3 inputs [state, k, v], got {}",
                inputs.len()
            ));
        }
        let Source::State(s) = inputs[0].source else {
            return Err(format!("input 0 `{}` must be a state", inputs[0].name));
        };
        let st = &states[s];
        for v in &inputs[1..] {
            let ok = v.dtype == DType::F32
                && v.shape.len() == 3
                && v.shape[1..] == [Some(st.kv_heads), Some(st.head_dim)];
            if !ok {
                return Err(format!(
                    "`{}` has shape {:?}, state `{}` needs [s, {}, {}] f32",
                    v.name,
                    dims_text(&v.shape),
                    st.name,
                    st.kv_heads,
                    st.head_dim
                ));
            }
        }
        let all = vec![None, Some(st.kv_heads), Some(st.head_dim)];
        let p = probed_of(&all);
        return Ok(vec![
            (all.clone(), DType::F32, p.clone()),
            (all, DType::F32, p),
        ]);
    }
    if let Some(v) = inputs.iter().find(|v| matches!(v.source, Source::State(_))) {
        return Err(format!(
            "state `{}` can only be the first input of KvAppend",
            v.name
        ));
    }
    if op.is_run_time_shape() {
        let dtypes: Vec<DType> = inputs.iter().map(|v| v.dtype).collect();
        let shapes: Vec<&[Dim]> = inputs.iter().map(|v| v.shape.as_slice()).collect();
        return bind::infer_static(op, &dtypes, &shapes, probed);
    }
    let mut runs = Vec::with_capacity(2);
    for k in 0..PROBES.len() {
        let infos: Vec<TensorInfo> = inputs
            .iter()
            .zip(probed)
            .map(|(v, p)| TensorInfo::new(&p[k], v.dtype))
            .collect();
        let (bop, binfos) = probe_op(op, &infos)?;
        let outs = bop.infer(&binfos).map_err(|e| e.to_string())?;
        runs.push(outs);
    }
    let (a, b) = (&runs[0], &runs[1]);
    Ok(a.iter()
        .zip(b)
        .map(|(x, y)| {
            let shape = x
                .shape
                .iter()
                .zip(y.shape.iter().chain(std::iter::repeat(&usize::MAX)))
                .map(|(&p, &q)| (p == q).then_some(p))
                .collect();
            (shape, x.dtype, [x.shape.clone(), y.shape.clone()])
        })
        .collect())
}

/// A shape for messages: `-1` for dynamic dims.
pub fn dims_text(shape: &[Dim]) -> Vec<i64> {
    shape.iter().map(|d| d.map_or(-1, |n| n as i64)).collect()
}

impl Graph {
    /// Validates `doc`: version, unique names, topological order, name
    /// resolution (`weight` gives the shape and encoding of a tensor of the
    /// `tensors` section), op attributes, shape inference.
    pub fn build(
        doc: &GraphDoc,
        weight: &dyn Fn(&str) -> Option<TensorInfo>,
    ) -> Result<Graph, GraphError> {
        if doc.version != 1 {
            return Err(GraphError::graph(
                "version",
                format!(
                    "version {} is not supported (this runtime reads 1)",
                    doc.version
                ),
            ));
        }
        let mut values: Vec<Value> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut inputs = Vec::new();
        for (i, d) in doc.inputs.iter().enumerate() {
            let dtype = DType::from_name(&d.dtype)
                .filter(|t| matches!(t, DType::I32 | DType::F32 | DType::I64 | DType::Bool))
                .ok_or_else(|| {
                    GraphError::graph(
                        "inputs",
                        format!(
                            "input `{}`: dtype `{}` must be i32, f32, i64 or bool",
                            d.name, d.dtype
                        ),
                    )
                })?;
            if d.shape.iter().any(|&x| x < -1) {
                return Err(GraphError::graph(
                    "inputs",
                    format!("input `{}`: dims are >= 0 or -1", d.name),
                ));
            }
            let shape = d.shape.iter().map(|&x| usize::try_from(x).ok()).collect();
            inputs.push(
                define(
                    &mut values,
                    &mut by_name,
                    &d.name,
                    Source::Input(i),
                    shape,
                    dtype,
                )
                .map_err(|r| GraphError::graph("inputs", r))?,
            );
        }
        for (i, s) in doc.state.iter().enumerate() {
            if s.kind != "kv_cache" {
                return Err(GraphError::graph(
                    "state",
                    format!("state `{}`: kind `{}` is not kv_cache", s.name, s.kind),
                ));
            }
            if s.kv_heads == 0 || s.head_dim == 0 {
                return Err(GraphError::graph(
                    "state",
                    format!("state `{}`: kv_heads and head_dim must be > 0", s.name),
                ));
            }
            let shape = vec![None, Some(s.kv_heads), Some(s.head_dim)];
            define(
                &mut values,
                &mut by_name,
                &s.name,
                Source::State(i),
                shape,
                DType::F32,
            )
            .map_err(|r| GraphError::graph("state", r))?;
        }
        let mut producer_of_later: HashMap<&str, usize> = HashMap::new();
        for n in &doc.nodes {
            for o in &n.outputs {
                producer_of_later.entry(o.as_str()).or_insert(n.id);
            }
        }
        let mut ids = std::collections::HashSet::new();
        let mut appended = vec![false; doc.state.len()];
        let mut nodes = Vec::with_capacity(doc.nodes.len());
        let mut node_probes: HashMap<usize, Probed> = HashMap::new();
        for (ni, n) in doc.nodes.iter().enumerate() {
            let err = |reason: String| GraphError::at(n.id, &n.op, reason);
            if !ids.insert(n.id) {
                return Err(err(format!("node id {} is used twice", n.id)));
            }
            let op = match GraphOp::parse(&n.op, &n.attrs).map_err(&err)? {
                Some(op) => op,
                None => {
                    return Err(GraphError {
                        unsupported: true,
                        ..GraphError::at(n.id, &n.op, "unknown op")
                    })
                }
            };
            let mut ins = Vec::with_capacity(n.inputs.len());
            for name in &n.inputs {
                let idx = match by_name.get(name) {
                    Some(&i) => i,
                    None => match weight(name) {
                        Some(info) => define(
                            &mut values,
                            &mut by_name,
                            name,
                            Source::Weight,
                            info.shape.iter().map(|&d| Some(d)).collect(),
                            info.dtype,
                        )
                        .map_err(&err)?,
                        None => {
                            let reason = match producer_of_later.get(name.as_str()) {
                                Some(later) => format!(
                                    "input `{name}` is produced by node {later}, which does not come earlier (nodes must be in topological order; a cycle has no such order)"
                                ),
                                None => format!(
                                    "input `{name}` is not a graph input, state, tensor, or earlier node output"
                                ),
                            };
                            return Err(err(reason));
                        }
                    },
                };
                ins.push(idx);
            }
            if let GraphOp::KvAppend = op {
                if let Some(Source::State(s)) = ins.first().map(|&i| values[i].source) {
                    if std::mem::replace(&mut appended[s], true) {
                        return Err(err(format!(
                            "state `{}` is appended to twice",
                            doc.state[s].name
                        )));
                    }
                }
            }
            let in_values: Vec<&Value> = ins.iter().map(|&i| &values[i]).collect();
            let in_probed: Vec<Probed> = ins
                .iter()
                .map(|i| {
                    node_probes
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| probed_of(&values[*i].shape))
                })
                .collect();
            let in_probed: Vec<&Probed> = in_probed.iter().collect();
            let outs = infer_node(&op, &in_values, &in_probed, &doc.state).map_err(&err)?;
            if outs.len() != n.outputs.len() {
                return Err(err(format!(
                    "the op has {} outputs, the node names {}",
                    outs.len(),
                    n.outputs.len()
                )));
            }
            let mut out_idx = Vec::with_capacity(outs.len());
            for (name, (shape, dtype, probed)) in n.outputs.iter().zip(outs) {
                if weight(name).is_some() {
                    return Err(err(format!("output `{name}` has the name of a tensor")));
                }
                node_probes.insert(values.len(), probed);
                out_idx.push(
                    define(
                        &mut values,
                        &mut by_name,
                        name,
                        Source::Node(ni),
                        shape,
                        dtype,
                    )
                    .map_err(&err)?,
                );
            }
            nodes.push(Node {
                id: n.id,
                op,
                inputs: ins,
                outputs: out_idx,
                backend_hint: n.backend_hint.clone(),
            });
        }
        let outputs = doc
            .outputs
            .iter()
            .map(|name| match by_name.get(name) {
                Some(&i) if !matches!(values[i].source, Source::State(_)) => Ok(i),
                _ => Err(GraphError::graph(
                    "outputs",
                    format!("output `{name}` is not a value of the graph"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Graph {
            values,
            input_decls: doc.inputs.clone(),
            inputs,
            outputs,
            states: doc.state.clone(),
            nodes,
        })
    }

    /// Parses and validates the body of a `graph` section of the model at
    /// `path` against its tensor index.
    pub fn from_section(
        path: &Path,
        body: &str,
        first_line: usize,
        tensors: &crate::loader::TensorIndex,
    ) -> Result<Graph, LoadError> {
        let doc = GraphDoc::from_toml(body)
            .map_err(|e| crate::loader::toml_error(path, "graph", body, first_line, &e))?;
        let weight = |name: &str| {
            tensors
                .get(name)
                .map(|e| TensorInfo::new(&e.shape, exec::bound_dtype(&e.shape, e.dtype)))
        };
        Graph::build(&doc, &weight).map_err(|e| e.into_load_error(path))
    }

    /// The value index of input `name`.
    pub fn input(&self, name: &str) -> Option<usize> {
        self.input_decls
            .iter()
            .position(|d| d.name == name)
            .map(|i| self.inputs[i])
    }

    /// How many node inputs and graph outputs read each value.
    pub fn consumers(&self) -> Vec<usize> {
        let mut n = vec![0; self.values.len()];
        for node in &self.nodes {
            for &i in &node.inputs {
                n[i] += 1;
            }
        }
        for &o in &self.outputs {
            n[o] += 1;
        }
        n
    }

    /// The text form (for `graph --emit` of a rewritten graph and round trips).
    pub fn to_doc(&self) -> GraphDoc {
        let names = |ids: &[usize]| ids.iter().map(|&i| self.values[i].name.clone()).collect();
        GraphDoc {
            version: 1,
            inputs: self.input_decls.clone(),
            outputs: names(&self.outputs),
            state: self.states.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeDecl {
                    id: n.id,
                    op: n.op.name().to_string(),
                    inputs: names(&n.inputs),
                    outputs: names(&n.outputs),
                    attrs: n.op.attrs(),
                    backend_hint: n.backend_hint.clone(),
                })
                .collect(),
        }
    }
}

fn define(
    values: &mut Vec<Value>,
    by_name: &mut HashMap<String, usize>,
    name: &str,
    source: Source,
    shape: Vec<Dim>,
    dtype: DType,
) -> Result<usize, String> {
    if name.is_empty() {
        return Err("empty value name".into());
    }
    if by_name.contains_key(name) {
        return Err(format!("`{name}` is defined twice"));
    }
    let i = values.len();
    values.push(Value {
        name: name.to_string(),
        source,
        shape,
        dtype,
    });
    by_name.insert(name.to_string(), i);
    Ok(i)
}

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
