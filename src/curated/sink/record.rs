//! The recording sink: every op becomes a node of a [`GraphDoc`], in unfused
//! primitive ops (the fusion pass fuses at load for the chosen backend).

use super::{CachedAttention, Label, QkvProjections, Residual, RopeSpec, Sink};
use crate::backend::Op;
use crate::curated::llama::LogitRows;
use crate::error::ExecutionError;
use crate::ir::ops::RopeFreqs;
use crate::ir::{GraphDoc, GraphOp, InputDecl, MaskKind, NodeDecl, StateDecl};
use std::fmt;

/// Appends nodes with unique output names.
struct Builder {
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
}

/// A graph input declaration.
pub(crate) fn input(name: &str, dtype: &str, shape: &[i64]) -> InputDecl {
    InputDecl {
        name: name.into(),
        dtype: dtype.into(),
        shape: shape.to_vec(),
    }
}

/// Records a decoder's graph: the token ids come in as input `tokens`, the
/// position of the first as input `pos`, one KV-cache state per attention layer.
pub(crate) struct RecordingSink {
    b: Builder,
    state: Vec<StateDecl>,
    /// Rotation frequencies, indexed by [`RopeSpec::table`].
    ropes: Vec<RopeFreqs>,
}

/// The name of the token-ids input of a recorded graph (i32 `[S]`).
pub(crate) const TOKENS: &str = "tokens";
/// The name of the position input of a recorded decoder graph.
const POS: &str = "pos";
/// The name of the padding-mask input of a recorded encoder graph (i32 `[S]`,
/// nonzero = a real token).
const MASK: &str = "mask";

impl RecordingSink {
    /// An empty graph whose rotation tables are `ropes`.
    pub(crate) fn new(ropes: Vec<RopeFreqs>) -> RecordingSink {
        RecordingSink {
            b: Builder::new(),
            state: Vec::new(),
            ropes,
        }
    }

    /// The decoder graph recorded, with output `output`: inputs `tokens` (i32
    /// `[S]`) and `pos` (i32 scalar).
    pub(crate) fn finish_decoder(self, output: String) -> GraphDoc {
        let inputs = vec![input(TOKENS, "i32", &[-1]), input(POS, "i32", &[])];
        self.finish(inputs, vec![output])
    }

    /// The encoder graph recorded, with output `output`: inputs `tokens`,
    /// `token_types`, `positions` (0-based) and `mask`, all i32 `[S]`.
    pub(crate) fn finish_encoder(self, output: String) -> GraphDoc {
        let inputs = [TOKENS, "token_types", "positions", MASK]
            .iter()
            .map(|n| input(n, "i32", &[-1]))
            .collect();
        self.finish(inputs, vec![output])
    }

    /// The graph recorded, with these inputs and outputs.
    pub(crate) fn finish(self, inputs: Vec<InputDecl>, outputs: Vec<String>) -> GraphDoc {
        GraphDoc {
            version: 1,
            inputs,
            outputs,
            state: self.state,
            nodes: self.b.nodes,
        }
    }

    fn op1(&mut self, op: GraphOp, inputs: &[&str], label: Label) -> String {
        self.b.op1(op, inputs, &label.to_string())
    }
}

fn strs<'s>(inputs: &[&'s String]) -> Vec<&'s str> {
    inputs.iter().map(|s| s.as_str()).collect()
}

fn dims(rows: &[usize]) -> Vec<i64> {
    std::iter::once(-1)
        .chain(rows.iter().map(|&d| d as i64))
        .collect()
}

impl Sink for RecordingSink {
    type V = String;

