//! The graph writer of the LlamaStyle family: the `graph` section generated
//! from the same [`LlamaConfig`] the curated family reads (families.md), so
//! any imported LlamaStyle model also runs with `--path graph` and on `nox`.
//!
//! The graph is written in unfused primitive ops (the fusion pass fuses at
//! load for the chosen backend): per layer `RmsNorm`, q/k/v `Matmul`s (+ bias
//! `Add`s), `Reshape`s, QK-norm `RmsNorm`s, `Rope`, `KvAppend`, `Sdpa`, the
//! output `Matmul`, sandwich norms, residual `Add`s, and the gated MLP; at the
//! end the last row is sliced, normed and projected to `logits` `[1, vocab]`.

use super::build::Builder;
use crate::backend::Op;
use crate::curated::llama::{Activation, LlamaConfig};
use crate::error::ExecutionError;
use crate::ir::ops::RopeFreqs;
use crate::ir::{GraphDoc, GraphOp, InputDecl, MaskKind, StateDecl};
use crate::loader::{Config, Family};

fn fixed(op: Op) -> GraphOp {
    GraphOp::Fixed(op)
}

/// The rope frequencies as `base` when they are the unscaled ones of `base`,
/// else as the explicit list.
fn freqs(inv_freq: &[f64], rot_dim: usize, base: Option<f64>) -> RopeFreqs {
    match base {
        Some(b) if crate::backend::rope_inv_freq(rot_dim, b) == inv_freq => RopeFreqs::Base(b),
        _ => RopeFreqs::List(inv_freq.to_vec()),
    }
}

