//! Perplexity and KL divergence of a text model, by llama.cpp's
//! `llama-perplexity` method (the field's measure of a quantized model's
//! accuracy):
//!
//! - the text is tokenized as llama.cpp does it (special tokens added, e.g.
//!   BOS, not parsed from the text) and cut into `ctx`-token chunks; the rest
//!   after the last whole chunk is dropped;
//! - each chunk runs from an empty KV cache, its first token replaced by BOS
//!   where the tokenizer adds one, in forwards of `batch` tokens;
//! - the logits of positions `ctx/2 .. ctx-2` score the token that follows
//!   each (`ctx - 1 - ctx/2` tokens per chunk), as `-ln softmax(logits)[next]`;
//! - PPL = `exp(mean nll)`, its uncertainty `sqrt(var(nll) / (n - 1)) * PPL`.
//!
//! [`evaluate`] runs the loop and hands each chunk's scored rows to a
//! [`ChunkSink`]: [`Perplexity`] accumulates the estimate, [`kld::BaseWriter`]
//! saves the log-probabilities of a run, [`kld::Comparison`] scores a run
//! against a saved one.
//!
//! ```no_run
//! use cyb_llm::generate::{LoadOptions, TextModel};
//! use cyb_llm::perplexity::{evaluate, tokenize, Options, Perplexity};
//! let model = TextModel::load("smollm2.model", &LoadOptions::default())?;
//! let tokens = tokenize(&model, &std::fs::read_to_string("text.txt")?)?;
//! let mut ppl = Perplexity::default();
//! evaluate(&mut model.generator()?, &tokens, &Options::default(), &mut ppl)?;
//! println!("PPL = {:.4} +/- {:.5}", ppl.value(), ppl.stderr());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod kld;

use crate::error::ExecutionError;
use crate::generate::{Generator, TextModel};

/// The shape of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// `-c`: tokens per chunk (at least 4, at most the model's context).
    pub ctx: usize,
    /// `-b`: tokens per forward (default: the whole chunk).
    pub batch: usize,
    /// `--chunks`: at most this many chunks (`None`: every whole chunk).
    pub chunks: Option<usize>,
}

impl Default for Options {
    /// llama-perplexity's defaults: 512-token chunks in one forward each, all chunks.
    fn default() -> Self {
        Options {
            ctx: 512,
            batch: 512,
            chunks: None,
        }
    }
}

impl Options {
    /// The first scored position of a chunk (`ctx / 2`).
    pub fn first(&self) -> usize {
        self.ctx / 2
    }

    /// Tokens scored per chunk.
    pub fn scored_per_chunk(&self) -> usize {
        self.ctx - 1 - self.first()
    }

    /// Chunks evaluated from `n_tokens` tokens: whole chunks, capped by `chunks`.
    /// Fewer than two whole chunks is an error naming both numbers (llama-perplexity's rule).
    pub fn chunk_count(&self, n_tokens: usize) -> Result<usize, ExecutionError> {
        if n_tokens < 2 * self.ctx {
            return Err(ExecutionError::InvalidConfig {
                field: "text".into(),
                reason: format!(
                    "it tokenizes to {n_tokens} tokens, but perplexity with -c {} needs at least {} \
                     (two chunks): give a longer text or a smaller -c",
                    self.ctx,
                    2 * self.ctx
                ),
            });
        }
        let whole = n_tokens / self.ctx;
        Ok(self.chunks.map_or(whole, |c| c.clamp(1, whole)))
    }

    /// Checks these options against `model` and returns the chunks of
    /// `n_tokens` tokens ([`Options::chunk_count`]); each bad flag is
    /// `InvalidConfig` naming it and what to choose instead.
    pub fn plan(&self, model: &TextModel, n_tokens: usize) -> Result<usize, ExecutionError> {
        self.check(model)?;
        self.chunk_count(n_tokens)
    }

