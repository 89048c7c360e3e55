//! The BertStyle graph section on the real all-MiniLM-L6-v2: the importer
//! writes a graph generated from the config, `--path graph` embeddings equal
//! the curated family's (cosine >= 0.9999) and sentence-transformers'
//! (tests/fixtures/bert/minilm_embeddings.json); the padding mask of the
//! graph's Sdpa hides padded keys; nox agrees with the cpu graph and is
//! bit-exact across runs and 1 vs 2 threads (hidden states and trace hash);
//! `cyb-llm embed --path graph` prints the curated CLI's embeddings.

mod bert_util;

use bert_util::{cosine, fixture, floats, minilm_model, rel_err};
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher};
use cyb_llm::encode::{EmbedOptions, Encoder};
use cyb_llm::graph::{bert, GraphModel, GraphOptions};
use cyb_llm::path::PathChoice;
use std::process::Command;
use std::sync::Arc;

fn texts() -> Vec<String> {
    fixture("minilm_embeddings.json")["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn encoder(backend: &str, threads: usize, path: PathChoice) -> Encoder {
    let model = Arc::new(cyb_llm::load(minilm_model()).unwrap());
    let d = Dispatcher::new(
        BackendChoice::Named(backend.into()),
        &BackendConfig { threads },
    )
    .unwrap();
    Encoder::with_path(model, d, path).unwrap()
}

fn embed(enc: &mut Encoder, texts: &[String], batch_size: usize) -> Vec<Vec<f32>> {
    let opts = EmbedOptions {
        batch_size,
        ..EmbedOptions::defaults(enc.bert())
    };
    enc.embed(texts, &opts, &mut |_| {}).unwrap()
}

#[test]
fn import_writes_a_validated_encoder_graph() {
    let model = cyb_llm::load(minilm_model()).unwrap();
    let g = model
        .graph
        .as_ref()
        .expect("MiniLM was imported without a graph section");
    let names: Vec<&str> = g.input_decls.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["tokens", "token_types", "positions", "mask"]);
    assert!(g.states.is_empty(), "an encoder has no KV state");
    let out = &g.values[g.outputs[0]];
    assert_eq!(out.shape, [None, Some(384)], "hidden [S, 384]");
    let sdpa = g.nodes.iter().filter(|n| n.op.name() == "Sdpa").count();
    assert_eq!(sdpa, 6, "one attention per layer");
    let ln = g
        .nodes
        .iter()
        .filter(|n| n.op.name() == "LayerNorm")
        .count();
    assert_eq!(ln, 1 + 2 * 6, "embedding norm + two per layer");
    // Re-emitting from the same config gives the same graph.
    let doc = cyb_llm::graph::graph_for(&model.config, &|n| model.tensors.contains(n))
        .unwrap()
        .unwrap();
    assert_eq!(
        doc.to_toml().trim_end(),
        model.section_text("graph").unwrap().trim_end()
    );
}

#[test]
fn graph_embeddings_match_curated_and_sentence_transformers() {
    let texts = texts();
    let fx = fixture("minilm_embeddings.json");
    let mut curated = encoder("cpu", 2, PathChoice::Curated);
    let mut graph = encoder("cpu", 2, PathChoice::Graph);
    assert_eq!(
        (curated.path_name(), graph.path_name()),
        ("curated", "graph")
    );
    let want = embed(&mut curated, &texts, 32);
    let mut worst = (1.0f64, 1.0f64);
    for batch_size in [1, 32] {
        let got = embed(&mut graph, &texts, batch_size);
        for (i, (g, c)) in got.iter().zip(&want).enumerate() {
            let vs_curated = cosine(g, c);
            let vs_st = cosine(g, &floats(&fx["embeddings"][i]));
            assert!(
                vs_curated >= 0.9999 && vs_st >= 0.9999,
                "batch {batch_size}, sentence {i} {:?}: cosine vs curated {vs_curated}, vs sentence-transformers {vs_st}",
                texts[i]
            );
            worst = (worst.0.min(vs_curated), worst.1.min(vs_st));
        }
    }
    eprintln!(
        "MiniLM graph: min cosine vs curated {:.7}, vs sentence-transformers {:.7} (20 sentences)",
        worst.0, worst.1
    );
    // The raw hidden states too, to ops.md's full-forward tolerance.
    let tokens = curated.tokenize(&texts).unwrap().tokens;
    let hc = curated.encode(&tokens).unwrap();
    let hg = graph.encode(&tokens).unwrap();
    assert_eq!(hc.lengths, hg.lengths);
    for (b, &n) in hc.lengths.iter().enumerate() {
        for i in 0..n {
            let e = rel_err(hg.token(b, i).unwrap(), hc.token(b, i).unwrap());
            assert!(e <= 1e-3, "sentence {b} token {i}: relative error {e}");
        }
    }
}

