//! KL divergence between two runs of the same text (llama-perplexity's
//! `--kl-divergence-base` / `--kl-divergence`): a base run (e.g. the f32
//! `reference` backend) saves the log-probabilities of every scored position
//! with [`BaseWriter`]; another run (a backend, a quantization) is scored
//! against them with [`Comparison`], on the base file's own tokens.
//!
//! Base file, little-endian: the magic `CYBKLD\0\x01`; `u32` vocab, ctx,
//! chunks, first (the first scored position); `chunks * ctx` `u32` token ids;
//! then per chunk `ctx - 1 - first` rows of `vocab` `f32` values of
//! `ln softmax(logits)`. The size is exact: anything else is an error.

use super::{log_softmax, Chunk, ChunkSink, Options};
use crate::error::ExecutionError;
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CYBKLD\0\x01";
const HEADER: u64 = 8 + 4 * 4;

fn io_error(path: &Path, what: &str, e: std::io::Error) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: "kl-divergence".into(),
        reason: format!("{}: cannot {what}: {e}", path.display()),
    }
}

fn bad_base(path: &Path, reason: String) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: "kl-divergence".into(),
        reason: format!(
            "{}: not a usable base file: {reason} (re-run with --kl-divergence-base to write it)",
            path.display()
        ),
    }
}

/// Writes the base file of a run: the header now, each chunk's
/// log-probabilities as it comes, renamed into place by [`BaseWriter::finish`]
/// (an interrupted run leaves only `FILE.part`).
pub struct BaseWriter {
    path: PathBuf,
    part: PathBuf,
    out: BufWriter<File>,
}

impl BaseWriter {
    /// Starts the base file at `path` for `chunks` chunks of `tokens` with `opts`.
    pub fn create(
        path: &Path,
        vocab: usize,
        opts: &Options,
        chunks: usize,
        tokens: &[u32],
    ) -> Result<BaseWriter, ExecutionError> {
        let mut name = path.as_os_str().to_owned();
        name.push(".part");
        let part = PathBuf::from(name);
        let file = File::create(&part).map_err(|e| io_error(&part, "create", e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut head = MAGIC.to_vec();
        for v in [vocab, opts.ctx, chunks, opts.first()] {
            head.extend_from_slice(&(v as u32).to_le_bytes());
        }
        for &t in &tokens[..chunks * opts.ctx] {
            head.extend_from_slice(&t.to_le_bytes());
        }
        out.write_all(&head)
            .map_err(|e| io_error(&part, "write", e))?;
        Ok(BaseWriter {
            path: path.to_path_buf(),
            part,
            out,
        })
    }

    /// Flushes and moves the file into place.
    pub fn finish(mut self) -> Result<(), ExecutionError> {
        self.out
            .flush()
            .map_err(|e| io_error(&self.part, "write", e))?;
        std::fs::rename(&self.part, &self.path).map_err(|e| io_error(&self.path, "rename", e))
    }
}

impl ChunkSink for BaseWriter {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), ExecutionError> {
        let mut bytes = Vec::with_capacity(chunk.vocab * 4);
        for (row, _) in chunk.rows() {
            bytes.clear();
            for v in log_softmax(row) {
                bytes.extend_from_slice(&(v as f32).to_le_bytes());
            }
            self.out
                .write_all(&bytes)
                .map_err(|e| io_error(&self.part, "write", e))?;
        }
        Ok(())
    }
}

/// A run scored against a base file: per-token KL divergence, top-1
/// agreement and both perplexities.
pub struct Comparison {
    path: PathBuf,
    input: BufReader<File>,
    vocab: usize,
    opts: Options,
    tokens: Vec<u32>,
    base_row: Vec<f32>,
    kld: Vec<f64>,
    same_top: usize,
    nll: super::Perplexity,
    nll_base: super::Perplexity,
    ln_ratio: super::Perplexity,
}

fn read_u32s(input: &mut impl Read, n: usize) -> std::io::Result<Vec<u32>> {
    let mut bytes = vec![0u8; n * 4];
    input.read_exact(&mut bytes)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

impl Comparison {
    /// Opens the base file at `path`; checks its header and that its size is
    /// exactly what the header implies (the model is checked by [`Comparison::check_vocab`]).
    pub fn open(path: &Path) -> Result<Comparison, ExecutionError> {
        let file = File::open(path).map_err(|e| io_error(path, "open", e))?;
        let len = file
            .metadata()
            .map_err(|e| io_error(path, "read", e))?
            .len();
        let mut input = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        if len < HEADER || input.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return Err(bad_base(
                path,
                "it does not start with a cyb-llm KLD header".into(),
            ));
        }
        let head = read_u32s(&mut input, 4).map_err(|e| io_error(path, "read", e))?;
        let [vocab, ctx, chunks, first] = [0, 1, 2, 3].map(|i| head[i] as usize);
        if vocab == 0 || ctx < 4 || first != ctx / 2 || chunks == 0 {
            return Err(bad_base(
                path,
                format!("inconsistent header (vocab {vocab}, ctx {ctx}, first {first}, chunks {chunks})"),
            ));
        }
        // In u128: a hostile header cannot wrap the product into the file's length.
        let rows = chunks as u128 * (ctx - 1 - first) as u128;
        let expected =
            HEADER as u128 + 4 * (chunks as u128 * ctx as u128) + 4 * rows * vocab as u128;
        if len as u128 != expected {
            return Err(bad_base(
                path,
                format!("{len} bytes where its header implies {expected} (truncated or damaged)"),
            ));
        }
        let tokens = read_u32s(&mut input, chunks * ctx).map_err(|e| io_error(path, "read", e))?;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(bad_base(
                path,
                format!("token id {bad} is outside the vocabulary"),
            ));
        }
        Ok(Comparison {
            path: path.to_path_buf(),
            input,
            vocab,
            opts: Options {
                ctx,
                batch: ctx,
                chunks: Some(chunks),
            },
            tokens,
            base_row: vec![0.0; vocab],
            kld: Vec::new(),
            same_top: 0,
            nll: Default::default(),
            nll_base: Default::default(),
            ln_ratio: Default::default(),
        })
    }

