//! The graph IR: TOML round trip, load-time validation (each violation names
//! the node id and op), shape inference with dynamic dims, the op tag table.

use cyb_llm::backend::TensorInfo;
use cyb_llm::curated::llama::llama_graph;
use cyb_llm::ir::{op_tag, Graph, GraphDoc, GraphError, OP_TAGS};
use cyb_llm::loader::config::{Architecture, Config};
use cyb_llm::DType;
use std::collections::HashMap;

fn tiny_config(model_type: &str) -> Config {
    Config {
        model_type: model_type.into(),
        architecture: Architecture {
            hidden_size: Some(32),
            num_attention_heads: Some(4),
            num_key_value_heads: Some(2),
            num_hidden_layers: Some(2),
            intermediate_size: Some(64),
            vocab_size: Some(40),
            max_position_embeddings: Some(64),
            rope_theta: Some(10000.0),
            rms_norm_eps: Some(1e-5),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The tensors a LlamaStyle model of `tiny_config` has, with shapes.
fn tiny_weights(layers: usize) -> HashMap<String, TensorInfo> {
    let mut w = HashMap::new();
    let mut put = |n: String, s: &[usize]| {
        w.insert(n, TensorInfo::new(s, DType::F32));
    };
    put("model.embed_tokens.weight".into(), &[40, 32]);
    put("model.norm.weight".into(), &[32]);
    for i in 0..layers {
        let p = format!("model.layers.{i}");
        put(format!("{p}.input_layernorm.weight"), &[32]);
        put(format!("{p}.post_attention_layernorm.weight"), &[32]);
        put(format!("{p}.self_attn.q_proj.weight"), &[32, 32]);
        put(format!("{p}.self_attn.k_proj.weight"), &[16, 32]);
        put(format!("{p}.self_attn.v_proj.weight"), &[16, 32]);
        put(format!("{p}.self_attn.o_proj.weight"), &[32, 32]);
        put(format!("{p}.mlp.gate_proj.weight"), &[64, 32]);
        put(format!("{p}.mlp.up_proj.weight"), &[64, 32]);
        put(format!("{p}.mlp.down_proj.weight"), &[32, 64]);
    }
    w
}

fn build(doc: &GraphDoc, w: &HashMap<String, TensorInfo>) -> Result<Graph, GraphError> {
    Graph::build(doc, &|n| w.get(n).cloned())
}

fn llama_doc() -> GraphDoc {
    let w = tiny_weights(2);
    llama_graph(&tiny_config("llama"), &|n| w.contains_key(n)).unwrap()
}

#[test]
fn llama_graph_round_trips_through_toml_and_validates() {
    let doc = llama_doc();
    let text = doc.to_toml();
    let back = GraphDoc::from_toml(&text).unwrap();
    assert_eq!(back, doc);
    let g = build(&back, &tiny_weights(2)).unwrap();
    // Shape inference: logits [1, vocab] static; the token axis is dynamic.
    let logits = g.outputs[0];
    assert_eq!(g.values[logits].shape, vec![Some(1), Some(40)]);
    let h0 = g.nodes[0].outputs[0];
    assert_eq!(g.values[h0].shape, vec![None, Some(32)]);
    let rope = g.nodes.iter().find(|n| n.op.name() == "Rope").unwrap();
    assert_eq!(
        g.values[rope.outputs[0]].shape,
        vec![None, Some(4), Some(8)]
    );
    let kv = g.nodes.iter().find(|n| n.op.name() == "KvAppend").unwrap();
    assert_eq!(g.values[kv.outputs[0]].shape, vec![None, Some(2), Some(8)]);
    // The validated graph writes back to the same text.
    assert_eq!(g.to_doc(), doc);
}

fn node_named<'a>(doc: &'a mut GraphDoc, op: &str) -> &'a mut cyb_llm::ir::NodeDecl {
    doc.nodes.iter_mut().find(|n| n.op == op).unwrap()
}

#[test]
fn unknown_op_is_unsupported_op_naming_the_node() {
    let mut doc = llama_doc();
    let n = node_named(&mut doc, "Silu");
    n.op = "FancyAct".into();
    let id = n.id;
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert!(e.unsupported, "{e}");
    assert_eq!((e.node, e.op.as_str()), (Some(id), "FancyAct"));
    let le = e.into_load_error(std::path::Path::new("m.model"));
    assert!(
        matches!(&le, cyb_llm::LoadError::UnsupportedOp { node, op, .. } if *node == id && op == "FancyAct"),
        "{le}"
    );
}

#[test]
fn out_of_order_node_is_a_load_error_naming_node_and_op() {
    let mut doc = llama_doc();
    // Move the first Mul (the MLP gate product) before its inputs exist.
    let at = doc.nodes.iter().position(|n| n.op == "Mul").unwrap();
    let node = doc.nodes.remove(at);
    let id = node.id;
    doc.nodes.insert(1, node);
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!((e.node, e.op.as_str()), (Some(id), "Mul"));
    assert!(e.reason.contains("topological"), "{e}");
}

#[test]
fn cycle_is_rejected() {
    let mut doc = llama_doc();
    // Node 1 reads the output of node 2 and node 2 reads node 1's: a cycle.
    let out2 = doc.nodes[2].outputs[0].clone();
    doc.nodes[1].inputs[0] = out2;
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!(e.node, Some(doc.nodes[1].id));
    assert!(e.reason.contains("does not come earlier"), "{e}");
}

#[test]
fn unresolved_name_and_duplicate_output_are_errors() {
    let mut doc = llama_doc();
    doc.nodes[2].inputs[1] = "model.layers.0.nope.weight".into();
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!(e.node, Some(doc.nodes[2].id));
    assert!(e.reason.contains("nope"), "{e}");

    let mut doc = llama_doc();
    let dup = doc.nodes[1].outputs[0].clone();
    doc.nodes[2].outputs[0] = dup;
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!(e.node, Some(doc.nodes[2].id));
    assert!(e.reason.contains("defined twice"), "{e}");
}

#[test]
fn shape_violation_names_node_and_op() {
    let mut w = tiny_weights(2);
    // A q projection with the wrong input width.
    w.insert(
        "model.layers.1.self_attn.q_proj.weight".into(),
        TensorInfo::new(&[32, 31], DType::F32),
    );
    let doc = llama_doc();
    let e = build(&doc, &w).unwrap_err();
    let bad = doc
        .nodes
        .iter()
        .find(|n| {
            n.inputs
                .iter()
                .any(|i| i == "model.layers.1.self_attn.q_proj.weight")
        })
        .unwrap();
    assert_eq!((e.node, e.op.as_str()), (Some(bad.id), "Matmul"));
}

#[test]
fn bad_attrs_and_state_misuse_are_errors() {
    let mut doc = llama_doc();
    let n = node_named(&mut doc, "RmsNorm");
    n.attrs.insert("epsilon".into(), toml::Value::Float(1e-5));
    let id = n.id;
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!(e.node, Some(id));
    assert!(e.reason.contains("epsilon"), "{e}");

    let mut doc = llama_doc();
    let n = node_named(&mut doc, "Silu");
    n.inputs[0] = "kv.0".into();
    let id = n.id;
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert_eq!(e.node, Some(id));
    assert!(e.reason.contains("state"), "{e}");

    // A second append to the same cache in one forward.
    let mut doc = llama_doc();
    let kv1 = doc.nodes.iter().rposition(|n| n.op == "KvAppend").unwrap();
    doc.nodes[kv1].inputs[0] = "kv.0".into();
    let e = build(&doc, &tiny_weights(2)).unwrap_err();
    assert!(e.reason.contains("appended to twice"), "{e}");
}

#[test]
fn dynamic_dims_resolve_and_static_mismatch_fails() {
    let text = r#"
version = 1
inputs = [{ name = "x", dtype = "f32", shape = [-1, 6] }]
outputs = ["y"]

[[nodes]]
id = 7
op = "Reshape"
inputs = ["x"]
outputs = ["r"]
attrs = { shape = [-1, 2, 3] }

[[nodes]]
id = 8
op = "Slice"
inputs = ["r"]
outputs = ["y"]
attrs = { axis = 0, start = -1 }
"#;
    let doc = GraphDoc::from_toml(text).unwrap();
    let g = build(&doc, &HashMap::new()).unwrap();
    let r = g.nodes[0].outputs[0];
    assert_eq!(g.values[r].shape, vec![None, Some(2), Some(3)]);
    assert_eq!(
        g.values[g.outputs[0]].shape,
        vec![Some(1), Some(2), Some(3)]
    );

    let bad = text.replace("[-1, 2, 3]", "[-1, 4]");
    let e = build(&GraphDoc::from_toml(&bad).unwrap(), &HashMap::new()).unwrap_err();
    assert_eq!((e.node, e.op.as_str()), (Some(7), "Reshape"));
}

#[test]
fn op_tags_are_unique_and_stable() {
    let mut tags: Vec<u16> = OP_TAGS.iter().map(|&(_, t)| t).collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), OP_TAGS.len());
    // Append-only table: the first entries keep their numbers forever.
    assert_eq!(op_tag("Matmul"), Some(1));
    assert_eq!(op_tag("KvAppend"), Some(30));
    assert_eq!(op_tag("FusedSwiGlu"), Some(36));
    assert_eq!(op_tag("NoSuchOp"), None);
}