/// Runs one sequence through the graph with `pad` padding tokens after it.
fn hidden_with_padding(gm: &Arc<GraphModel>, ids: &[u32], pad: usize) -> Vec<f32> {
    let mut s = gm.session().unwrap();
    let mut padded = ids.to_vec();
    padded.resize(ids.len() + pad, 0);
    let inputs = bert::encoder_inputs(&s, &padded, ids.len()).unwrap();
    let out = s.run(&inputs, padded.len()).unwrap();
    let v = gm.dispatcher().primary().try_download_f32(&out[0]).unwrap();
    v[..ids.len() * 384].to_vec()
}

#[test]
fn the_padding_mask_hides_padded_keys() {
    let model = Arc::new(cyb_llm::load(minilm_model()).unwrap());
    let gm = Arc::new(
        GraphModel::with_backend(
            model,
            BackendChoice::Named("cpu".into()),
            2,
            GraphOptions::default(),
        )
        .unwrap(),
    );
    let ids = [101, 1037, 2158, 2003, 5983, 2833, 1012, 102];
    let plain = hidden_with_padding(&gm, &ids, 0);
    let padded = hidden_with_padding(&gm, &ids, 5);
    let e = rel_err(&padded, &plain);
    assert!(e <= 1e-5, "padding changed the real tokens' states: {e}");
    // Without the mask the padding would be attended: make sure it matters.
    let mut s = gm.session().unwrap();
    let mut unmasked = ids.to_vec();
    unmasked.resize(ids.len() + 5, 0);
    let inputs = bert::encoder_inputs(&s, &unmasked, unmasked.len()).unwrap();
    let out = s.run(&inputs, unmasked.len()).unwrap();
    let v = gm.dispatcher().primary().try_download_f32(&out[0]).unwrap();
    assert!(rel_err(&v[..ids.len() * 384], &plain) > 1e-3);
}

#[test]
fn nox_embeddings_match_cpu_and_are_bit_exact() {
    let texts: Vec<String> = texts().into_iter().take(6).collect();
    let mut cpu = encoder("cpu", 2, PathChoice::Graph);
    let want = embed(&mut cpu, &texts, 8);
    let mut runs = Vec::new();
    for threads in [1, 2, 2] {
        let mut nox = encoder("nox", threads, PathChoice::Auto);
        assert_eq!(nox.path_name(), "graph", "nox runs the graph path only");
        runs.push(embed(&mut nox, &texts, 8));
    }
    for (i, (n, c)) in runs[0].iter().zip(&want).enumerate() {
        let cos = cosine(n, c);
        assert!(cos >= 0.9999, "sentence {i}: nox vs cpu cosine {cos}");
    }
    let bits =
        |r: &Vec<Vec<f32>>| -> Vec<u32> { r.iter().flatten().map(|x| x.to_bits()).collect() };
    assert!(
        bits(&runs[0]) == bits(&runs[1]),
        "nox: 1 vs 2 threads differ"
    );
    assert!(bits(&runs[1]) == bits(&runs[2]), "nox: two runs differ");
    // The trace hash of one encoder call, across thread counts.
    let model = Arc::new(cyb_llm::load(minilm_model()).unwrap());
    let ids = [101u32, 1037, 2158, 2003, 5983, 2833, 1012, 102];
    let trace = |threads: usize| {
        let opts = GraphOptions {
            trace: true,
            ..Default::default()
        };
        let gm = Arc::new(
            GraphModel::with_backend(
                model.clone(),
                BackendChoice::Named("nox".into()),
                threads,
                opts,
            )
            .unwrap(),
        );
        let mut s = gm.session().unwrap();
        let inputs = bert::encoder_inputs(&s, &ids, ids.len()).unwrap();
        s.run(&inputs, ids.len()).unwrap();
        s.trace().unwrap().0
    };
    let (a, b) = (trace(1), trace(2));
    assert_eq!(a, b, "nox trace hash differs between 1 and 2 threads");
    eprintln!("nox trace hash (MiniLM, 8 tokens): {a}");
}

fn cli_embed(path: &str) -> Vec<Vec<f32>> {
    let o = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .args(["embed"])
        .arg(minilm_model())
        .args([
            "--text",
            "A man is eating food.",
            "--text",
            "A man is eating a piece of bread.",
            "--json",
            "--backend",
            "cpu",
            "--path",
            path,
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "embed --path {path}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| floats(&x["embedding"]))
        .collect()
}

#[test]
fn cli_embed_path_graph_matches_curated() {
    let (g, c) = (cli_embed("graph"), cli_embed("curated"));
    assert_eq!(g.len(), 2);
    for (a, b) in g.iter().zip(&c) {
        assert!(cosine(a, b) >= 0.9999);
    }
    let sim = cosine(&g[0], &g[1]);
    assert!((sim - 0.755).abs() < 0.01, "known similarity: {sim}");
}
