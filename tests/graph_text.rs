//! The generator hook: [`TextEngine`] runs the same conversation on the
//! curated family and on the graph path (SmolLM2 from its GGUF), with the
//! `--path` / `--backend nox` rules of graph.md.

use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext};
use cyb_llm::curated::llama::LogitRows;
use cyb_llm::graph::text::TextEngine;
use cyb_llm::graph::GraphOptions;
use cyb_llm::import::{import, ImportOptions};
use cyb_llm::path::PathChoice;
use cyb_llm::tokenizer::Tokenizer;
use cyb_llm::ExecutionError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn smollm2(no_graph: bool) -> (tempfile::TempDir, Arc<cyb_llm::Model>) {
    let dir = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"));
    let src = dir.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        src.is_file(),
        "{} is missing: run scripts/fetch-models.sh",
        src.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.model");
    let opts = ImportOptions {
        no_graph,
        ..Default::default()
    };
    import(&src, &out, &opts).unwrap();
    let m = Arc::new(cyb_llm::load(&out).unwrap());
    (tmp, m)
}

/// The engine for `path` on `backend` (2 threads, 64 tokens, fused, traced).
fn engine(
    model: &Arc<cyb_llm::Model>,
    path: PathChoice,
    backend: &str,
) -> Result<TextEngine, ExecutionError> {
    let d = Dispatcher::new(
        BackendChoice::parse(backend).unwrap(),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    let opts = GraphOptions {
        ctx_size: 64,
        trace: true,
        ..GraphOptions::default()
    };
    TextEngine::new(model, path, &d, opts)
}

fn greedy(engine: &TextEngine, ids: &[u32], n: usize) -> (Vec<u32>, Option<String>) {
    let d = Dispatcher::new(
        BackendChoice::Named("cpu".into()),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    let mut ctx = ExecContext::new(2);
    let mut cache = engine.new_cache(&d).unwrap();
    let mut out = Vec::new();
    let mut next = ids.to_vec();
    for _ in 0..n {
        let l = engine
            .forward(&d, &mut ctx, &mut cache, &next, LogitRows::Last)
            .unwrap();
        let v = l.as_f32().unwrap().to_vec();
        assert_eq!(v.len(), engine.vocab());
        let mut best = 0;
        for (i, &x) in v.iter().enumerate() {
            if x > v[best] {
                best = i;
            }
        }
        out.push(best as u32);
        next = vec![best as u32];
    }
    assert_eq!(cache.len(), ids.len() + n - 1);
    // The graph path's ops are recorded in the caller's context.
    assert!(ctx.log.counts().values().sum::<usize>() > 0);
    (out, cache.trace().map(|t| t.0))
}

#[test]
fn curated_and_graph_engines_generate_the_same_tokens() {
    let (_tmp, model) = smollm2(false);
    let ids = Tokenizer::from_model(&model)
        .unwrap()
        .encode("The capital of France is", true)
        .unwrap();
    let curated = engine(&model, PathChoice::Auto, "cpu").unwrap();
    assert_eq!(curated.path_name(), "curated");
    let graph = engine(&model, PathChoice::Graph, "cpu").unwrap();
    assert_eq!(graph.path_name(), "graph");
    assert_eq!(graph.vocab(), curated.vocab());
    assert_eq!(graph.max_ctx(), curated.max_ctx());
    let (a, no_trace) = greedy(&curated, &ids, 8);
    let (b, trace) = greedy(&graph, &ids, 8);
    assert_eq!(a, b);
    assert!(no_trace.is_none() && trace.is_some());
    // nox takes the graph path under auto; curated code never runs on it.
    let nox = engine(&model, PathChoice::Auto, "nox").unwrap();
    assert_eq!(nox.path_name(), "graph");
    assert!(engine(&model, PathChoice::Curated, "nox").is_err());
    // Rows from the third token on: the graph path runs the tokens one forward
    // each and returns the same rows as the curated path's one forward.
    let d = Dispatcher::new(
        BackendChoice::Named("cpu".into()),
        &BackendConfig { threads: 1 },
    )
    .unwrap();
    let rows = |engine: &TextEngine| {
        let mut cache = engine.new_cache(&d).unwrap();
        let mut ctx = ExecContext::new(1);
        let t = engine
            .forward(&d, &mut ctx, &mut cache, &ids, LogitRows::From(2))
            .unwrap();
        assert_eq!(t.shape(), &[ids.len() - 2, engine.vocab()]);
        assert_eq!(cache.len(), ids.len());
        d.primary().try_download_f32(&t).unwrap()
    };
    let (c, g) = (rows(&curated), rows(&graph));
    let argmax = |r: &[f32]| (0..r.len()).max_by(|&i, &j| r[i].total_cmp(&r[j])).unwrap();
    for (rc, rg) in c.chunks(curated.vocab()).zip(g.chunks(graph.vocab())) {
        assert_eq!(argmax(rc), argmax(rg));
        let scale = rc.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = rc
            .iter()
            .zip(rg)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(diff <= 5e-2 * scale, "max |diff| {diff} of {scale}");
    }
}

#[test]
fn nox_without_a_graph_section_is_backend_init() {
    let (_tmp, model) = smollm2(true);
    let e = engine(&model, PathChoice::Auto, "nox").err().unwrap();
    assert_eq!(
        e,
        ExecutionError::BackendInit {
            backend: "nox".into(),
            reason: "model has no graph section".into()
        }
    );
    assert!(engine(&model, PathChoice::Graph, "cpu").is_err());
}