    /// Checks that the base run's rows fit a model of `vocab` logits.
    pub fn check_vocab(&self, vocab: usize) -> Result<(), ExecutionError> {
        if self.vocab != vocab {
            return Err(bad_base(
                &self.path,
                format!(
                    "it holds {}-token rows, this model has {vocab} logits",
                    self.vocab
                ),
            ));
        }
        Ok(())
    }

    /// The base run's tokens (the text is not needed again).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The base run's chunk size and count (`batch` is the caller's to set).
    pub fn options(&self) -> Options {
        self.opts
    }

    fn read_row(&mut self) -> Result<(), ExecutionError> {
        let mut bytes = vec![0u8; self.vocab * 4];
        self.input
            .read_exact(&mut bytes)
            .map_err(|e| io_error(&self.path, "read", e))?;
        for (v, b) in self.base_row.iter_mut().zip(bytes.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(())
    }

    /// The statistics of the tokens scored so far.
    pub fn report(&self) -> KldReport {
        let n = self.kld.len();
        let mut sorted = self.kld.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if sorted.is_empty() {
                0.0
            } else {
                sorted[((n - 1) as f64 * q).round() as usize]
            }
        };
        let mean = sorted.iter().sum::<f64>() / n.max(1) as f64;
        let var = sorted.iter().map(|k| (k - mean).powi(2)).sum::<f64>() / n.max(2) as f64;
        let top = self.same_top as f64 / n.max(1) as f64;
        KldReport {
            tokens: n,
            mean_kld: mean,
            kld_stderr: (var / (n.max(2) - 1) as f64).sqrt(),
            max_kld: sorted.last().copied().unwrap_or(0.0),
            p99_kld: at(0.99),
            median_kld: at(0.5),
            same_top: top,
            same_top_stderr: (top * (1.0 - top) / (n.max(2) - 1) as f64).sqrt(),
            perplexity: self.nll.value(),
            perplexity_base: self.nll_base.value(),
            delta_perplexity: self.nll.value() - self.nll_base.value(),
            mean_ln_ppl_ratio: self.ln_ratio.mean_nll(),
        }
    }
}

impl ChunkSink for Comparison {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), ExecutionError> {
        let base_tokens = &self.tokens[chunk.index * self.opts.ctx..][..self.opts.ctx];
        if chunk.tokens != base_tokens || chunk.vocab != self.vocab {
            return Err(bad_base(
                &self.path,
                format!("chunk {} was run on other tokens", chunk.index + 1),
            ));
        }
        for (row, target) in chunk.rows() {
            self.read_row()?;
            let ours = log_softmax(row);
            let (mut kld, mut top, mut top_base) = (0.0, 0usize, 0usize);
            for (v, (&b, &q)) in self.base_row.iter().zip(&ours).enumerate() {
                let b = b as f64;
                kld += b.exp() * (b - q);
                if q > ours[top] {
                    top = v;
                }
                if b > self.base_row[top_base] as f64 {
                    top_base = v;
                }
            }
            self.kld.push(kld);
            self.same_top += usize::from(top == top_base);
            let t = target as usize;
            self.nll.add(-ours[t]);
            self.nll_base.add(-(self.base_row[t] as f64));
            self.ln_ratio.add(self.base_row[t] as f64 - ours[t]);
        }
        Ok(())
    }
}

/// The KL-divergence statistics (llama-perplexity's, in the units it prints).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KldReport {
    /// Tokens compared.
    pub tokens: usize,
    /// Mean of `sum p_base (ln p_base - ln p)` over the tokens (nats).
    pub mean_kld: f64,
    /// Its standard error.
    pub kld_stderr: f64,
    /// The largest per-token KLD.
    pub max_kld: f64,
    /// The 99th percentile per-token KLD.
    pub p99_kld: f64,
    /// The median per-token KLD.
    pub median_kld: f64,
    /// Fraction of tokens whose most likely next token is the base run's.
    pub same_top: f64,
    /// Its standard error.
    pub same_top_stderr: f64,
    /// This run's perplexity on the base run's tokens.
    pub perplexity: f64,
    /// The base run's perplexity.
    pub perplexity_base: f64,
    /// `perplexity - perplexity_base`.
    pub delta_perplexity: f64,
    /// Mean `ln p_base(next) - ln p(next)`, i.e. `ln(PPL / PPL_base)`.
    pub mean_ln_ppl_ratio: f64,
}
