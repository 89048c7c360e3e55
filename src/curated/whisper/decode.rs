//! Whisper decoding as the reference implementation (openai-whisper's
//! `transcribe` / `DecodingTask`) does it:
//!
//! - the whole input's log-mel is computed once with 30 s of zeros appended;
//!   windows of 3000 frames start at `seek`;
//! - prompt: `<|startofprev|>` + up to 223 previous text tokens (when conditioning
//!   on previous text), then `<|startoftranscript|>`, and for multilingual models
//!   `<|lang|>` (detected from the first window when not given) and
//!   `<|transcribe|>` / `<|translate|>`; `<|notimestamps|>` when timestamps are off;
//! - logit filters: blank / `<|endoftext|>` suppressed at the first step, the
//!   `suppress_tokens` list plus the task tokens always, and the timestamp rules
//!   (pairs, monotonic, the first token a timestamp <= 1.0 s, timestamps forced
//!   when their total probability beats every text token);
//! - the first window's prompt may start with an initial prompt's tokens (as previous
//!   text; faster-whisper's `initial_prompt`);
//! - greedy decoding, or the beam search of [`super::beam`] (temperature 0), up to 224
//!   tokens; temperature fallback (0.2, 0.4, ...; the best of `best_of` samples per
//!   temperature) when the compression ratio > 2.4
//!   or the average log-prob < -1.0, unless the window is silence (no-speech
//!   probability > 0.6 with a log-prob below the threshold); when every
//!   temperature fails, the most probable decoding wins (as faster-whisper);
//! - a window with no-speech probability > 0.6 and average log-prob < -1.0 is
//!   skipped, and so (an addition) is a window whose RMS level is below
//!   [`TranscribeOptions::silence_rms`]; segments are cut at consecutive timestamp pairs, and `seek`
//!   advances to the last complete timestamp (or the whole window).
//!
//! The rules drive a `WhisperForward`: the curated family ([`Whisper`] itself)
//! or the graph path (`crate::transcribe`), through `Whisper::transcribe_on`.

use super::words::{last_end, AlignCapture, Subsegment};
use super::{EncoderOutput, KvCache, TranscribeOptions, Whisper};
use crate::audio::mel::{log_mel, HOP};
use crate::backend::cpu::simd;
use crate::backend::ExecContext;
use crate::error::ExecutionError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;

/// Most sequences one stage of the temperature fallback decodes together: the first
/// temperature and five more at one sample each. Wider batches were slower on the cpu
/// (with `best_of` 5, five temperatures of five samples together took 17-19 s of decoding
/// on the two-minute file against 13-14 s one temperature at a time).
const MAX_BATCH: usize = 6;

/// Seconds per timestamp token.
pub const TIME_PRECISION: f64 = 0.02;
/// Samples per 30 s window.
pub const N_SAMPLES: usize = 480_000;
/// Mel frames per second.
const FRAMES_PER_SECOND: f64 = (crate::audio::SAMPLE_RATE as usize / HOP) as f64;

/// One transcribed segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Start in seconds.
    pub start: f64,
    /// End in seconds.
    pub end: f64,
    /// Text (with Whisper's leading space).
    pub text: String,
    /// Text token ids.
    pub tokens: Vec<u32>,
    /// Average log-probability of the window's decoding.
    pub avg_logprob: f64,
    /// Probability of `<|nospeech|>` at the window's start.
    pub no_speech_prob: f64,
    /// Temperature of the accepted decoding.
    pub temperature: f32,
    /// gzip compression ratio of the window's text.
    pub compression_ratio: f64,
    /// Its words with their times (with [`TranscribeOptions::word_timestamps`]; empty
    /// otherwise).
    pub words: Vec<super::Word>,
}

/// The result of [`Whisper::transcribe`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transcript {
    /// Segments in time order (empty-text segments left out).
    pub segments: Vec<Segment>,
    /// Language code used (`en` for English-only models).
    pub language: String,
    /// Audio duration in seconds.
    pub duration: f64,
    /// Where the time went.
    pub timings: Timings,
}

/// Time spent per stage of one transcription, in seconds, and where its ops ran.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timings {
    /// Log-mel spectrogram of the whole input.
    pub mel_s: f64,
    /// Encoder forwards (with the cross-attention K/V projections).
    pub encode_s: f64,
    /// Decoder forwards and decoding rules.
    pub decode_s: f64,
    /// Windows encoded.
    pub windows: usize,
    /// Decoding passes (more than `windows` when the temperature fallback ran).
    pub decodes: usize,
    /// Tokens fed to the decoder (prompts included).
    pub tokens: usize,
    /// Ops run per backend ([`crate::backend::DispatchLog::counts`]).
    pub ops: std::collections::BTreeMap<String, usize>,
}

impl Transcript {
    /// All segments' text joined.
    pub fn text(&self) -> String {
        self.segments.iter().map(|s| s.text.as_str()).collect()
    }
}

/// A decoding sequence's self-attention cache, as the decoding rules use it.
pub(crate) trait DecodeCache {
    /// Positions filled.
    fn positions(&self) -> usize;
    /// Keeps the first `len` positions.
    fn truncate(&mut self, len: usize);
}

impl DecodeCache for KvCache {
    fn positions(&self) -> usize {
        self.len()
    }

    fn truncate(&mut self, len: usize) {
        KvCache::truncate(self, len);
    }
}

/// The encoder and decoder forward the decoding rules drive. Both paths give
/// the logits of the same model; the rules, not the forward, make the transcript.
pub(crate) trait WhisperForward {
    /// One window's encoder output (the cross-attention keys and values).
    type Encoded;
    /// One decoding sequence's self-attention cache.
    type Cache: DecodeCache;

