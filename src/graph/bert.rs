//! The graph writer of the BertStyle family and the encoder call on the
//! graph executor.
//!
//! [`bert_graph`] generates the `graph` section from the same
//! [`BertConfig`] the curated family reads: inputs `tokens`, `token_types`,
//! `positions` (0-based; RoBERTa's position offset is a `Slice` of the
//! position table) and the padding `mask` (i32, nonzero = a real token), all
//! `[S]`; output `hidden` `[S, hidden_size]`. Per layer (post-norm): q/k/v
//! `Matmul` + bias `Add`, `Reshape` to heads, `Sdpa` with the padding mask,
//! output projection, residual `Add`, `LayerNorm`, the MLP with its
//! activation, residual `Add`, `LayerNorm`.
//!
//! [`encode`] runs one sequence per graph call (no padding needed; the mask
//! is all ones) and assembles the batch's [`Hidden`], so pooling is the
//! curated family's own ([`crate::curated::bert::pool`]).

use super::exec::GraphSession;
use crate::backend::{Op, Tensor};
use crate::curated::bert::{layer_names, Activation, BertConfig, Hidden};
use crate::curated::sink::record::{input, Builder};
use crate::error::ExecutionError;
use crate::ir::{GraphDoc, GraphOp, MaskKind};
use crate::loader::Config;

/// The graph of a BertStyle model with `config`; `has` tells whether the
/// optional token-type table is in the file.
pub fn bert_graph(config: &Config, has: &dyn Fn(&str) -> bool) -> Result<GraphDoc, ExecutionError> {
    let c = BertConfig::from_config(config)?;
    let mut b = Builder::new();
    let word = b.op1(
        GraphOp::Fixed(Op::Embed),
        &["tokens", "embeddings.word_embeddings.weight"],
        "word",
    );
    let mut table = "embeddings.position_embeddings.weight".to_string();
    if c.position_offset > 0 {
        let slice = GraphOp::Slice {
            axis: 0,
            start: c.position_offset as i64,
            end: None,
        };
        table = b.op1(slice, &[&table], "position_table");
    }
    let position = b.op1(
        GraphOp::Fixed(Op::Embed),
        &["positions", &table],
        "position",
    );
    let mut e = b.op1(GraphOp::Fixed(Op::Add), &[&word, &position], "embed");
    let types = "embeddings.token_type_embeddings.weight";
    if has(types) {
        let t = b.op1(GraphOp::Fixed(Op::Embed), &["token_types", types], "type");
        e = b.op1(GraphOp::Fixed(Op::Add), &[&e, &t], "embed");
    }
    let mut h = b.layer_norm(&e, "embeddings.LayerNorm", c.eps, "h");
    let (heads, hd) = (c.heads as i64, c.head_dim as i64);
    let act = match c.act {
        Activation::Gelu => Op::Gelu,
        Activation::GeluTanh => Op::GeluTanh,
        Activation::Relu => Op::Relu,
    };
    let (stack, [n_q, n_k, n_v, n_o, n_on, n_fi, n_fo, n_fon]) = layer_names(c.variant);
    for i in 0..c.layers {
        let p = format!("{stack}.{i}");
        let mut qkv = Vec::with_capacity(3);
        for (t, name) in [("query", n_q), ("key", n_k), ("value", n_v)] {
            let y = b.linear(&h, &format!("{p}.{name}"), &format!("l{i}.{t}"));
            qkv.push(b.op1(
                GraphOp::Reshape(vec![-1, heads, hd]),
                &[&y],
                &format!("l{i}.{t}"),
            ));
        }
        let sdpa = GraphOp::Sdpa {
            scale: None,
            mask: MaskKind::Padding,
        };
        let o = b.op1(
            sdpa,
            &[&qkv[0], &qkv[1], &qkv[2], "mask"],
            &format!("l{i}.attn"),
        );
        let o = b.op1(
            GraphOp::Reshape(vec![-1, heads * hd]),
            &[&o],
            &format!("l{i}.attn"),
        );
        let a = b.linear(&o, &format!("{p}.{n_o}"), &format!("l{i}.attn_out"));
        let s = b.op1(GraphOp::Fixed(Op::Add), &[&h, &a], "h");
        h = b.layer_norm(&s, &format!("{p}.{n_on}"), c.eps, "h");
        let f = b.linear(&h, &format!("{p}.{n_fi}"), &format!("l{i}.mlp"));
        let f = b.op1(GraphOp::Fixed(act.clone()), &[&f], &format!("l{i}.mlp"));
        let f = b.linear(&f, &format!("{p}.{n_fo}"), &format!("l{i}.mlp_out"));
        let s = b.op1(GraphOp::Fixed(Op::Add), &[&h, &f], "h");
        h = b.layer_norm(&s, &format!("{p}.{n_fon}"), c.eps, "h");
    }
    Ok(GraphDoc {
        version: 1,
        inputs: ["tokens", "token_types", "positions", "mask"]
            .iter()
            .map(|n| input(n, "i32", &[-1]))
            .collect(),
        outputs: vec![h],
        state: Vec::new(),
        nodes: b.nodes,
    })
}