    fn check(&self, model: &TextModel) -> Result<(), ExecutionError> {
        if self.ctx < 4 {
            return Err(ExecutionError::InvalidConfig {
                field: "ctx-size".into(),
                reason: format!(
                    "-c {} is too small to score anything (at least 4)",
                    self.ctx
                ),
            });
        }
        if self.ctx > model.ctx_size() {
            return Err(ExecutionError::InvalidConfig {
                field: "ctx-size".into(),
                reason: format!(
                    "-c {} exceeds the context this model was loaded with ({} tokens; the model's \
                     max_position_embeddings caps it): choose -c {} or less",
                    self.ctx,
                    model.ctx_size(),
                    model.ctx_size()
                ),
            });
        }
        if self.batch == 0 {
            return Err(ExecutionError::InvalidConfig {
                field: "batch-size".into(),
                reason: "-b must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// The text's tokens as llama-perplexity takes them: special tokens added
/// (BOS where the tokenizer adds one), control-token text not parsed.
pub fn tokenize(model: &TextModel, text: &str) -> Result<Vec<u32>, ExecutionError> {
    model.tokenizer().encode_with(text, true, false)
}

/// One evaluated chunk: its tokens (as in the text, not the BOS-replaced
/// input) and the logits of its scored positions.
pub struct Chunk<'a> {
    /// 0-based chunk number.
    pub index: usize,
    /// The chunk's `ctx` tokens.
    pub tokens: &'a [u32],
    /// Position of the first scored row in the chunk.
    pub first: usize,
    /// Row-major `[ctx - 1 - first, vocab]` logits; row `r` predicts `tokens[first + r + 1]`.
    pub logits: &'a [f32],
    /// Logits per row.
    pub vocab: usize,
}

impl Chunk<'_> {
    /// Scored rows: (logits, the token they predict).
    pub fn rows(&self) -> impl Iterator<Item = (&[f32], u32)> + '_ {
        self.logits
            .chunks_exact(self.vocab)
            .zip(&self.tokens[self.first + 1..])
            .map(|(row, &t)| (row, t))
    }
}

/// What receives each chunk of [`evaluate`], in order.
pub trait ChunkSink {
    /// Takes one chunk's scored rows.
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), ExecutionError>;
}

/// `ln softmax(row)` in f64 (max subtracted first).
pub fn log_softmax(row: &[f32]) -> Vec<f64> {
    let log_sum = log_sum_exp(row);
    row.iter().map(|&x| x as f64 - log_sum).collect()
}

/// `-ln softmax(row)[target]` in f64.
pub fn nll(row: &[f32], target: u32) -> f64 {
    log_sum_exp(row) - row[target as usize] as f64
}

/// `ln sum exp(row)` in f64, the max subtracted before the exponentials.
fn log_sum_exp(row: &[f32]) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
    sum.ln() + max
}

/// Running sums of negative log-likelihoods: the perplexity estimate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Perplexity {
    sum: f64,
    sum_sq: f64,
    count: usize,
    /// The running estimate after each chunk.
    pub per_chunk: Vec<f64>,
}

impl Perplexity {
    /// Adds one scored token's negative log-likelihood.
    pub fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.sum_sq += nll * nll;
        self.count += 1;
    }

    /// Tokens scored.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Mean negative log-likelihood (nats per token).
    pub fn mean_nll(&self) -> f64 {
        self.sum / self.count.max(1) as f64
    }

    /// `exp(mean nll)`.
    pub fn value(&self) -> f64 {
        self.mean_nll().exp()
    }

    /// llama-perplexity's `+/-`: `sqrt(var(nll) / (n - 1)) * PPL` (0 below two tokens).
    pub fn stderr(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = self.sum_sq / n - mean * mean;
        if var > 0.0 {
            (var / (n - 1.0)).sqrt() * self.value()
        } else {
            0.0
        }
    }
}

impl ChunkSink for Perplexity {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), ExecutionError> {
        for (row, target) in chunk.rows() {
            self.add(nll(row, target));
        }
        self.per_chunk.push(self.value());
        Ok(())
    }
}