    /// [`Whisper::encode`]: the encoder on one window `mel` `[n_mels, 2 n_audio_ctx]`.
    fn encode(&self, mel: &[f32], ctx: &mut ExecContext) -> Result<Self::Encoded, ExecutionError>;

    /// [`Whisper::new_cache`]: an empty cache.
    fn new_cache(&self) -> Result<Self::Cache, ExecutionError>;

    /// [`Whisper::decode_steps`]: `tokens` split into `caches.len()` equal groups,
    /// group `g` fed after `caches[g]`'s positions; the logits of the rows `want`.
    fn decode_steps(
        &self,
        enc: &Self::Encoded,
        caches: &mut [Self::Cache],
        tokens: &[u32],
        want: &[usize],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError>;

    /// [`Whisper::copy_cache`]: makes `dst` a copy of `src`'s filled positions.
    fn copy_cache(
        &self,
        src: &Self::Cache,
        dst: &mut Self::Cache,
        ctx: &mut ExecContext,
    ) -> Result<(), ExecutionError>;

    /// Word timestamps: `tokens` fed from an empty cache, the logits of the rows
    /// `want`, and the raw cross-attention scores of the alignment heads into `capture`.
    fn align(
        &self,
        enc: &Self::Encoded,
        tokens: &[u32],
        want: &[usize],
        capture: &mut AlignCapture,
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError>;
}

/// The rows each of the decoding sequences at `positions` is fed in one step of
/// `n` tokens (split evenly), checked against the decoder's `n_text_ctx`.
pub(crate) fn rows_per_sequence(
    n: usize,
    positions: &[usize],
    n_text_ctx: usize,
) -> Result<usize, ExecutionError> {
    let groups = positions.len();
    if groups == 0 || !n.is_multiple_of(groups) {
        return Err(ExecutionError::ShapeMismatch {
            op: "whisper decoder tokens per sequence".into(),
            expected: vec![groups, n / groups.max(1)],
            got: vec![n],
        });
    }
    let s = n / groups;
    match positions.iter().find(|&&p| p + s > n_text_ctx) {
        Some(&p) => Err(ExecutionError::ContextOverflow {
            max: n_text_ctx,
            requested: p + s,
        }),
        None => Ok(s),
    }
}

/// The curated forward.
impl WhisperForward for Whisper {
    type Encoded = EncoderOutput;
    type Cache = KvCache;

    fn encode(&self, mel: &[f32], ctx: &mut ExecContext) -> Result<EncoderOutput, ExecutionError> {
        Whisper::encode(self, mel, ctx)
    }

    fn new_cache(&self) -> Result<KvCache, ExecutionError> {
        Whisper::new_cache(self)
    }

    fn decode_steps(
        &self,
        enc: &EncoderOutput,
        caches: &mut [KvCache],
        tokens: &[u32],
        want: &[usize],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        Whisper::decode_steps(self, enc, caches, tokens, want, ctx)
    }

    fn copy_cache(
        &self,
        src: &KvCache,
        dst: &mut KvCache,
        ctx: &mut ExecContext,
    ) -> Result<(), ExecutionError> {
        Whisper::copy_cache(self, src, dst, ctx)
    }

    fn align(
        &self,
        enc: &EncoderOutput,
        tokens: &[u32],
        want: &[usize],
        capture: &mut AlignCapture,
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let mut cache = Whisper::new_cache(self)?;
        self.dispatcher().install(|| {
            self.decode_steps_on_pool(
                enc,
                std::slice::from_mut(&mut cache),
                tokens,
                want,
                Some(capture),
                ctx,
            )
        })
    }
}

/// One decoding of one window.
#[derive(Debug, Clone)]
pub(super) struct DecodeResult {
    /// Sampled tokens without the prompt and without `<|endoftext|>`.
    pub(super) tokens: Vec<u32>,
    /// Sum of the log-probabilities of the tokens and of `<|endoftext|>`, over (tokens + 1).
    pub(super) avg_logprob: f64,
    pub(super) no_speech_prob: f64,
    pub(super) temperature: f32,
    pub(super) compression_ratio: f64,
    /// Tokens fed to the decoder after the prompt (the prompt is fed once per window).
    pub(super) fed: usize,
}

/// A window's prompt after its decoder step: its length and the logits at
/// `<|startoftranscript|>` and at its last token.
pub(super) struct PromptState {
    pub(super) len: usize,
    pub(super) first: Vec<Vec<f32>>,
}

/// The logit filters of every decoding step: blank and `<|endoftext|>` suppressed at the
/// first step, the `suppress_tokens` list and the task tokens always, then the
/// timestamp rules when timestamps are on.
pub(super) struct LogitFilter {
    suppress: Vec<u32>,
    begin_suppress: Vec<u32>,
    timestamps: bool,
    timestamp_begin: u32,
    eot: u32,
    no_timestamps: u32,
}

impl LogitFilter {
    /// Filters the logits of the token after `sampled` (the tokens after the prompt).
    pub(super) fn apply(&self, logits: &mut [f32], sampled: &[u32]) {
        let first = if sampled.is_empty() {
            &self.begin_suppress[..]
        } else {
            &[]
        };
        for &t in first.iter().chain(&self.suppress) {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
        if self.timestamps {
            apply_timestamp_rules(
                logits,
                sampled,
                self.timestamp_begin,
                self.eot,
                self.no_timestamps,
                Some(50),
            );
        }
    }
}

/// gzip (zlib) compression ratio of `text`, as openai-whisper computes it.
pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let packed = e
        .write_all(text.as_bytes())
        .and_then(|()| e.finish())
        .map_or(text.len(), |v| v.len());
    text.len() as f64 / packed.max(1) as f64
}

thread_local! {
    /// Scratch of [`log_sum_exp`] (one vocabulary of values), kept between decoding steps.
    static EXP_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `log(sum_i exp x[i])` (vectorized exp, f64 accumulation); `-inf` when every entry is.
fn log_sum_exp(x: &[f32]) -> f64 {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    let sum = EXP_SCRATCH.with_borrow_mut(|buf| {
        buf.clear();
        buf.extend_from_slice(x);
        simd::exp_sub(buf, max)
    });
    f64::from(max) + sum.ln()
}

/// The log-probability of a logit `v` given the [`log_sum_exp`] `lse` of all of them.
fn log_prob(v: f32, lse: f64) -> f32 {
    if lse == f64::NEG_INFINITY {
        f32::NEG_INFINITY
    } else {
        (f64::from(v) - lse) as f32
    }
}

/// Log-softmax of `x` (f64 accumulation).
pub(super) fn log_softmax(x: &[f32]) -> Vec<f32> {
    let lse = log_sum_exp(x);
    x.iter().map(|&v| log_prob(v, lse)).collect()
}

/// The rules of openai-whisper's `ApplyTimestampRules` on the logits of the next
/// token, given the sampled tokens so far (without the prompt).
pub fn apply_timestamp_rules(
    logits: &mut [f32],
    sampled: &[u32],
    ts_begin: u32,
    eot: u32,
    no_timestamps: u32,
    max_initial_timestamp_index: Option<u32>,
) {
    let ts = ts_begin as usize;
    let len = logits.len();
    let ninf = f32::NEG_INFINITY;
    if let Some(l) = logits.get_mut(no_timestamps as usize) {
        *l = ninf;
    }
    let n = sampled.len();
    let last_ts = n >= 1 && sampled[n - 1] >= ts_begin;
    let penultimate_ts = n < 2 || sampled[n - 2] >= ts_begin;
    if last_ts {
        if penultimate_ts {
            logits[ts..].fill(ninf);
        } else {
            logits[..(eot as usize).min(len)].fill(ninf);
        }
    }
    if let Some(&last) = sampled.iter().rev().find(|&&t| t >= ts_begin) {
        let upto = if last_ts && !penultimate_ts {
            last
        } else {
            last + 1
        };
        let upto = (upto as usize).min(logits.len());
        if upto > ts {
            logits[ts..upto].fill(ninf);
        }
    }
    if n == 0 {
        logits[..ts.min(len)].fill(ninf);
        if let Some(m) = max_initial_timestamp_index {
            let last_allowed = ts + m as usize;
            if last_allowed + 1 < logits.len() {
                logits[last_allowed + 1..].fill(ninf);
            }
        }
    }
    // The log-softmax's timestamp part and largest text entry (log_prob is monotonic, so
    // the largest log-probability is that of the largest logit).
    let lse = log_sum_exp(logits);
    if ts < len {
        let lp = |v: f32| log_prob(v, lse);
        let max_ts = lp(logits[ts..].iter().copied().fold(ninf, f32::max));
        let ts_lse = if max_ts == f32::NEG_INFINITY {
            f64::NEG_INFINITY
        } else {
            let s: f64 = (logits[ts..].iter())
                .map(|&v| f64::from(lp(v) - max_ts).exp())
                .sum();
            f64::from(max_ts) + s.ln()
        };
        let max_text = lp(logits[..ts].iter().copied().fold(ninf, f32::max));
        if ts_lse > f64::from(max_text) {
            logits[..ts].fill(ninf);
        }
    }
}

impl Whisper {
    /// The language code of a language token (`<|en|>` → `en`).
    fn language_code(&self, id: u32) -> String {
        self.tokenizer
            .token_to_piece(id)
            .trim_start_matches("<|")
            .trim_end_matches("|>")
            .to_string()
    }

    fn language_token(&self, code: &str) -> Result<u32, ExecutionError> {
        self.config
            .special
            .languages
            .iter()
            .copied()
            .find(|&id| self.language_code(id) == code)
            .ok_or_else(|| ExecutionError::InvalidConfig {
                field: "language".into(),
                reason: format!("`{code}` is not a language of this model"),
            })
    }

    /// Language tokens and their probabilities for one encoded window, highest
    /// first: the softmax of the `<|startoftranscript|>` step's logits over the
    /// language tokens only (the reference's `detect_language`).
    fn language_probs<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        ctx: &mut ExecContext,
    ) -> Result<Vec<(u32, f32)>, ExecutionError> {
        let mut cache = f.new_cache()?;
        let sot = [self.config.special.sot];
        let logits = f.decode_steps(enc, std::slice::from_mut(&mut cache), &sot, &[0], ctx)?;
        let ids: Vec<u32> = (self.config.special.languages.iter().copied())
            .filter(|&id| (id as usize) < logits[0].len())
            .collect();
        if ids.is_empty() {
            return Err(ExecutionError::InvalidConfig {
                field: "lang_token_ids".into(),
                reason: "the model lists no language tokens".into(),
            });
        }
        let lang_logits: Vec<f32> = ids.iter().map(|&id| logits[0][id as usize]).collect();
        let mut probs: Vec<(u32, f32)> = ids
            .into_iter()
            .zip(log_softmax(&lang_logits).into_iter().map(f32::exp))
            .collect();
        probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(probs)
    }

    /// Detects the spoken language of one encoded window (multilingual models).
    fn top_language<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        ctx: &mut ExecContext,
    ) -> Result<u32, ExecutionError> {
        Ok(self.language_probs(f, enc, ctx)?[0].0)
    }

    /// Spoken-language probabilities of the first 30 s of 16 kHz mono `samples`,
    /// highest first, as language codes (`en`, `de`, ...): the log-mel frames of the
    /// audio, zeros after them (as faster-whisper's `detect_language` pads), the
    /// encoder, then [`Whisper::transcribe`]'s detection step. Errors for `.en` models.
    pub fn detect_language(&self, samples: &[f32]) -> Result<Vec<(String, f32)>, ExecutionError> {
        let c = &self.config;
        if !c.multilingual {
            return Err(ExecutionError::InvalidConfig {
                field: "multilingual".into(),
                reason: "language detection needs a multilingual model (this one is English-only)"
                    .into(),
            });
        }
        let n_frames = 2 * c.n_audio_ctx;
        let head = &samples[..samples.len().min(N_SAMPLES)];
        let mut padded = Vec::with_capacity(head.len() + N_SAMPLES);
        padded.extend_from_slice(head);
        padded.resize(head.len() + N_SAMPLES, 0.0);
        let mel = log_mel(&padded, &self.mel_filters, c.n_mels);
        let total = padded.len() / HOP;
        let frames = (head.len() / HOP + 1).min(n_frames);
        let window = mel_window(&mel, total, c.n_mels, n_frames, 0, frames);
        let mut ctx = ExecContext::new(self.dispatcher.threads());
        let enc = self.encode(&window, &mut ctx)?;
        Ok(self
            .language_probs(self, &enc, &mut ctx)?
            .into_iter()
            .map(|(id, p)| (self.language_code(id), p))
            .collect())
    }

    /// Text of `tokens` (timestamps and other special tokens dropped).
    pub fn text_of(&self, tokens: &[u32]) -> String {
        let eot = self.config.special.eot;
        let bytes: Vec<u8> = tokens
            .iter()
            .filter(|&&t| t < eot)
            .flat_map(|&t| self.tokenizer.token_bytes(t).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Decodings of a window run together on one encoder output: for each `(temperature,
    /// samples)` of `groups`, that many sequences at that temperature (greedy at 0).
    /// Sample `j` of group `g` draws from its own stream of the window's generator,
    /// [`sample_stream`]`(window_seed, first + g, j)` (`first`: the group's place in the
    /// temperature list), so its samples do not depend on which sequences share its
    /// steps. The window's prompt is already in `cache` (`prompt.len` positions; anything
    /// after them is dropped first, and the cache is left holding the prompt), with
    /// `prompt.first` the prompt step's logits at `<|startoftranscript|>` and at the last
    /// prompt token.
    ///
    /// Returns each group's best sample by `sum_logprob / len ^ length_penalty`
    /// (CTranslate2's ranking of `num_hypotheses` samples), in group order, and the
    /// tokens fed in all. A group's result is final once its sequences have ended; as
    /// soon as `accept` holds for a final group whose predecessors are final too, the
    /// later groups are dropped (the fallback rule would never read them), so the list
    /// ends at the first accepted group.
    #[allow(clippy::too_many_arguments)]
    fn decode_groups<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        prompt: &PromptState,
        cache: &mut F::Cache,
        opts: &TranscribeOptions,
        groups: &[(f32, usize)],
        (window_seed, first): (u64, usize),
        accept: &dyn Fn(&DecodeResult) -> bool,
        ctx: &mut ExecContext,
    ) -> Result<(Vec<DecodeResult>, usize), ExecutionError> {
        let c = &self.config;
        // Group g holds the sequences starts[g]..starts[g + 1].
        let mut starts = vec![0];
        for &(_, samples) in groups {
            starts.push(starts[starts.len() - 1] + samples.max(1));
        }
        let n = starts[groups.len()];
        let temperature = |seq: usize| groups[starts.partition_point(|&s| s <= seq) - 1].0;
        let sample_len = c.n_text_ctx / 2;
        cache.truncate(prompt.len);
        let filter = self.logit_filter(opts.timestamps);
        let mut rngs: Vec<ChaCha8Rng> = (groups.iter().enumerate())
            .flat_map(|(g, &(_, samples))| {
                (0..samples.max(1)).map(move |j| sample_stream(window_seed, first + g, j))
            })
            .collect();
        let mut caches = vec![std::mem::replace(cache, f.new_cache()?)];
        for _ in 1..n {
            let mut copy = f.new_cache()?;
            f.copy_cache(&caches[0], &mut copy, ctx)?;
            caches.push(copy);
        }
        // Sequence `alive[r]` is fed through `caches[r]`; every sequence keeps
        // (tokens, sum of log-probs, tokens fed), and `ended` marks those done.
        let mut seqs: Vec<(Vec<u32>, f64, usize)> = vec![(Vec::new(), 0.0, 0); n];
        let mut ended = vec![false; n];
        let mut alive: Vec<usize> = (0..n).collect();
        let mut logits = vec![prompt.first[1].clone(); n];
        let mut spare = None;
        let mut results = Vec::new();
        let mut fed = 0;
        loop {
            let mut keep = Vec::with_capacity(alive.len());
            for (r, l) in logits.iter_mut().enumerate() {
                let i = alive[r];
                let (tokens, sum, _) = &mut seqs[i];
                filter.apply(l, tokens);
                let lse = log_sum_exp(l);
                let t = temperature(i);
                let next = if t > 0.0 {
                    sample(l, t, &mut rngs[i])
                } else {
                    argmax(l)
                };
                *sum += f64::from(log_prob(l[next as usize], lse));
                let stop = next == c.special.eot
                    || tokens.len() + 1 > sample_len
                    || caches[r].positions() + 1 > c.n_text_ctx;
                if next != c.special.eot {
                    tokens.push(next);
                }
                ended[i] = stop;
                keep.push(!stop);
            }
            let mut next_alive = Vec::with_capacity(alive.len());
            let mut next_caches = Vec::with_capacity(alive.len());
            for ((i, k), keep) in alive.into_iter().zip(caches).zip(keep) {
                if keep {
                    next_alive.push(i);
                    next_caches.push(k);
                } else {
                    spare = Some(k);
                }
            }
            (alive, caches) = (next_alive, next_caches);
            // Groups final in order: the first accepted one decides the window.
            while results.len() < groups.len() {
                let g = results.len();
                let members = starts[g]..starts[g + 1];
                if !members.clone().all(|i| ended[i]) {
                    break;
                }
                let r = self.group_result(&seqs[members], groups[g].0, prompt, opts);
                let accepted = accept(&r);
                results.push(r);
                if accepted {
                    alive.clear();
                    break;
                }
            }
            if alive.is_empty() {
                break;
            }
            let feed: Vec<u32> = (alive.iter())
                .map(|&i| seqs[i].0.last().copied().unwrap_or(c.special.eot))
                .collect();
            for &i in &alive {
                seqs[i].2 += 1;
            }
            let want: Vec<usize> = (0..feed.len()).collect();
            logits = f.decode_steps(enc, &mut caches, &feed, &want, ctx)?;
            fed += feed.len();
        }
        if let Some(k) = spare.or_else(|| caches.pop()) {
            *cache = k;
            cache.truncate(prompt.len);
        }
        Ok((results, fed))
    }

    /// The best of one group's finished samples by `sum_logprob / len ^ length_penalty`.
    fn group_result(
        &self,
        samples: &[(Vec<u32>, f64, usize)],
        temperature: f32,
        prompt: &PromptState,
        opts: &TranscribeOptions,
    ) -> DecodeResult {
        let score = |s: &(Vec<u32>, f64, usize)| {
            super::beam::length_normalized(s.1, s.0.len(), opts.length_penalty)
        };
        let mut best = 0;
        for (i, s) in samples.iter().enumerate() {
            if score(s) > score(&samples[best]) {
                best = i;
            }
        }
        let (tokens, sum_logprob, _) = &samples[best];
        let text = self.text_of(tokens);
        DecodeResult {
            avg_logprob: sum_logprob / (tokens.len() + 1) as f64,
            compression_ratio: compression_ratio(text.trim()),
            fed: samples.iter().map(|s| s.2).sum(),
            tokens: tokens.clone(),
            no_speech_prob: self.no_speech_prob(&prompt.first[0]),
            temperature,
        }
    }

    /// The filters of [`Whisper::decode_groups`] and of the beam search.
    pub(super) fn logit_filter(&self, timestamps: bool) -> LogitFilter {
        let sp = &self.config.special;
        let mut suppress: Vec<u32> = self.config.suppress.clone();
        suppress.extend([sp.transcribe, sp.translate, sp.sot, sp.sot_prev, sp.sot_lm]);
        suppress.extend(sp.no_speech);
        LogitFilter {
            suppress,
            begin_suppress: self.config.begin_suppress.clone(),
            timestamps,
            timestamp_begin: sp.timestamp_begin,
            eot: sp.eot,
            no_timestamps: sp.no_timestamps,
        }
    }

    /// Probability of `<|nospeech|>` in the logits at `<|startoftranscript|>` (0 when
    /// the vocabulary has no such token).
    pub(super) fn no_speech_prob(&self, sot_logits: &[f32]) -> f64 {
        match self.config.special.no_speech {
            Some(ns) => {
                let lse = log_sum_exp(sot_logits);
                f64::from(log_prob(sot_logits[ns as usize], lse)).exp()
            }
            None => 0.0,
        }
    }

    /// The decodings of one stage of the fallback, in temperature order, and the
    /// tokens they fed: the beam search alone when the stage is temperature 0 with
    /// `beam_size` > 1; otherwise every temperature of the stage together (greedy at 0,
    /// above 0 the best of `best_of` samples), the list ending at the first `accept`ed.
    /// `first` is the stage's place in the temperature list.
    #[allow(clippy::too_many_arguments)]
    fn decode_stage<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        prompt: &PromptState,
        cache: &mut F::Cache,
        opts: &TranscribeOptions,
        (temperatures, first): (&[f32], usize),
        window_seed: u64,
        accept: &dyn Fn(&DecodeResult) -> bool,
        ctx: &mut ExecContext,
    ) -> Result<(Vec<DecodeResult>, usize), ExecutionError> {
        if temperatures == [0.0] && opts.beam_size > 1 {
            let r = self.decode_beam(f, enc, prompt, cache, opts, ctx)?;
            let fed = r.fed;
            return Ok((vec![r], fed));
        }
        let groups: Vec<(f32, usize)> = (temperatures.iter())
            .map(|&t| (t, samples_at(opts, t)))
            .collect();
        let seeds = (window_seed, first);
        self.decode_groups(f, enc, prompt, cache, opts, &groups, seeds, accept, ctx)
    }

    /// Decodes a window under the temperature fallback: the first temperature alone,
    /// and when its decoding fails (too repetitive or too improbable, and not
    /// silence), the remaining temperatures in batches of sequences on the same encoder
    /// output, at most [`MAX_BATCH`] sequences each ([`TranscribeOptions::batch_fallback`];
    /// one stage each where a later temperature is 0 under the beam search). The accepted
    /// decoding is the first in temperature order that passes, as when they run one after
    /// another; a batch stops once it is known. With `speculate` (the previous window fell back),
    /// the first temperature joins that batch from the start when it is not a beam
    /// search: the same decodings, without a lone first pass the fallback would follow.
    /// Returns the accepted decoding with the decodings started and the tokens fed
    /// (prompt included).
    #[allow(clippy::too_many_arguments)]
    fn decode_with_fallback<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        prompt: &[u32],
        sot_index: usize,
        opts: &TranscribeOptions,
        (window_seed, speculate): (u64, bool),
        ctx: &mut ExecContext,
    ) -> Result<(DecodeResult, usize, usize), ExecutionError> {
        let temps = &opts.temperatures;
        // The prompt is fed once: every temperature starts from its cache and logits.
        let mut cache = f.new_cache()?;
        let last = prompt.len() - 1;
        let want = [sot_index, last];
        let state = PromptState {
            len: prompt.len(),
            first: f.decode_steps(enc, std::slice::from_mut(&mut cache), prompt, &want, ctx)?,
        };
        let passes = |r: &DecodeResult| {
            let too_repetitive = opts
                .compression_ratio_threshold
                .is_some_and(|c| r.compression_ratio > c);
            let too_improbable = opts.logprob_threshold.is_some_and(|l| r.avg_logprob < l);
            let silence = opts
                .no_speech_threshold
                .is_some_and(|n| r.no_speech_prob > n)
                && too_improbable;
            !(too_repetitive || too_improbable) || silence
        };
        // Stages as (temperatures, place of the first in the list).
        let beam_at = |t: &f32| *t == 0.0 && opts.beam_size > 1;
        let mut stages: Vec<(&[f32], usize)> = Vec::new();
        if !opts.batch_fallback || temps.len() < 2 || temps[1..].iter().any(beam_at) {
            stages.extend((0..temps.len()).map(|i| (&temps[i..=i], i)));
        } else {
            let mut i = 0;
            if !speculate || beam_at(&temps[0]) {
                stages.push((&temps[..1], 0));
                i = 1;
            }
            while i < temps.len() {
                let (mut j, mut n) = (i + 1, samples_at(opts, temps[i]));
                while j < temps.len() && n + samples_at(opts, temps[j]) <= MAX_BATCH {
                    n += samples_at(opts, temps[j]);
                    j += 1;
                }
                stages.push((&temps[i..j], i));
                i = j;
            }
        }
        let (mut decodes, mut fed) = (0, prompt.len());
        let mut all = Vec::new();
        for stage in stages {
            let (results, stage_fed) = self.decode_stage(
                f,
                enc,
                &state,
                &mut cache,
                opts,
                stage,
                window_seed,
                &passes,
                ctx,
            )?;
            decodes += stage.0.len();
            fed += stage_fed;
            for r in results {
                if passes(&r) {
                    return Ok((r, decodes, fed));
                }
                all.push(r);
            }
        }
        // Every temperature failed: the most probable decoding (preferring those not
        // too repetitive), reported with the last temperature.
        let too_repetitive = |r: &DecodeResult| {
            opts.compression_ratio_threshold
                .is_some_and(|c| r.compression_ratio > c)
        };
        let pool: Vec<DecodeResult> = if all.iter().all(too_repetitive) {
            all
        } else {
            all.into_iter().filter(|r| !too_repetitive(r)).collect()
        };
        let mut best = pool
            .into_iter()
            .max_by(|a, b| a.avg_logprob.total_cmp(&b.avg_logprob))
            .ok_or_else(|| ExecutionError::InvalidConfig {
                field: "temperatures".into(),
                reason: "no decoding was run".into(),
            })?;
        best.temperature = temps.last().copied().unwrap_or(0.0);
        Ok((best, decodes, fed))
    }

