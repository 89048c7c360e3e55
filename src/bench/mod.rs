//! `cyb-llm bench`: prompt-processing and generation throughput per backend
//! and execution path, measured like llama.cpp's `llama-bench`.
//!
//! Each (backend, path) pair is loaded once (the load is timed), then every
//! test runs one warm-up and `reps` timed repetitions on a fresh KV cache:
//!
//! - `ppN`: one forward of `N` random token ids (logits of the last row only,
//!   in chunks of 512 tokens like the generator's bulk prefill);
//! - `tgN`: `N` single-token forwards from an empty cache in the loop `run`
//!   decodes greedily with: on a backend that picks tokens on the device
//!   ([`crate::backend::Backend::argmax_on_device`]) each token after a random
//!   first one is the greedy pick of the previous logits, and its forward is
//!   queued before the pick is read back; elsewhere (and with
//!   [`BenchOptions::sync_tokens`]) each forward feeds a random token id and
//!   waits for its logits, as `llama-bench` does.
//!
//! With a depth ([`BenchOptions::n_depth`], llama-bench's `-d`) each
//! repetition first fills the cache with that many random tokens (untimed,
//! in prefill chunks), so `tg128 @ d512` is the decode after a 512-token
//! prompt, the way `run` decodes after one.
//!
//! Token ids are drawn uniformly from the vocabulary with a fixed seed, so two
//! runs see the same ids. Benchmarks never assert times.