    fn section(&mut self, _label: fmt::Arguments<'_>) {}

    fn op(&mut self, op: Op, inputs: &[&String], label: Label) -> Result<String, ExecutionError> {
        Ok(self.op1(GraphOp::Fixed(op), &strs(inputs), label))
    }

    fn output(&mut self, op: Op, inputs: &[&String], name: &str) -> Result<String, ExecutionError> {
        self.b.node(GraphOp::Fixed(op), &strs(inputs), &[name]);
        Ok(name.to_string())
    }

    fn rows_of(
        &mut self,
        x: String,
        rows: &[usize],
        label: Label,
    ) -> Result<String, ExecutionError> {
        Ok(self.op1(GraphOp::Reshape(dims(rows)), &[&x], label))
    }

    fn residual_norm(
        &mut self,
        r: &mut Residual<String>,
        norm: &Op,
        g: &String,
        label: Label,
    ) -> Result<String, ExecutionError> {
        if let Some(d) = r.pending.take() {
            r.h = self.op1(GraphOp::Fixed(Op::Add), &[&r.h, &d], Label::top("h"));
        }
        Ok(self.op1(GraphOp::Fixed(norm.clone()), &[&r.h, g], label))
    }

    fn select_rows(
        &mut self,
        r: &mut Residual<String>,
        rows: LogitRows,
    ) -> Result<(), ExecutionError> {
        if rows != LogitRows::Last {
            return Err(ExecutionError::InvalidConfig {
                field: "logit rows".into(),
                reason: format!("a recorded graph returns the last row's logits, not {rows:?}"),
            });
        }
        if let Some(d) = r.pending.take() {
            r.h = self.op1(GraphOp::Fixed(Op::Add), &[&r.h, &d], Label::top("h"));
        }
        let last = GraphOp::Slice {
            axis: 0,
            start: -1,
            end: None,
        };
        r.h = self.op1(last, &[&r.h], Label::top("h_last"));
        Ok(())
    }

    fn qkv(
        &mut self,
        x: &String,
        p: QkvProjections<'_, String>,
    ) -> Result<[String; 3], ExecutionError> {
        let QkvProjections {
            w,
            bias,
            heads,
            head_dim,
            layer,
        } = p;
        let parts = ["q", "k", "v"];
        let mut out: [String; 3] = Default::default();
        for j in 0..3 {
            let label = Label::layer(layer, parts[j]);
            let mut y = self.op1(GraphOp::Fixed(Op::Matmul), &[x, w[j]], label);
            if let Some(b) = bias {
                y = self.op1(GraphOp::Fixed(Op::Add), &[&y, b[j]], label);
            }
            out[j] = self.op1(GraphOp::Reshape(dims(&[heads[j], head_dim])), &[&y], label);
        }
        Ok(out)
    }

    fn cached_attention(
        &mut self,
        [q, k, v]: [String; 3],
        rope: Option<RopeSpec>,
        attn: CachedAttention,
    ) -> Result<String, ExecutionError> {
        let i = attn.layer;
        let (q, k) = match rope {
            Some(rope) => {
                let freqs = self.ropes.get(rope.table).cloned().ok_or_else(|| {
                    ExecutionError::InvalidConfig {
                        field: "rope".into(),
                        reason: format!("rotation table {} is not declared", rope.table),
                    }
                })?;
                let rot = GraphOp::Rope {
                    style: rope.style,
                    rot_dim: Some(rope.rot_dim),
                    freqs,
                };
                let q = self.op1(rot.clone(), &[&q, POS], Label::layer(i, "q"));
                (q, self.op1(rot, &[&k, POS], Label::layer(i, "k")))
            }
            None => (q, k),
        };
        let st = format!("kv.{i}");
        self.state.push(StateDecl {
            name: st.clone(),
            kind: "kv_cache".into(),
            layer: i,
            kv_heads: attn.kv_heads,
            head_dim: attn.head_dim,
        });
        let (ka, va) = (format!("l{i}.K"), format!("l{i}.V"));
        self.b.node(GraphOp::KvAppend, &[&st, &k, &v], &[&ka, &va]);
        let sdpa = GraphOp::Sdpa {
            scale: attn.scale,
            mask: match attn.window {
                Some(w) => MaskKind::Sliding(w),
                None => MaskKind::Causal,
            },
        };
        Ok(self.op1(sdpa, &[&q, &ka, &va], Label::layer(i, "attn")))
    }

    fn attention(
        &mut self,
        [q, k, v]: [&String; 3],
        label: Label,
    ) -> Result<String, ExecutionError> {
        let sdpa = GraphOp::Sdpa {
            scale: None,
            mask: MaskKind::None,
        };
        Ok(self.op1(sdpa, &[q, k, v], label))
    }

    fn gated_mlp(
        &mut self,
        x: &String,
        [gate, up]: [&String; 2],
        act: Op,
        layer: usize,
    ) -> Result<String, ExecutionError> {
        let g = self.op1(
            GraphOp::Fixed(Op::Matmul),
            &[x, gate],
            Label::layer(layer, "gate"),
        );
        let u = self.op1(
            GraphOp::Fixed(Op::Matmul),
            &[x, up],
            Label::layer(layer, "up"),
        );
        let g = self.op1(GraphOp::Fixed(act), &[&g], Label::layer(layer, "gate"));
        Ok(self.op1(
            GraphOp::Fixed(Op::Mul),
            &[&g, &u],
            Label::layer(layer, "mlp"),
        ))
    }

    fn linear(
        &mut self,
        x: &String,
        w: &String,
        b: Option<&String>,
        act: Option<Op>,
        label: Label,
    ) -> Result<String, ExecutionError> {
        let mut y = self.op1(GraphOp::Fixed(Op::Matmul), &[x, w], label);
        if let Some(b) = b {
            y = self.op1(GraphOp::Fixed(Op::Add), &[&y, b], label);
        }
        Ok(match act {
            Some(a) => self.op1(GraphOp::Fixed(a), &[&y], label),
            None => y,
        })
    }

    fn linear_add_norm(
        &mut self,
        x: &String,
        lin: [&String; 2],
        h: String,
        norm: [&String; 2],
        eps: f32,
        label: Label,
    ) -> Result<String, ExecutionError> {
        let y = self.linear(x, lin[0], Some(lin[1]), None, label)?;
        let s = self.op1(GraphOp::Fixed(Op::Add), &[&h, &y], Label::top("h"));
        let ln = GraphOp::Fixed(Op::LayerNorm { eps });
        Ok(self.op1(ln, &[&s, norm[0], norm[1]], Label::top("h")))
    }

    fn padded_self_attention(
        &mut self,
        x: &String,
        lin: [[&String; 2]; 3],
        heads: usize,
        head_dim: usize,
        layer: usize,
    ) -> Result<String, ExecutionError> {
        let parts = ["query", "key", "value"];
        let mut qkv: [String; 3] = Default::default();
        for j in 0..3 {
            let label = Label::layer(layer, parts[j]);
            let y = self.linear(x, lin[j][0], Some(lin[j][1]), None, label)?;
            qkv[j] = self.op1(GraphOp::Reshape(dims(&[heads, head_dim])), &[&y], label);
        }
        let sdpa = GraphOp::Sdpa {
            scale: None,
            mask: MaskKind::Padding,
        };
        let label = Label::layer(layer, "attn");
        let o = self.op1(sdpa, &[&qkv[0], &qkv[1], &qkv[2], MASK], label);
        Ok(self.op1(GraphOp::Reshape(dims(&[heads * head_dim])), &[&o], label))
    }

    fn position_table(&mut self, table: &String, offset: usize) -> Result<String, ExecutionError> {
        if offset == 0 {
            return Ok(table.clone());
        }
        let rows = GraphOp::Slice {
            axis: 0,
            start: offset as i64,
            end: None,
        };
        Ok(self.op1(rows, &[table], Label::top("position_table")))
    }

    fn named_rows_of(
        &mut self,
        x: String,
        rows: &[usize],
        name: &str,
    ) -> Result<String, ExecutionError> {
        self.b.node(GraphOp::Reshape(dims(rows)), &[&x], &[name]);
        Ok(name.to_string())
    }

    fn gather_rows(&mut self, _x: &String, rows: &[usize]) -> Result<String, ExecutionError> {
        Err(ExecutionError::InvalidConfig {
            field: "logit rows".into(),
            reason: format!(
                "a recorded graph returns the logits of every row, not {} chosen ones",
                rows.len()
            ),
        })
    }

    fn audio_conv_stem(
        &mut self,
        mel: &String,
        convs: [[&String; 2]; 2],
    ) -> Result<String, ExecutionError> {
        let mut x = mel.clone();
        for (stride, ([w, b], name)) in [1, 2]
            .into_iter()
            .zip(convs.into_iter().zip(["conv1", "conv2"]))
        {
            let conv = GraphOp::Fixed(Op::Conv1d { stride, padding: 1 });
            x = self.op1(conv, &[&x, w, b], Label::top(name));
            x = self.op1(GraphOp::Fixed(Op::Gelu), &[&x], Label::top(name));
        }
        Ok(self.op1(
            GraphOp::Fixed(Op::Permute(vec![1, 0])),
            &[&x],
            Label::top("conv2"),
        ))
    }

    fn reuse_buffers(&mut self) {}
}