    /// Transcribes 16 kHz mono `samples` (any length) into segments.
    pub fn transcribe(
        &self,
        samples: &[f32],
        opts: &TranscribeOptions,
    ) -> Result<Transcript, ExecutionError> {
        self.transcribe_with_progress(samples, opts, &mut |_| {})
    }

    /// [`Whisper::transcribe`], calling `progress` with the fraction done after each window.
    pub fn transcribe_with_progress(
        &self,
        samples: &[f32],
        opts: &TranscribeOptions,
        progress: &mut dyn FnMut(f64),
    ) -> Result<Transcript, ExecutionError> {
        self.transcribe_on(self, samples, opts, progress)
    }

    /// [`Whisper::transcribe_with_progress`] with the encoder and decoder run by
    /// `f` (the curated family, or the graph path): the same rules either way.
    pub(crate) fn transcribe_on<F: WhisperForward>(
        &self,
        f: &F,
        samples: &[f32],
        opts: &TranscribeOptions,
        progress: &mut dyn FnMut(f64),
    ) -> Result<Transcript, ExecutionError> {
        opts.validate()?;
        let c = &self.config;
        let sp = c.special.clone();
        let n_frames = 2 * c.n_audio_ctx;
        let mut padded = Vec::with_capacity(samples.len() + N_SAMPLES);
        padded.extend_from_slice(samples);
        padded.resize(samples.len() + N_SAMPLES, 0.0);
        let t0 = std::time::Instant::now();
        let mel = log_mel(&padded, &self.mel_filters, c.n_mels);
        let mel_s = t0.elapsed().as_secs_f64();
        let total = padded.len() / HOP;
        let content = total.saturating_sub(n_frames);
        // The audio's frames from `seek`, zeros past its end (the reference's pad_or_trim).
        let window = |seek: usize| {
            mel_window(
                &mel,
                total,
                c.n_mels,
                n_frames,
                seek,
                content.saturating_sub(seek),
            )
        };
        let mut ctx = ExecContext::new(self.dispatcher.threads());
        let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
        let mut transcript = Transcript {
            duration: samples.len() as f64 / crate::audio::SAMPLE_RATE as f64,
            ..Default::default()
        };
        transcript.timings.mel_s = mel_s;
        let mut language = None;
        if c.multilingual {
            if let Some(code) = &opts.language {
                language = Some(self.language_token(code)?);
            }
        } else {
            transcript.language = "en".into();
        }
        // faster-whisper's initial prompt: " " + the text trimmed, before the first
        // window's previous text (only the last 223 tokens of it fit).
        let mut all_tokens: Vec<u32> = match &opts.initial_prompt {
            Some(p) => self.tokenizer.encode(&format!(" {}", p.trim()), false)?,
            None => Vec::new(),
        };
        let mut prompt_reset_since = 0;
        // Whether the last decoded window fell back past its first temperature.
        let mut fell_back = false;
        let mut last_speech = 0.0;
        let mut seek = 0usize;
        while seek < content {
            let time_offset = (seek * HOP) as f64 / crate::audio::SAMPLE_RATE as f64;
            let segment_size = n_frames.min(content - seek);
            let segment_duration = (segment_size * HOP) as f64 / crate::audio::SAMPLE_RATE as f64;
            if let Some(floor) = opts.silence_rms {
                let part = &samples[(seek * HOP).min(samples.len())
                    ..((seek + segment_size) * HOP).min(samples.len())];
                let ms = part
                    .iter()
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum::<f64>()
                    / part.len().max(1) as f64;
                if ms.sqrt() < f64::from(floor) {
                    seek += segment_size;
                    progress(seek.min(content) as f64 / content.max(1) as f64);
                    continue;
                }
            }
            let t0 = std::time::Instant::now();
            let enc = f.encode(&window(seek), &mut ctx)?;
            transcript.timings.encode_s += t0.elapsed().as_secs_f64();
            transcript.timings.windows += 1;
            let t0 = std::time::Instant::now();
            if c.multilingual && language.is_none() {
                let lang = self.top_language(f, &enc, &mut ctx)?;
                language = Some(lang);
            }
            if let Some(l) = language {
                transcript.language = self.language_code(l);
            }
            let mut prompt = Vec::new();
            let previous = &all_tokens[prompt_reset_since..];
            if !previous.is_empty() {
                let keep = c.n_text_ctx / 2 - 1;
                prompt.push(sp.sot_prev);
                prompt.extend_from_slice(&previous[previous.len().saturating_sub(keep)..]);
            }
            let sot_index = prompt.len();
            prompt.push(sp.sot);
            if c.multilingual {
                if let Some(l) = language {
                    prompt.push(l);
                }
                prompt.push(if opts.translate {
                    sp.translate
                } else {
                    sp.transcribe
                });
            }
            if !opts.timestamps {
                prompt.push(sp.no_timestamps);
            }
            let seeds = (rng.gen(), fell_back);
            let (r, decodes, fed) =
                self.decode_with_fallback(f, &enc, &prompt, sot_index, opts, seeds, &mut ctx)?;
            fell_back = r.temperature != opts.temperatures[0];
            transcript.timings.decode_s += t0.elapsed().as_secs_f64();
            transcript.timings.decodes += decodes;
            transcript.timings.tokens += fed;
            if let Some(th) = opts.no_speech_threshold {
                let skip = r.no_speech_prob > th
                    && !opts.logprob_threshold.is_some_and(|l| r.avg_logprob > l);
                if skip {
                    seek += segment_size;
                    progress(seek.min(content) as f64 / content.max(1) as f64);
                    continue;
                }
            }
            let tokens = &r.tokens;
            let is_ts = |t: u32| t >= sp.timestamp_begin;
            let ts_pos = |t: u32| f64::from(t - sp.timestamp_begin);
            let single_ending = tokens.len() >= 2
                && !is_ts(tokens[tokens.len() - 2])
                && is_ts(tokens[tokens.len() - 1]);
            let mut consecutive: Vec<usize> = (1..tokens.len())
                .filter(|&i| is_ts(tokens[i - 1]) && is_ts(tokens[i]))
                .collect();
            let mut current: Vec<Subsegment> = Vec::new();
            if !consecutive.is_empty() {
                if single_ending {
                    consecutive.push(tokens.len());
                }
                let mut last_slice = 0;
                for &cur in &consecutive {
                    let sl = &tokens[last_slice..cur];
                    current.push(Subsegment {
                        start: time_offset + ts_pos(sl[0]) * TIME_PRECISION,
                        end: time_offset + ts_pos(sl[sl.len() - 1]) * TIME_PRECISION,
                        tokens: sl.to_vec(),
                        words: Vec::new(),
                    });
                    last_slice = cur;
                }
                if single_ending {
                    seek += segment_size;
                } else {
                    let last_ts = ts_pos(tokens[last_slice - 1]) as usize;
                    seek += last_ts * 2;
                }
            } else {
                let mut duration = segment_duration;
                if let Some(&t) = tokens.iter().rev().find(|&&t| is_ts(t)) {
                    if t != sp.timestamp_begin {
                        duration = ts_pos(t) * TIME_PRECISION;
                    }
                }
                current.push(Subsegment {
                    start: time_offset,
                    end: time_offset + duration,
                    tokens: tokens.clone(),
                    words: Vec::new(),
                });
                seek += segment_size;
            }
            if opts.word_timestamps {
                let t0 = std::time::Instant::now();
                let mut sot_sequence = vec![sp.sot];
                if c.multilingual {
                    sot_sequence.extend(language);
                    sot_sequence.push(if opts.translate {
                        sp.translate
                    } else {
                        sp.transcribe
                    });
                }
                self.add_word_timestamps(
                    f,
                    &enc,
                    &sot_sequence,
                    &transcript.language,
                    &mut current,
                    segment_size,
                    time_offset,
                    last_speech,
                    &mut ctx,
                )?;
                // As faster-whisper: the next window starts at the last word's end.
                let end = last_end(&current);
                if let Some(e) = end.filter(|&e| !single_ending && e > time_offset) {
                    seek = (e * FRAMES_PER_SECOND).round_ties_even() as usize;
                }
                last_speech = end.unwrap_or(last_speech);
                transcript.timings.decode_s += t0.elapsed().as_secs_f64();
            }
            for sub in current {
                let text = self.text_of(&sub.tokens);
                if sub.start == sub.end || text.trim().is_empty() {
                    continue;
                }
                all_tokens.extend_from_slice(&sub.tokens);
                transcript.segments.push(Segment {
                    start: sub.start,
                    end: sub.end,
                    text,
                    tokens: sub.tokens.into_iter().filter(|&t| t < sp.eot).collect(),
                    avg_logprob: r.avg_logprob,
                    no_speech_prob: r.no_speech_prob,
                    temperature: r.temperature,
                    compression_ratio: r.compression_ratio,
                    words: sub.words,
                });
            }
            if !opts.condition_on_previous_text || r.temperature > 0.5 {
                prompt_reset_since = all_tokens.len();
            }
            progress(seek.min(content) as f64 / content.max(1) as f64);
        }
        transcript.timings.ops = ctx.log.counts().clone();
        Ok(transcript)
    }
}