/// The graph inputs of one sequence, in `session`'s input order: `tokens`,
/// `token_types` (all 0), `positions` (`0..S`) and `mask` (1 for the first
/// `real` tokens, 0 for the padding after them).
pub fn encoder_inputs(
    session: &GraphSession,
    ids: &[u32],
    real: usize,
) -> Result<Vec<Tensor>, ExecutionError> {
    let s = ids.len();
    session
        .model()
        .graph()
        .input_decls
        .iter()
        .map(|d| {
            let values: Vec<i32> = match d.name.as_str() {
                "tokens" => ids
                    .iter()
                    .map(|&t| i32::try_from(t).unwrap_or(i32::MAX))
                    .collect(),
                "token_types" => vec![0; s],
                "positions" => (0..s as i32).collect(),
                "mask" => (0..s).map(|i| i32::from(i < real)).collect(),
                other => {
                    return Err(ExecutionError::MissingTensor {
                        name: other.to_string(),
                        required_by: "graph encoder (tokens, token_types, positions, mask)".into(),
                    })
                }
            };
            Tensor::from_i32(&[s], values)
        })
        .collect()
}

/// Runs the encoder graph over `batch` (one graph call per sequence) and
/// returns the final hidden states `[batch, longest, hidden]` (host f32,
/// padding rows zero), as the curated [`crate::curated::bert::Bert::encode`] does.
pub fn encode(session: &mut GraphSession, batch: &[&[u32]]) -> Result<Hidden, ExecutionError> {
    let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
    let longest = lengths.iter().copied().max().unwrap_or(0);
    if batch.is_empty() || lengths.contains(&0) {
        return Err(ExecutionError::ShapeMismatch {
            op: "graph encode (a batch of non-empty token sequences)".into(),
            expected: vec![1],
            got: vec![lengths.iter().copied().min().unwrap_or(0)],
        });
    }
    let mut states: Vec<f32> = Vec::new();
    let mut width = 0;
    for seq in batch {
        session.reset();
        let inputs = encoder_inputs(session, seq, seq.len())?;
        let out = session.run(&inputs, seq.len())?;
        let h = out.first().ok_or_else(|| ExecutionError::MissingTensor {
            name: "hidden".into(),
            required_by: "graph encode".into(),
        })?;
        let values = session.model().dispatcher().primary().try_download_f32(h)?;
        width = h.shape().last().copied().unwrap_or(0);
        if values.len() != seq.len() * width {
            return Err(ExecutionError::ShapeMismatch {
                op: "graph encode (hidden states)".into(),
                expected: vec![seq.len(), width],
                got: h.shape().to_vec(),
            });
        }
        states.extend_from_slice(&values);
        states.resize(states.len() + (longest - seq.len()) * width, 0.0);
    }
    session.reset();
    Ok(Hidden {
        states: Tensor::from_f32(&[batch.len(), longest, width], states)?,
        lengths,
    })
}
