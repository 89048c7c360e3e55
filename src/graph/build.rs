//! Helpers of the graph writers: a node builder that names outputs uniquely,
//! and the composite pieces the families share (linear layer with bias,
//! LayerNorm with gain and bias).

use crate::backend::Op;
use crate::ir::{GraphOp, InputDecl, NodeDecl};

/// Appends nodes with unique output names.
pub(crate) struct Builder {
    /// The nodes so far.
    pub nodes: Vec<NodeDecl>,
    fresh: usize,
}

impl Builder {
    /// An empty graph body.
    pub fn new() -> Self {
        Builder {
            nodes: Vec::new(),
            fresh: 0,
        }
    }

    /// A node with the given output names.
    pub fn node(&mut self, op: GraphOp, inputs: &[&str], outputs: &[&str]) {
        self.nodes.push(NodeDecl {
            id: self.nodes.len(),
            op: op.name().to_string(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attrs: op.attrs(),
            backend_hint: None,
        });
    }

    /// One output named `name` (made unique with a counter).
    pub fn op1(&mut self, op: GraphOp, inputs: &[&str], name: &str) -> String {
        self.fresh += 1;
        let out = format!("{name}#{}", self.fresh);
        self.node(op, inputs, &[&out]);
        out
    }

    /// `x W^T + b` for the linear layer `prefix` (`.weight`, `.bias`).
    pub fn linear(&mut self, x: &str, prefix: &str, name: &str) -> String {
        let y = self.op1(
            GraphOp::Fixed(Op::Matmul),
            &[x, &format!("{prefix}.weight")],
            name,
        );
        self.op1(
            GraphOp::Fixed(Op::Add),
            &[&y, &format!("{prefix}.bias")],
            name,
        )
    }

    /// LayerNorm with the gain and bias of `prefix`.
    pub fn layer_norm(&mut self, x: &str, prefix: &str, eps: f32, name: &str) -> String {
        self.op1(
            GraphOp::Fixed(Op::LayerNorm { eps }),
            &[x, &format!("{prefix}.weight"), &format!("{prefix}.bias")],
            name,
        )
    }
}

/// A graph input declaration.
pub(crate) fn input(name: &str, dtype: &str, shape: &[i64]) -> InputDecl {
    InputDecl {
        name: name.into(),
        dtype: dtype.into(),
        shape: shape.to_vec(),
    }
}