/// Index of the largest logit (ties: the lowest id).
/// Frames `seek..seek + take` (at most `n_frames`) of `mel` (`[n_mels, total]`) as one
/// `[n_mels, n_frames]` window, zeros after them.
fn mel_window(
    mel: &[f32],
    total: usize,
    n_mels: usize,
    n_frames: usize,
    seek: usize,
    take: usize,
) -> Vec<f32> {
    let mut w = vec![0.0f32; n_mels * n_frames];
    let take = take.min(n_frames).min(total.saturating_sub(seek));
    for m in 0..n_mels {
        w[m * n_frames..m * n_frames + take]
            .copy_from_slice(&mel[m * total + seek..m * total + seek + take]);
    }
    w
}

fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Sequences decoded at `temperature`: the best of `best_of` samples above 0, one
/// (greedy) at 0.
fn samples_at(opts: &TranscribeOptions, temperature: f32) -> usize {
    if temperature > 0.0 {
        opts.best_of.max(1)
    } else {
        1
    }
}

/// The generator of sample `sample` at the `temperature`-th temperature of a window whose
/// seed is `window_seed` (drawn per window from [`TranscribeOptions::seed`]'s generator):
/// one ChaCha stream per (temperature, sample), the same whether the decodings run one
/// after another or together.
fn sample_stream(window_seed: u64, temperature: usize, sample: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(window_seed);
    rng.set_stream(((temperature as u64) << 32) | sample as u64);
    rng
}