use crate::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext, BACKENDS};
use crate::curated::llama::LogitRows;
use crate::error::ExecutionError;
use crate::graph::text::{TextCache, TextEngine};
use crate::graph::GraphOptions;
use crate::loader::{Model, WeightPages};
use crate::path::{Engine, PathChoice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Tokens per forward of a prompt test (the generator's bulk-prefill chunk).
const PREFILL_CHUNK: usize = 512;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOptions {
    /// Backend names (`cpu`, `wgpu`, ...); `auto` is resolved to the backend it picks.
    pub backends: Vec<String>,
    /// Execution paths (`--path`, resolved per backend by [`crate::path::choose`]).
    pub paths: Vec<PathChoice>,
    /// Worker threads (`-t`).
    pub threads: usize,
    /// Prompt tokens of the pp test (`-p`; 0 skips it).
    pub n_prompt: usize,
    /// Generated tokens of the tg test (`-n`; 0 skips it).
    pub n_gen: usize,
    /// Tokens already in the cache when each test starts (`-d`), prefilled untimed.
    pub n_depth: usize,
    /// Timed repetitions per test (`-r`), after one warm-up.
    pub reps: usize,
    /// Where the weights live (`--no-huge-pages`: mapped).
    pub pages: WeightPages,
    /// tg: random ids, each forward waited for (`--sync-tokens`), also where
    /// the backend could queue the next token's forward first.
    pub sync_tokens: bool,
}

/// One result row (`--output json` writes an array of these).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRow {
    /// Backend that ran the forward (the chain's first).
    pub backend: String,
    /// `curated` or `graph`.
    pub path: String,
    /// `pp512`, `tg128`, ... (`tg128 @ d512` with a depth, as llama-bench names it).
    pub test: String,
    /// Prompt tokens (0 for a tg test).
    pub n_prompt: usize,
    /// Generated tokens (0 for a pp test).
    pub n_gen: usize,
    /// Tokens in the cache before the test.
    pub n_depth: usize,
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

/// A model loaded on one path: a forward of token ids at the cache position.
struct Runner {
    engine: TextEngine,
    dispatcher: Dispatcher,
    cache: TextCache,
    ctx: ExecContext,
}

impl Runner {
    fn reset(&mut self) {
        self.cache.reset();
    }

    fn forward(&mut self, ids: &[u32]) -> Result<(), ExecutionError> {
        let logits = self.engine.forward(
            &self.dispatcher,
            &mut self.ctx,
            &mut self.cache,
            ids,
            LogitRows::Last,
        )?;
        // Wait for the result like llama-bench's synchronize (a GPU backend
        // finishes its queue here; the graph path's logits are on the host).
        if let Engine::Curated(_) = self.engine {
            self.dispatcher.primary().try_download_f32(&logits)?;
        }
        Ok(())
    }

    /// Decodes `ids.len()` tokens as `run` does greedily (see the module
    /// doc): from `ids[0]` on, each next token the device's pick; where the
    /// backend or path has no device pick, the ids one forward each, waited for.
    fn decode(&mut self, ids: &[u32]) -> Result<(), ExecutionError> {
        let Some((&first, rest)) = ids.split_first() else {
            return Ok(());
        };
        if !self.engine.takes_id_tensors() {
            return ids.iter().try_for_each(|&id| self.forward(&[id]));
        }
        let backend = self.dispatcher.primary();
        let logits = self.engine.forward(
            &self.dispatcher,
            &mut self.ctx,
            &mut self.cache,
            &[first],
            LogitRows::Last,
        )?;
        let Some(pick) = backend.argmax_on_device(&logits) else {
            backend.try_download_f32(&logits)?;
            return rest.iter().try_for_each(|&id| self.forward(&[id]));
        };
        let (mut id, mut pending) = pick?;
        for _ in rest {
            let (logits, next) = self.engine.forward_and_pick(
                &self.dispatcher,
                &mut self.ctx,
                &mut self.cache,
                id,
            )?;
            let (next_id, next_pending) = next.ok_or_else(|| ExecutionError::UnsupportedOp {
                op: "argmax on the device".into(),
                backend: backend.name().to_string(),
                input_dtype: logits.dtype(),
            })?;
            pending.wait()?;
            (id, pending) = (next_id, next_pending);
        }
        pending.wait()?;
        Ok(())
    }
}

/// A loaded runner, the name of the backend that runs it, and the load time in ms.
type Loaded = (Runner, String, f64);

/// Loads `model` for `backend` and `path`.
fn load_runner(
    file: &Path,
    backend: &str,
    path: PathChoice,
    threads: usize,
    ctx: usize,
    pages: WeightPages,
) -> Result<Loaded, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let model = Arc::new(crate::loader::load_with(file, pages)?);
    let dispatcher = Dispatcher::new(BackendChoice::parse(backend)?, &BackendConfig { threads })?;
    let opts = GraphOptions {
        ctx_size: ctx,
        ..GraphOptions::default()
    };
    let engine = TextEngine::new(&model, path, &dispatcher, opts)?;
    let cache = engine.new_cache(&dispatcher)?;
    let name = dispatcher.primary().name().to_string();
    let runner = Runner {
        engine,
        cache,
        ctx: ExecContext::new(threads),
        dispatcher,
    };
    Ok((runner, name, start.elapsed().as_secs_f64() * 1e3))
}

/// One test: prompt tokens, generated tokens and the depth they start at.
#[derive(Debug, Clone, Copy)]
struct Test {
    n_prompt: usize,
    n_gen: usize,
    n_depth: usize,
}

impl Test {
    /// llama-bench's name of the test: `pp512`, `tg128`, `tg128 @ d512`.
    fn name(self) -> String {
        let base = if self.n_prompt > 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        match self.n_depth {
            0 => base,
            d => format!("{base} @ d{d}"),
        }
    }
}

/// One repetition of a test: seconds for `n_prompt` tokens in bulk, or for
/// `n_gen` single-token forwards, after `n_depth` untimed prompt tokens.
fn run_once(
    r: &mut Runner,
    rng: &mut ChaCha8Rng,
    vocab: usize,
    Test {
        n_prompt,
        n_gen,
        n_depth,
    }: Test,
    sync_tokens: bool,
) -> Result<f64, ExecutionError> {
    r.reset();
    let mut draw =
        |n: usize| -> Vec<u32> { (0..n).map(|_| rng.gen_range(0..vocab) as u32).collect() };
    for part in draw(n_depth).chunks(PREFILL_CHUNK) {
        r.forward(part)?;
    }
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
    if sync_tokens {
        for id in ids {
            r.forward(&[id])?;
        }
    } else {
        r.decode(&ids)?;
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
    let config = crate::curated::llama::LlamaConfig::from_config(&probe.config).ok();
    let vocab = config.as_ref().map_or(vocab, |c| c.vocab);
    if vocab == 0 {
        return Err("the model has no vocabulary size to draw token ids from".into());
    }
    drop(probe);
    let ctx = opts.n_depth + opts.n_prompt.max(opts.n_gen).max(1);
    if let Some(max) = config.map(|c| c.max_positions).filter(|&m| ctx > m) {
        return Err(format!(
            "{}: a depth of {} and {} tokens need {ctx} positions, but the model's context \
             holds {max} (lower -d, -p or -n)",
            file.display(),
            opts.n_depth,
            opts.n_prompt.max(opts.n_gen)
        )
        .into());
    }
    let mut rows = Vec::new();
    for backend in &opts.backends {
        for &path in &opts.paths {
            let (mut runner, name, load_ms) =
                match load_runner(file, backend, path, opts.threads, ctx, opts.pages) {
                    Ok(x) => x,
                    Err(e) => {
                        skipped(&format!("{backend}/{}: {e}", path.name()));
                        continue;
                    }
                };
            let tests = [(opts.n_prompt, 0), (0, opts.n_gen)].map(|(n_prompt, n_gen)| Test {
                n_prompt,
                n_gen,
                n_depth: opts.n_depth,
            });
            for test in tests.into_iter().filter(|t| t.n_prompt + t.n_gen > 0) {
                let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
                let Test {
                    n_prompt, n_gen, ..
                } = test;
                run_once(&mut runner, &mut rng, vocab, test, opts.sync_tokens)?;
                let mut tok_s = Vec::with_capacity(opts.reps);
                for _ in 0..opts.reps.max(1) {
                    let secs = run_once(&mut runner, &mut rng, vocab, test, opts.sync_tokens)?;
                    tok_s.push((n_prompt + n_gen) as f64 / secs.max(1e-12));
                }
                let (mean, sd) = mean_sd(&tok_s);
                rows.push(BenchRow {
                    backend: name.clone(),
                    path: runner.engine.path_name().to_string(),
                    test: test.name(),
                    n_prompt,
                    n_gen,
                    n_depth: test.n_depth,
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
    fn test_names_follow_llama_bench() {
        let t = |n_prompt, n_gen, n_depth| {
            Test {
                n_prompt,
                n_gen,
                n_depth,
            }
            .name()
        };
        assert_eq!(t(512, 0, 0), "pp512");
        assert_eq!(t(0, 128, 0), "tg128");
        assert_eq!(t(0, 128, 512), "tg128 @ d512");
        assert_eq!(t(512, 0, 4096), "pp512 @ d4096");
    }
}
