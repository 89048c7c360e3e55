//! The graph IR (`../shared/spec/graph.md`): the text form of a `graph`
//! section, the op table and the validated graph. It sits below the loader
//! (which validates a model's `graph` section with it) and below the executor
//! (`crate::graph`), and imports neither.
//!
//! - [`doc`]: the TOML form ([`GraphDoc`]).
//! - [`ops`]: the stable op tag table and the graph ops ([`GraphOp`]).
//! - [`Graph`]: the validated form: every name resolved to an input, a state,
//!   a weight or an earlier node's output; shapes inferred with each op's
//!   rule (`None` = a dynamic dimension); each violation is a load error
//!   naming the node id and op.

pub mod doc;
mod infer;
pub mod ops;

pub use doc::{GraphDoc, InputDecl, NodeDecl, StateDecl};
pub use ops::{op_tag, GraphOp, MaskKind, OP_TAGS};

pub(crate) use infer::{concrete, regroup};

use crate::backend::TensorInfo;
use crate::dtype::DType;
use crate::error::LoadError;
use infer::{infer_node, probed_of, Probed};
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

/// The encoding a weight has once bound: vectors (norm gains, biases) are
/// decoded to f32 once at load, matrices keep the stored encoding.
pub fn bound_dtype(shape: &[usize], stored: DType) -> DType {
    if shape.len() <= 1 && !matches!(stored, DType::I64 | DType::Bool) {
        DType::F32
    } else {
        stored
    }
}

/// A shape for messages: `-1` for dynamic dims.
pub fn dims_text(shape: &[Dim]) -> Vec<i64> {
    shape.iter().map(|d| d.map_or(-1, |n| n as i64)).collect()
}

impl Graph {
    /// The names of the values returned, in order.
    pub fn output_names(&self) -> Vec<String> {
        self.outputs
            .iter()
            .map(|&v| self.values[v].name.clone())
            .collect()
    }

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
