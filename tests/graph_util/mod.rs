//! Helpers shared by the graph-path tests: greedy decoding on the curated
//! family and on the graph executor (any backend), and ops.md's relative error.

#![allow(dead_code)]

use cyb_llm::backend::{BackendChoice, BackendConfig, DispatchRecord, Dispatcher, ExecContext};
use cyb_llm::curated::llama::{Llama, LogitRows};
use cyb_llm::graph::{GraphModel, GraphOptions};
use cyb_llm::loader::Model;
use std::sync::Arc;

/// Index of the largest value (ties to the lowest index).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// ops.md relative error: `max|y - ref| / max(max|ref|, 1e-6)`.
pub fn rel_err(y: &[f32], r: &[f32]) -> f32 {
    assert_eq!(y.len(), r.len());
    let scale = r.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    let diff = y
        .iter()
        .zip(r)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

/// Greedy decoding on the curated family with `backend`: the `n` tokens and
/// the logits of every step.
pub fn curated_greedy(
    model: &Arc<Model>,
    backend: &str,
    ctx_size: usize,
    ids: &[u32],
    n: usize,
) -> (Vec<u32>, Vec<Vec<f32>>) {
    let d = Dispatcher::new(
        BackendChoice::Named(backend.into()),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    let llama = Llama::new(model.clone(), ctx_size).unwrap();
    let mut cache = llama.new_cache(&d).unwrap();
    let mut ctx = ExecContext::new(2);
    let mut step = |ids: &[u32]| {
        let t = llama
            .forward(&d, &mut ctx, &mut cache, ids, LogitRows::Last)
            .unwrap();
        d.primary().try_download_f32(&t).unwrap()
    };
    let mut logits = vec![step(ids)];
    let mut out = Vec::new();
    for _ in 0..n {
        let t = argmax(logits.last().unwrap());
        out.push(t);
        logits.push(step(&[t]));
    }
    logits.pop();
    (out, logits)
}

/// A graph-path run: logits of every step, their argmaxes, the trace hash,
/// how many fusions were made and the dispatch records of the last forward.
pub struct GraphRun {
    /// Logits of the prompt and of every fed token but the last.
    pub logits: Vec<Vec<f32>>,
    /// Argmax of each row of `logits`.
    pub greedy: Vec<u32>,
    /// Trace hash chain head.
    pub trace: Option<String>,
    /// Fusion rewrites.
    pub fused: usize,
    /// Dispatch records of the last forward.
    pub records: Vec<DispatchRecord>,
}

/// Feeds the prompt `ids`, then `feed` one token at a time, on the graph path.
pub fn graph_run(
    model: &Arc<Model>,
    backend: &str,
    threads: usize,
    fuse: bool,
    ctx_size: usize,
    ids: &[u32],
    feed: &[u32],
) -> GraphRun {
    let opts = GraphOptions {
        fuse,
        ctx_size,
        trace: true,
        keep_dispatch: true,
    };
    let gm = Arc::new(
        GraphModel::with_backend(
            model.clone(),
            BackendChoice::Named(backend.into()),
            threads,
            opts,
        )
        .unwrap(),
    );
    let mut s = gm.session().unwrap();
    let mut logits = vec![s.forward(ids).unwrap()];
    for &t in feed {
        logits.push(s.forward(&[t]).unwrap());
    }
    logits.pop();
    GraphRun {
        greedy: logits.iter().map(|l| argmax(l)).collect(),
        logits,
        trace: s.trace().map(|(h, _)| h),
        fused: gm.fused_count(),
        records: s.context().log.records().to_vec(),
    }
}

/// Asserts every step's relative error is within `tol` and prints the largest.
pub fn assert_close(what: &str, got: &[Vec<f32>], reference: &[Vec<f32>], tol: f32) {
    assert_eq!(got.len(), reference.len(), "{what}: step count");
    let mut worst = 0.0f32;
    for (i, (g, r)) in got.iter().zip(reference).enumerate() {
        let e = rel_err(g, r);
        assert!(e <= tol, "{what}: step {i}: relative error {e} > {tol}");
        worst = worst.max(e);
    }
    eprintln!(
        "{what}: max relative error {worst:.3e} over {} steps",
        got.len()
    );
}