/// The graph of a LlamaStyle model with `config`; `has` tells which optional
/// tensors (biases, QK norms, `lm_head.weight`) the file holds.
pub fn llama_graph(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Result<GraphDoc, ExecutionError> {
    let c = LlamaConfig::from_config(config)?;
    let a = &config.architecture;
    let global_base = Some(a.rope_theta.unwrap_or(10000.0));
    let local_base = a
        .extra
        .get("rope_local_base_freq")
        .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        .or(global_base);
    let rope_global = freqs(&c.inv_freq_global, c.rot_dim, global_base);
    let rope_local = freqs(&c.inv_freq_local, c.rot_dim, local_base);
    let mut b = Builder::new();
    let norm = fixed(Op::RmsNorm {
        eps: c.eps,
        add_one: false,
    });
    let mut h = b.op1(
        fixed(Op::Embed),
        &["tokens", "model.embed_tokens.weight"],
        "h",
    );
    if let Some(s) = c.embed_scale {
        h = b.op1(fixed(Op::Scale(s)), &[&h], "h");
    }
    let (hd, nh, nkv) = (c.head_dim as i64, c.heads as i64, c.kv_heads as i64);
    let mut state = Vec::with_capacity(c.layers);
    for i in 0..c.layers {
        let p = format!("model.layers.{i}");
        let w = |n: &str| format!("{p}.{n}");
        let x = b.op1(
            norm.clone(),
            &[&h, &w("input_layernorm.weight")],
            &format!("l{i}.attn_in"),
        );
        let mut proj = Vec::new();
        for (t, heads) in [("q", nh), ("k", nkv), ("v", nkv)] {
            let mut y = b.op1(
                fixed(Op::Matmul),
                &[&x, &w(&format!("self_attn.{t}_proj.weight"))],
                &format!("l{i}.{t}"),
            );
            let bias = w(&format!("self_attn.{t}_proj.bias"));
            if has(&bias) {
                y = b.op1(fixed(Op::Add), &[&y, &bias], &format!("l{i}.{t}"));
            }
            y = b.op1(
                GraphOp::Reshape(vec![-1, heads, hd]),
                &[&y],
                &format!("l{i}.{t}"),
            );
            proj.push(y);
        }
        let (mut q, mut k, v) = (proj[0].clone(), proj[1].clone(), proj[2].clone());
        let (qn, kn) = (w("self_attn.q_norm.weight"), w("self_attn.k_norm.weight"));
        if has(&qn) && has(&kn) {
            q = b.op1(norm.clone(), &[&q, &qn], &format!("l{i}.q"));
            k = b.op1(norm.clone(), &[&k, &kn], &format!("l{i}.k"));
        }
        let sliding = c.sliding[i];
        let rope = GraphOp::Rope {
            style: c.rope_style,
            rot_dim: Some(c.rot_dim),
            freqs: if sliding.is_some() {
                rope_local.clone()
            } else {
                rope_global.clone()
            },
        };
        q = b.op1(rope.clone(), &[&q, "pos"], &format!("l{i}.q"));
        k = b.op1(rope, &[&k, "pos"], &format!("l{i}.k"));
        let st = format!("kv.{i}");
        state.push(StateDecl {
            name: st.clone(),
            kind: "kv_cache".into(),
            layer: i,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
        });
        let (ka, va) = (format!("l{i}.K"), format!("l{i}.V"));
        b.node(GraphOp::KvAppend, &[&st, &k, &v], &[&ka, &va]);
        let sdpa = GraphOp::Sdpa {
            scale: Some(c.attn_scale),
            mask: match sliding {
                Some(w) => MaskKind::Sliding(w),
                None => MaskKind::Causal,
            },
        };
        let o = b.op1(sdpa, &[&q, &ka, &va], &format!("l{i}.attn"));
        let o = b.op1(
            GraphOp::Reshape(vec![-1, nh * hd]),
            &[&o],
            &format!("l{i}.attn"),
        );
        let mut o = b.op1(
            fixed(Op::Matmul),
            &[&o, &w("self_attn.o_proj.weight")],
            &format!("l{i}.attn_out"),
        );
        let ff_norm = if c.sandwich {
            o = b.op1(
                norm.clone(),
                &[&o, &w("post_attention_layernorm.weight")],
                &format!("l{i}.attn_out"),
            );
            w("pre_feedforward_layernorm.weight")
        } else {
            w("post_attention_layernorm.weight")
        };
        h = b.op1(fixed(Op::Add), &[&h, &o], "h");
        let f = b.op1(norm.clone(), &[&h, &ff_norm], &format!("l{i}.mlp_in"));
        let g = b.op1(
            fixed(Op::Matmul),
            &[&f, &w("mlp.gate_proj.weight")],
            &format!("l{i}.gate"),
        );
        let u = b.op1(
            fixed(Op::Matmul),
            &[&f, &w("mlp.up_proj.weight")],
            &format!("l{i}.up"),
        );
        let act = match c.act {
            Activation::Silu => Op::Silu,
            Activation::GeluTanh => Op::GeluTanh,
            Activation::Gelu => Op::Gelu,
        };
        let g = b.op1(fixed(act), &[&g], &format!("l{i}.gate"));
        let m = b.op1(fixed(Op::Mul), &[&g, &u], &format!("l{i}.mlp"));
        let mut d = b.op1(
            fixed(Op::Matmul),
            &[&m, &w("mlp.down_proj.weight")],
            &format!("l{i}.mlp_out"),
        );
        if c.sandwich {
            d = b.op1(
                norm.clone(),
                &[&d, &w("post_feedforward_layernorm.weight")],
                &format!("l{i}.mlp_out"),
            );
        }
        h = b.op1(fixed(Op::Add), &[&h, &d], "h");
    }
    let last = b.op1(
        GraphOp::Slice {
            axis: 0,
            start: -1,
            end: None,
        },
        &[&h],
        "h_last",
    );
    let x = b.op1(norm, &[&last, "model.norm.weight"], "out_norm");
    let head = if has("lm_head.weight") {
        "lm_head.weight"
    } else {
        "model.embed_tokens.weight"
    };
    let logits_name = if c.final_softcap.is_some() {
        "logits_raw"
    } else {
        "logits"
    };
    b.node(fixed(Op::Matmul), &[&x, head], &[logits_name]);
    if let Some(cap) = c.final_softcap {
        b.node(fixed(Op::Softcap(cap)), &["logits_raw"], &["logits"]);
    }
    Ok(GraphDoc {
        version: 1,
        inputs: vec![
            InputDecl {
                name: "tokens".into(),
                dtype: "i32".into(),
                shape: vec![-1],
            },
            InputDecl {
                name: "pos".into(),
                dtype: "i32".into(),
                shape: vec![],
            },
        ],
        outputs: vec!["logits".into()],
        state,
        nodes: b.nodes,
    })
}

/// The graph of a model of any family (LlamaStyle, BertStyle, WhisperStyle);
/// `None` for a model type no family claims (its file gets no `graph` section).
pub fn graph_for(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Option<Result<GraphDoc, ExecutionError>> {
    match Family::for_model_type(&config.model_type)? {
        Family::LlamaStyle => Some(llama_graph(config, has)),
        Family::BertStyle => Some(super::bert::bert_graph(config, has)),
        Family::WhisperStyle => Some(super::whisper::whisper_graph(config, has)),
    }
}

/// Adds the `graph` section an importer writes for `config` (families with a
/// graph writer only). A config the writer cannot express is reported as a
/// warning and the file gets no graph section: the import itself goes on.
pub fn write_graph_section(writer: &mut crate::loader::writer::ModelWriter<'_>, config: &Config) {
    let names: std::collections::HashSet<String> =
        writer.tensor_names().map(str::to_string).collect();
    let has = |n: &str| names.contains(n);
    match graph_for(config, &has) {
        Some(Ok(doc)) => writer.set_section("graph", doc.to_toml()),
        Some(Err(e)) => tracing::warn!("no graph section written: {e}"),
        None => {}
    }
}

/// `cyb-llm graph MODEL --emit`: generates the graph of `model` from its
/// config and writes the file again with that `graph` section added or
/// replaced, to `out` (temp file, validated by loading, then renamed; `out`
/// may be the model's own path).
pub fn emit_graph(
    model: &crate::loader::Model,
    out: &std::path::Path,
) -> Result<(), crate::error::ImportError> {
    use crate::error::ImportError;
    use crate::loader::writer::{ModelWriter, PendingTensor};
    let doc = graph_for(&model.config, &|n| model.tensors.contains(n))
        .ok_or_else(|| ImportError::Unsupported {
            path: model.path().to_path_buf(),
            reason: format!(
                "no graph writer for model_type '{}' (LlamaStyle, BertStyle and WhisperStyle models have one)",
                model.config.model_type
            ),
        })?
        .map_err(|e| ImportError::Format {
            path: model.path().to_path_buf(),
            reason: format!("cannot write a graph for this config: {e}"),
        })?;
    let mut writer = ModelWriter::new(model.name.clone());
    for s in &model.sections {
        if matches!(s.name.as_str(), "tensors" | "weights" | "graph") {
            continue;
        }
        if let Some(text) = model.section_text(&s.name) {
            writer.set_section(&s.name, text);
        }
    }
    writer.set_section("graph", doc.to_toml());
    for entry in model.tensors.entries() {
        writer.add_tensor(PendingTensor {
            name: entry.name.clone(),
            shape: entry.shape.clone(),
            dtype: entry.dtype,
            scale: entry.scale,
            data: std::borrow::Cow::Borrowed(model.tensor_of(entry).bytes),
        })?;
    }
    writer.write(out)
}