/// Draws from `softmax(logits / temperature)`.
fn sample(logits: &[f32], temperature: f32, rng: &mut ChaCha8Rng) -> u32 {
    // Probabilities exp(log_softmax): suppressed (-inf) tokens get exactly 0.
    let mut p = log_softmax(
        &logits
            .iter()
            .map(|&l| l / temperature)
            .collect::<Vec<f32>>(),
    );
    simd::exp_sub(&mut p, 0.0);
    let u: f64 = rng.gen();
    let mut acc = 0.0f64;
    for (i, &pi) in p.iter().enumerate() {
        acc += f64::from(pi);
        if acc > u {
            return i as u32;
        }
    }
    argmax(logits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: u32 = 10;
    const EOT: u32 = 5;
    const NO_TS: u32 = 9;

    fn allowed(l: &[f32]) -> Vec<usize> {
        (0..l.len()).filter(|&i| l[i] > f32::NEG_INFINITY).collect()
    }

    #[test]
    fn first_token_is_an_early_timestamp() {
        let mut l = vec![0.0f32; 200];
        apply_timestamp_rules(&mut l, &[], TS, EOT, NO_TS, Some(50));
        assert_eq!(allowed(&l), (10..=60).collect::<Vec<_>>());
    }

    #[test]
    fn timestamps_pair_up_and_never_decrease() {
        // After text then a timestamp: a second timestamp (>= it) or eot, no text.
        let mut l = vec![0.0f32; 40];
        apply_timestamp_rules(&mut l, &[12, 1, 2, 20], TS, EOT, NO_TS, Some(50));
        let a = allowed(&l);
        assert!(a.iter().all(|&i| i >= EOT as usize && i != NO_TS as usize));
        assert!(!a.contains(&19) && a.contains(&20));
        // After a pair: text only (no timestamp).
        let mut l = vec![0.0f32; 40];
        apply_timestamp_rules(&mut l, &[12, 1, 20, 20], TS, EOT, NO_TS, Some(50));
        assert!(allowed(&l)
            .iter()
            .all(|&i| i < TS as usize && i != NO_TS as usize));
    }

    #[test]
    fn log_sum_exp_matches_libm_and_suppressed_tokens_get_zero() {
        // A vocabulary-sized row with a wide range, some -inf (suppressed) entries, and a
        // length that is not a multiple of the vector width.
        let mut x: Vec<f32> = (0..51_865)
            .map(|i| ((i * 7919) % 4001) as f32 / 97.0 - 20.0)
            .collect();
        for i in (0..x.len()).step_by(5) {
            x[i] = f32::NEG_INFINITY;
        }
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let want = f64::from(max)
            + x.iter()
                .map(|&v| f64::from(v - max).exp())
                .sum::<f64>()
                .ln();
        let got = log_sum_exp(&x);
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 3]), f64::NEG_INFINITY);
        let mut p = log_softmax(&x);
        let total = simd::exp_sub(&mut p, 0.0);
        assert!((total - 1.0).abs() < 1e-5, "probabilities sum to {total}");
        assert!((0..x.len()).step_by(5).all(|i| p[i] == 0.0));
    }

    #[test]
    fn compression_ratio_of_repetition_is_high() {
        let loop_text = "the same words again ".repeat(20);
        assert!(compression_ratio(&loop_text) > 2.4);
        assert!(compression_ratio("And so my fellow Americans, ask not.") < 2.4);
    }
}
