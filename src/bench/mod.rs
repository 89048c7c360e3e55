//! `cyb-llm bench`: prompt-processing and generation throughput per backend
//! and execution path, measured like llama.cpp's `llama-bench`.
//!
//! Each (backend, path) pair is loaded once (the load is timed), then every
//! test runs one warm-up and `reps` timed repetitions on a fresh KV cache:
//!
//! - `ppN`: one forward of `N` random token ids (logits of the last row only,
//!   in chunks of 512 tokens like the generator's bulk prefill);
//! - `tgN`: `N` single-token forwards from an empty cache, each feeding a
//!   random token id (no sampling, as `llama-bench` does).
//!
//! Token ids are drawn uniformly from the vocabulary with a fixed seed, so two
//! runs see the same ids. Benchmarks never assert times.

use crate::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext, BACKENDS};
use crate::curated::llama::{Llama, LogitRows};
use crate::error::ExecutionError;
use crate::graph::exec::{GraphModel, GraphOptions};
use crate::loader::Model;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Tokens per forward of a prompt test (the generator's bulk-prefill chunk).
const PREFILL_CHUNK: usize = 512;

/// Which code runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchPath {
    /// The hand-written family (LlamaStyle).
    Curated,
    /// The graph executor over the model's graph section.
    Graph,
}

impl BenchPath {
    /// `curated` or `graph`.
    pub fn name(self) -> &'static str {
        match self {
            BenchPath::Curated => "curated",
            BenchPath::Graph => "graph",
        }
    }

    /// Parses `curated` or `graph`.
    pub fn parse(s: &str) -> Option<BenchPath> {
        match s {
            "curated" => Some(BenchPath::Curated),
            "graph" => Some(BenchPath::Graph),
            _ => None,
        }
    }
}

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOptions {
    /// Backend names (`cpu`, `wgpu`, ...); `auto` is resolved to the backend it picks.
    pub backends: Vec<String>,
    /// Execution paths.
    pub paths: Vec<BenchPath>,
    /// Worker threads (`-t`).
    pub threads: usize,
    /// Prompt tokens of the pp test (`-p`; 0 skips it).
    pub n_prompt: usize,
    /// Generated tokens of the tg test (`-n`; 0 skips it).
    pub n_gen: usize,
    /// Timed repetitions per test (`-r`), after one warm-up.
    pub reps: usize,
}

/// One result row (`--output json` writes an array of these).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRow {
    /// Backend that ran the forward (the chain's first).
    pub backend: String,
    /// `curated` or `graph`.
    pub path: String,
    /// `pp512`, `tg128`, ...
    pub test: String,
    /// Prompt tokens (0 for a tg test).
    pub n_prompt: usize,
    /// Generated tokens (0 for a pp test).
    pub n_gen: usize,
    /// Worker threads.
    pub threads: usize,
    /// Mean tokens per second over the repetitions.
    pub tokens_per_s: f64,
    /// Sample standard deviation of the tokens per second.
    pub stddev: f64,
    /// Bytes of weights one token's forward reads × tokens per second, in GB/s.
    pub gb_per_s: f64,
    /// Milliseconds to load the model for this backend and path.
    pub load_ms: f64,
}

/// Bytes of weights one token's forward reads: every matrix once, and one row
/// of the embedding table unless it doubles as the output head.
pub fn weight_bytes_per_token(model: &Model) -> u64 {
    let tied = !model.tensors.contains("lm_head.weight");
    model
        .tensors
        .entries()
        .iter()
        .map(|e| {
            if e.name == "model.embed_tokens.weight" && !tied {
                e.size / e.shape.first().copied().unwrap_or(1).max(1) as u64
            } else {
                e.size
            }
        })
        .sum()
}

/// Mean and sample standard deviation.
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The backends `--backend all` means: every registered backend that runs
/// the curated path (not the graph-only `nox`, not the `reference` arbiter).
pub fn all_backends() -> Vec<String> {
    BACKENDS
        .iter()
        .filter(|e| e.auto)
        .map(|e| e.name.to_string())
        .collect()
}

/// A model loaded for one path: a forward of token ids at the cache position.
trait Runner {
    fn reset(&mut self);
    fn forward(&mut self, ids: &[u32]) -> Result<(), ExecutionError>;
}

struct Curated {
    llama: Llama,
    dispatcher: Dispatcher,
    cache: crate::curated::llama::KvCache,
    ctx: ExecContext,
}

impl Runner for Curated {
    fn reset(&mut self) {
        self.cache.reset();
    }

    fn forward(&mut self, ids: &[u32]) -> Result<(), ExecutionError> {
        let logits = self.llama.forward(
            &self.dispatcher,
            &mut self.ctx,
            &mut self.cache,
            ids,
            LogitRows::Last,
        )?;
        // Wait for the result like llama-bench's synchronize (a GPU backend
        // finishes its queue here).
        self.dispatcher.primary().try_download_f32(&logits)?;
        Ok(())
    }
}

struct GraphRunner(crate::graph::exec::GraphSession);

impl Runner for GraphRunner {
    fn reset(&mut self) {
        self.0.reset();
    }

    fn forward(&mut self, ids: &[u32]) -> Result<(), ExecutionError> {
        self.0.forward(ids).map(|_| ())
    }
}