/// Runs the chunks of `tokens` through `generator` (module docs: the method;
/// its KV cache is reset for each chunk) and feeds each to `sink`; returns the
/// number of chunks. Bad options and a
/// text shorter than two chunks are `InvalidConfig` naming the flag.
pub fn evaluate(
    generator: &mut Generator,
    tokens: &[u32],
    opts: &Options,
    sink: &mut dyn ChunkSink,
) -> Result<usize, ExecutionError> {
    let model = generator.model().clone();
    let chunks = opts.plan(&model, tokens.len())?;
    let vocab = model.vocab();
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(ExecutionError::IndexOutOfRange {
            op: "perplexity tokens".into(),
            index: bad.into(),
            len: vocab,
        });
    }
    let bos = model
        .tokenizer()
        .bos_id()
        .filter(|_| model.tokenizer().adds_bos());
    let first = opts.first();
    let mut scored = Vec::with_capacity(opts.scored_per_chunk() * vocab);
    for index in 0..chunks {
        let chunk = &tokens[index * opts.ctx..(index + 1) * opts.ctx];
        let mut input = chunk.to_vec();
        if let Some(b) = bos {
            input[0] = b;
        }
        generator.reset_kv_cache();
        scored.clear();
        let mut pos = 0;
        for part in input.chunks(opts.batch) {
            // The rows of positions first ..= ctx - 2 (the last row predicts past the
            // chunk); a batch wholly before `first` computes its last row only.
            let from = first.saturating_sub(pos).min(part.len() - 1);
            let to = (opts.ctx - 1).saturating_sub(pos).min(part.len());
            let logits = generator.forward_rows(part, from)?;
            if pos + part.len() > first {
                scored.extend_from_slice(&logits[..(to - from) * vocab]);
            }
            pos += part.len();
        }
        sink.chunk(&Chunk {
            index,
            tokens: chunk,
            first,
            logits: &scored,
            vocab,
        })?;
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_is_minus_the_log_softmax_of_the_target() {
        let row = [1.0f32, -2.0, 0.5, 3.25];
        let ls = log_softmax(&row);
        let total: f64 = ls.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        for t in 0..4 {
            assert!((nll(&row, t) + ls[t as usize]).abs() < 1e-12);
        }
        // Large logits do not overflow.
        assert!((nll(&[1e4, 1e4], 0) - 2f64.ln()).abs() < 1e-9);
    }

    #[test]
    fn estimate_and_uncertainty_follow_llama_perplexity() {
        let values = [0.5, 2.0, 1.25, 3.0, 0.75];
        let mut p = Perplexity::default();
        values.iter().for_each(|&v| p.add(v));
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| v * v).sum::<f64>() / n - mean * mean;
        assert!((p.value() - mean.exp()).abs() < 1e-12);
        assert!((p.stderr() - (var / (n - 1.0)).sqrt() * mean.exp()).abs() < 1e-12);
        assert_eq!(Perplexity::default().stderr(), 0.0);
    }

    #[test]
    fn chunks_are_whole_and_at_least_two() {
        let o = Options {
            ctx: 10,
            batch: 10,
            chunks: None,
        };
        assert!(o.chunk_count(19).is_err());
        assert_eq!(o.chunk_count(20).unwrap(), 2);
        assert_eq!(o.chunk_count(39).unwrap(), 3);
        let capped = Options {
            chunks: Some(2),
            ..o
        };
        assert_eq!(capped.chunk_count(100).unwrap(), 2);
        assert_eq!((o.first(), o.scored_per_chunk()), (5, 4));
    }

    #[test]
    fn each_scored_row_predicts_the_next_token() {
        let tokens = [9, 8, 7, 6, 5, 4];
        let logits: Vec<f32> = (0..2 * 3).map(|i| i as f32).collect();
        let chunk = Chunk {
            index: 0,
            tokens: &tokens,
            first: 3,
            logits: &logits,
            vocab: 3,
        };
        let rows: Vec<(Vec<f32>, u32)> = chunk.rows().map(|(r, t)| (r.to_vec(), t)).collect();
        assert_eq!(
            rows,
            vec![(vec![0.0, 1.0, 2.0], 5), (vec![3.0, 4.0, 5.0], 4)]
        );
    }
}
