//! The `graph` section as written in a `.model` file (graph.md): inputs,
//! outputs, state and nodes, with TOML (de)serialization.
//!
//! [`GraphDoc`] is the text form; [`super::Graph`] is the validated,
//! name-resolved form the executor runs.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The `graph` section, as parsed from TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphDoc {
    /// Format version; this runtime reads version 1.
    pub version: u32,
    /// Values fed by the caller at every call (`tokens`, `pos`).
    pub inputs: Vec<InputDecl>,
    /// Names of the values returned to the caller.
    pub outputs: Vec<String>,
    /// Per-conversation state (the KV cache), one entry per layer.
    #[serde(default)]
    pub state: Vec<StateDecl>,
    /// The ops, in a topological order.
    #[serde(default)]
    pub nodes: Vec<NodeDecl>,
}

/// A graph input: name, dtype (`i32` or `f32`) and shape (`-1` = dynamic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDecl {
    /// Name nodes refer to.
    pub name: String,
    /// Encoding name (dtype table): `i32` or `f32`.
    pub dtype: String,
    /// Dimensions; `-1` marks a dimension resolved from the caller's value.
    pub shape: Vec<i64>,
}

/// One piece of per-conversation state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateDecl {
    /// Name nodes refer to (the first input of `KvAppend`).
    pub name: String,
    /// Only `kv_cache`: a K and a V buffer `[max_ctx, kv_heads, head_dim]`.
    pub kind: String,
    /// Layer the cache belongs to (for dispatch records).
    pub layer: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Dimension of each head.
    pub head_dim: usize,
}

/// One op application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDecl {
    /// Identifier used in errors, dispatch records and traces.
    pub id: usize,
    /// Op name from ops.md (see [`super::ops::OP_TAGS`]).
    pub op: String,
    /// Names of the input values, in the op's order.
    pub inputs: Vec<String>,
    /// Names given to the op's outputs.
    pub outputs: Vec<String>,
    /// The op's attributes (eps, axis, ...).
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub attrs: toml::Table,
    /// Preferred backend for this node, used when it supports the op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_hint: Option<String>,
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn name_list(names: &[String]) -> String {
    let parts: Vec<String> = names.iter().map(|n| quoted(n)).collect();
    format!("[{}]", parts.join(", "))
}

impl GraphDoc {
    /// Parses the body of a `graph` section.
    pub fn from_toml(text: &str) -> Result<GraphDoc, toml::de::Error> {
        toml::from_str(text)
    }

    /// The section body in the compact layout of graph.md: inline tables for
    /// inputs and state, one `[[nodes]]` table per node.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "version = {}", self.version);
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|i| {
                let dims: Vec<String> = i.shape.iter().map(|d| d.to_string()).collect();
                format!(
                    "{{ name = {}, dtype = {}, shape = [{}] }}",
                    quoted(&i.name),
                    quoted(&i.dtype),
                    dims.join(", ")
                )
            })
            .collect();
        let _ = writeln!(s, "inputs = [{}]", inputs.join(", "));
        let _ = writeln!(s, "outputs = {}", name_list(&self.outputs));
        s.push_str("state = [\n");
        for st in &self.state {
            let _ = writeln!(
                s,
                "  {{ name = {}, kind = {}, layer = {}, kv_heads = {}, head_dim = {} }},",
                quoted(&st.name),
                quoted(&st.kind),
                st.layer,
                st.kv_heads,
                st.head_dim
            );
        }
        s.push_str("]\n");
        for n in &self.nodes {
            let _ = writeln!(s, "\n[[nodes]]\nid = {}\nop = {}", n.id, quoted(&n.op));
            let _ = writeln!(s, "inputs = {}", name_list(&n.inputs));
            let _ = writeln!(s, "outputs = {}", name_list(&n.outputs));
            if !n.attrs.is_empty() {
                let _ = writeln!(s, "attrs = {}", toml::Value::Table(n.attrs.clone()));
            }
            if let Some(h) = &n.backend_hint {
                let _ = writeln!(s, "backend_hint = {}", quoted(h));
            }
        }
        s
    }
}