/// A loaded runner, the name of the backend that runs it, and the load time in ms.
type Loaded = (Box<dyn Runner>, String, f64);

/// Loads `model` for `backend` and `path`.
fn load_runner(
    file: &Path,
    backend: &str,
    path: BenchPath,
    threads: usize,
    ctx: usize,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let model = Arc::new(crate::loader::load(file)?);
    let choice = BackendChoice::parse(backend)?;
    let (runner, name): (Box<dyn Runner>, String) = match path {
        BenchPath::Curated => {
            let dispatcher = Dispatcher::new(choice, &BackendConfig { threads })?;
            let llama = Llama::new(model, ctx)?;
            let cache = llama.new_cache(&dispatcher)?;
            let name = dispatcher.primary().name().to_string();
            (
                Box::new(Curated {
                    llama,
                    cache,
                    ctx: ExecContext::new(threads),
                    dispatcher,
                }),
                name,
            )
        }
        BenchPath::Graph => {
            let opts = GraphOptions {
                ctx_size: ctx,
                ..GraphOptions::default()
            };
            let gm = Arc::new(GraphModel::with_backend(model, choice, threads, opts)?);
            let name = gm.dispatcher().primary().name().to_string();
            (Box::new(GraphRunner(gm.session()?)), name)
        }
    };
    Ok((runner, name, start.elapsed().as_secs_f64() * 1e3))
}

/// One repetition of a test: seconds for `n_prompt` tokens in bulk, or for
/// `n_gen` single-token forwards.
fn run_once(
    r: &mut dyn Runner,
    rng: &mut ChaCha8Rng,
    vocab: usize,
    n_prompt: usize,
    n_gen: usize,
) -> Result<f64, ExecutionError> {
    r.reset();
    let mut draw =
        |n: usize| -> Vec<u32> { (0..n).map(|_| rng.gen_range(0..vocab) as u32).collect() };
    if n_prompt > 0 {
        let ids = draw(n_prompt);
        let start = Instant::now();
        for part in ids.chunks(PREFILL_CHUNK) {
            r.forward(part)?;
        }
        return Ok(start.elapsed().as_secs_f64());
    }
    let ids = draw(n_gen);
    let start = Instant::now();
    for id in ids {
        r.forward(&[id])?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Runs every (backend, path, test) of `opts` on the model at `file`. A
/// backend that cannot start or a path the model lacks is reported through
/// `skipped` and left out of the rows.
pub fn run(
    file: &Path,
    opts: &BenchOptions,
    mut skipped: impl FnMut(&str),
) -> Result<Vec<BenchRow>, Box<dyn std::error::Error>> {
    let probe = crate::loader::load(file)?;
    let bytes = weight_bytes_per_token(&probe) as f64;
    let vocab = probe.vocab.as_ref().map_or(0, |v| v.tokens.len());
    let vocab = crate::curated::llama::LlamaConfig::from_config(&probe.config)
        .map(|c| c.vocab)
        .unwrap_or(vocab);
    if vocab == 0 {
        return Err("the model has no vocabulary size to draw token ids from".into());
    }
    let has_graph = probe.graph.is_some();
    drop(probe);
    let ctx = opts.n_prompt.max(opts.n_gen).max(1);
    let mut rows = Vec::new();
    for backend in &opts.backends {
        for &path in &opts.paths {
            if path == BenchPath::Graph && !has_graph {
                skipped(&format!(
                    "{backend}/{}: the model has no graph section",
                    path.name()
                ));
                continue;
            }
            let (mut runner, name, load_ms) =
                match load_runner(file, backend, path, opts.threads, ctx) {
                    Ok(x) => x,
                    Err(e) => {
                        skipped(&format!("{backend}/{}: {e}", path.name()));
                        continue;
                    }
                };
            let tests = [(opts.n_prompt, 0), (0, opts.n_gen)];
            for (n_prompt, n_gen) in tests.into_iter().filter(|&(p, g)| p + g > 0) {
                let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
                run_once(runner.as_mut(), &mut rng, vocab, n_prompt, n_gen)?;
                let mut tok_s = Vec::with_capacity(opts.reps);
                for _ in 0..opts.reps.max(1) {
                    let secs = run_once(runner.as_mut(), &mut rng, vocab, n_prompt, n_gen)?;
                    tok_s.push((n_prompt + n_gen) as f64 / secs.max(1e-12));
                }
                let (mean, sd) = mean_sd(&tok_s);
                rows.push(BenchRow {
                    backend: name.clone(),
                    path: path.name().to_string(),
                    test: if n_prompt > 0 {
                        format!("pp{n_prompt}")
                    } else {
                        format!("tg{n_gen}")
                    },
                    n_prompt,
                    n_gen,
                    threads: opts.threads,
                    tokens_per_s: mean,
                    stddev: sd,
                    gb_per_s: bytes * mean / 1e9,
                    load_ms,
                });
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        let (m, s) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        // Sample variance 32/7.
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
    }

    #[test]
    fn paths_parse() {
        assert_eq!(BenchPath::parse("graph"), Some(BenchPath::Graph));
        assert_eq!(
            BenchPath::parse("curated").map(BenchPath::name),
            Some("curated")
        );
        assert_eq!(BenchPath::parse("auto"), None);
    }
}
