//! Text generation (the contract's forward phase): a [`TextModel`] is loaded
//! once and shared (`Arc`) by any number of [`Generator`]s, one per
//! conversation, each with its own KV cache, from any threads.
//!
//! ```no_run
//! use cyb_llm::generate::{LoadOptions, Sampling, TextModel};
//! let model = TextModel::load("smollm2.model", &LoadOptions::default())?;
//! let mut generator = model.generator()?;
//! for piece in generator.generate("What is the capital of France?", Some(32), &Sampling::greedy())? {
//!     print!("{}", piece?.text);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `generate` renders the prompt with the chat template (a [`Prompt::Raw`]
//! skips it), tokenizes it, prefills it (in bulk by default, see [`Prefill`]),
//! then samples token after token until a stop: an end-of-sequence or
//! end-of-turn token, a stop string, `max_tokens`, or a full context. A prompt
//! that does not fit the context is `ContextOverflow` with both numbers.

pub mod chat;
pub mod sampling;

pub use chat::{ChatTemplate, Message, Preset};
pub use sampling::{fresh_seed, Draws, InvalidSampling, Sampling};

use crate::backend::{
    BackendChoice, BackendConfig, Dispatcher, ExecContext, Op, PendingId, Tensor,
};
use crate::curated::llama::LogitRows;
use crate::error::{ExecutionError, LoadError};
use crate::graph::text::{TextCache, TextEngine};
use crate::graph::GraphOptions;
use crate::loader::{Model, Task, WeightPages};
pub use crate::path::PathChoice;
use crate::tokenizer::{StreamDecoder, Tokenizer};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Why a model could not be made ready for generation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The model is not a text generator, or its weights/backend failed.
    #[error(transparent)]
    Exec(#[from] ExecutionError),
}

/// Settings fixed when a model is loaded for generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// `--backend`.
    pub backend: BackendChoice,
    /// `-t/--threads` (default: physical cores).
    pub threads: usize,
    /// `-c/--ctx-size`: tokens per conversation (capped by `max_position_embeddings`).
    pub ctx_size: usize,
    /// `--path`: curated family code or the graph executor.
    pub path: PathChoice,
    /// Graph path: run the fusion pass (`--no-fuse` clears it).
    pub fuse: bool,
    /// Graph path: keep the execution-trace hash (`--trace`).
    pub trace: bool,
    /// Where the weights live (`--no-huge-pages`: [`WeightPages::Mapped`]).
    pub pages: WeightPages,
}

impl Default for LoadOptions {
    /// Auto backend, physical cores, 4096 tokens of context, weights in huge pages.
    fn default() -> Self {
        LoadOptions {
            backend: BackendChoice::Auto,
            threads: BackendConfig::default().threads,
            ctx_size: 4096,
            path: PathChoice::Auto,
            fuse: true,
            trace: false,
            pages: WeightPages::HugePages,
        }
    }
}

/// A text model ready to generate: weights bound, tokenizer, chat template,
/// stop rules, backends. Share it with `Arc`; every [`Generator`] has its own KV cache.
pub struct TextModel {
    model: Arc<Model>,
    llama: TextEngine,
    dispatcher: Dispatcher,
    tokenizer: Tokenizer,
    chat: ChatTemplate,
    stop_ids: Vec<u32>,
    stop_strings: Vec<String>,
    load_ms: f64,
}

impl TextModel {
    /// Loads the `.model` file at `path` for generation.
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Arc<TextModel>, Error> {
        let start = Instant::now();
        let model = crate::loader::load_with(path, opts.pages)?;
        let mut tm = TextModel::from_model(Arc::new(model), opts)?;
        tm.load_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(Arc::new(tm))
    }

    /// Prepares an already loaded model. A model that is not a LlamaStyle
    /// decoder is `InvalidConfig` naming its type and the command to use.
    pub fn from_model(model: Arc<Model>, opts: &LoadOptions) -> Result<TextModel, ExecutionError> {
        let start = Instant::now();
        let graph_only = model.family.is_none() && model.graph.is_some();
        if model.task() != Some(Task::Generate) && !graph_only {
            return Err(ExecutionError::InvalidConfig {
                field: "model_type".into(),
                reason: format!(
                    "'{}' ({}) does not generate text; {}",
                    model.config.model_type,
                    match model.family {
                        Some(f) => f.name().to_string(),
                        None => "graph path".to_string(),
                    },
                    model.commands()
                ),
            });
        }
        let dispatcher = Dispatcher::new(
            opts.backend.clone(),
            &BackendConfig {
                threads: opts.threads.max(1),
            },
        )?;
        let tokenizer = Tokenizer::from_model(&model)?;
        let piece = |id: Option<u32>| id.map(|i| tokenizer.token_to_piece(i)).unwrap_or_default();
        let bos = piece(tokenizer.bos_id());
        let eos = piece(tokenizer.eos_ids().first().copied());
        let chat = ChatTemplate::for_model(&model, &bos, &eos)?;
        let vocab = model.vocab.as_ref();
        let id_of =
            |p: &str| vocab.and_then(|v| v.tokens.iter().position(|t| t == p).map(|i| i as u32));
        let mut stop_ids = tokenizer.eos_ids().to_vec();
        let end_pieces = chat.end_of_turn().into_iter().chain([
            "<|im_end|>",
            "<|eot_id|>",
            "<end_of_turn>",
            "<|end|>",
            "<|endoftext|>",
            "<|eom_id|>",
        ]);
        for p in end_pieces {
            if let Some(id) = id_of(p).filter(|&id| tokenizer.is_special(id)) {
                if !stop_ids.contains(&id) {
                    stop_ids.push(id);
                }
            }
        }
        let stop_strings = model
            .chat
            .as_ref()
            .map(|c| c.stop.clone())
            .unwrap_or_default();
        let llama = TextEngine::new(
            &model,
            opts.path,
            &dispatcher,
            GraphOptions {
                fuse: opts.fuse,
                ctx_size: opts.ctx_size,
                trace: opts.trace,
                keep_dispatch: false,
            },
        )?;
        if dispatcher.primary().capabilities().warm_up_at_load {
            llama.warm_up(&dispatcher)?;
        }
        Ok(TextModel {
            model,
            llama,
            dispatcher,
            tokenizer,
            chat,
            stop_ids,
            stop_strings,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// A new conversation with its own KV cache (allocated now, sized to the context).
    pub fn generator(self: &Arc<Self>) -> Result<Generator, ExecutionError> {
        Ok(Generator {
            model: self.clone(),
            state: State {
                cache: self.llama.new_cache(&self.dispatcher)?,
                ctx: ExecContext::new(self.dispatcher.threads()),
                history: Vec::new(),
                logits: None,
                prefill: Prefill::Bulk,
                timings: Timings {
                    load_ms: self.load_ms,
                    ..Timings::default()
                },
            },
        })
    }

    /// The loaded file.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The chat template in use.
    pub fn chat_template(&self) -> &ChatTemplate {
        &self.chat
    }

    /// Tokens that end generation (eos ids and end-of-turn tokens).
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// The backends (first choice first).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Logits per token (the output vocabulary).
    pub fn vocab(&self) -> usize {
        self.llama.vocab()
    }

    /// Tokens per conversation.
    pub fn ctx_size(&self) -> usize {
        self.llama.max_ctx()
    }

    /// Milliseconds the load took (file, weights, tokenizer, backends).
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Renders `messages` with the chat template (generation prompt added).
    pub fn render_chat(&self, messages: &[Message]) -> Result<String, ExecutionError> {
        let system = self
            .model
            .chat
            .as_ref()
            .and_then(|c| c.system_default.as_deref());
        match system {
            Some(s) if !messages.iter().any(|m| m.role == "system") => {
                let mut all = vec![Message::new("system", s)];
                all.extend_from_slice(messages);
                self.chat.render(&all, true)
            }
            _ => self.chat.render(messages, true),
        }
    }

    /// Token ids of a prompt: chat prompts rendered, BOS added once when the
    /// tokenizer wants it and `at_start`.
    pub fn prompt_ids(&self, prompt: &Prompt, at_start: bool) -> Result<Vec<u32>, ExecutionError> {
        let text = match prompt {
            Prompt::Tokens(ids) => return Ok(ids.clone()),
            Prompt::Raw(text) => text.clone(),
            Prompt::Chat(messages) => self.render_chat(messages)?,
        };
        let mut ids = self.tokenizer.encode(&text, at_start)?;
        if let Some(bos) = self.tokenizer.bos_id() {
            if ids.len() >= 2 && ids[0] == bos && ids[1] == bos {
                ids.remove(0);
            }
        }
        Ok(ids)
    }
}

/// What to generate from.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// A conversation, rendered with the chat template. The generator reuses
    /// the KV cache of the longest prefix it already holds.
    Chat(Vec<Message>),
    /// Text appended to the conversation as is (no template).
    Raw(String),
    /// Token ids appended as is.
    Tokens(Vec<u32>),
}

impl From<&str> for Prompt {
    /// One user message through the chat template.
    fn from(text: &str) -> Prompt {
        Prompt::Chat(vec![Message::new("user", text)])
    }
}

/// How the prompt is run before the first sampled token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefill {
    /// All prompt tokens in one forward (chunks of 512): matrix-matrix products.
    Bulk,
    /// One forward per prompt token.
    TokenByToken,
}

/// Timing of the last `generate` (the contract's observability).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Model load, milliseconds.
    pub load_ms: f64,
    /// Prompt tokens run by the prefill.
    pub prefill_tokens: usize,
    /// Prefill, milliseconds.
    pub prefill_ms: f64,
    /// Tokens sampled.
    pub decode_tokens: usize,
    /// Decode (sampling and forward of each new token), milliseconds.
    pub decode_ms: f64,
    /// Milliseconds of each decode step.
    pub step_ms: Vec<f64>,
}

impl Timings {
    /// Prefill tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        per_s(self.prefill_tokens, self.prefill_ms)
    }

    /// Decode tokens per second.
    pub fn decode_tok_s(&self) -> f64 {
        per_s(self.decode_tokens, self.decode_ms)
    }

    /// Mean milliseconds per decode step.
    pub fn mean_step_ms(&self) -> f64 {
        if self.step_ms.is_empty() {
            0.0
        } else {
            self.step_ms.iter().sum::<f64>() / self.step_ms.len() as f64
        }
    }
}

fn per_s(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1e3 / ms
    } else {
        0.0
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// An end-of-sequence or end-of-turn token.
    Stop,
    /// A stop string appeared.
    StopString,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The context is full.
    Context,
}

/// One step of output: the sampled token (if any) and the text that is now
/// complete (whole UTF-8 characters, stop strings held back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The sampled token; `None` for text released at the end.
    pub token: Option<u32>,
    /// Text to print (may be empty).
    pub text: String,
}

struct State {
    cache: TextCache,
    ctx: ExecContext,
    /// Tokens whose keys and values are in the cache, in order.
    history: Vec<u32>,
    /// Logits after the last forward (`[1, vocab]`).
    logits: Option<Tensor>,
    prefill: Prefill,
    timings: Timings,
}

/// One conversation: a KV cache and its token history on a shared [`TextModel`].
pub struct Generator {
    model: Arc<TextModel>,
    state: State,
}

const PREFILL_CHUNK: usize = 512;

impl State {
    fn forward(
        &mut self,
        m: &TextModel,
        ids: &[u32],
        rows: LogitRows,
    ) -> Result<Tensor, ExecutionError> {
        let logits = m
            .llama
            .forward(&m.dispatcher, &mut self.ctx, &mut self.cache, ids, rows)?;
        self.history.extend_from_slice(ids);
        Ok(logits)
    }

    /// Runs `ids` after the cached tokens; keeps the last row's logits.
    fn prefill(&mut self, m: &TextModel, ids: &[u32]) -> Result<(), ExecutionError> {
        let requested = self.cache.len() + ids.len();
        if requested > self.cache.capacity() {
            return Err(ExecutionError::ContextOverflow {
                max: self.cache.capacity(),
                requested,
            });
        }
        let chunk = match self.prefill {
            Prefill::Bulk => PREFILL_CHUNK,
            Prefill::TokenByToken => 1,
        };
        for part in ids.chunks(chunk) {
            self.logits = Some(self.forward(m, part, LogitRows::Last)?);
        }
        Ok(())
    }

    /// Makes the cache hold exactly `ids` (reusing the longest cached prefix)
    /// and leaves the logits of its last token; returns how many tokens it ran.
    fn sync(&mut self, m: &TextModel, ids: &[u32]) -> Result<usize, ExecutionError> {
        let common = self
            .history
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count();
        // Re-run at least the last token so its logits are fresh.
        let keep = common.min(ids.len().saturating_sub(1));
        self.cache.truncate(keep);
        self.history.truncate(keep);
        self.prefill(m, &ids[keep..])?;
        Ok(ids.len() - keep)
    }
}

impl Generator {
    /// The shared model.
    pub fn model(&self) -> &Arc<TextModel> {
        &self.model
    }

    /// Chooses bulk (default) or token-by-token prefill.
    pub fn set_prefill(&mut self, mode: Prefill) {
        self.state.prefill = mode;
    }

    /// Forgets the conversation (the cache keeps its memory).
    pub fn reset_kv_cache(&mut self) {
        self.state.cache.reset();
        self.state.history.clear();
        self.state.logits = None;
    }

    /// Tokens in the KV cache.
    pub fn history(&self) -> &[u32] {
        &self.state.history
    }

    /// Timing of the last `generate` (and the model load).
    pub fn timings(&self) -> &Timings {
        &self.state.timings
    }

    /// The execution-trace hash (hex) and node count, on the graph path with `trace` on.
    pub fn trace(&self) -> Option<(String, usize)> {
        self.state.cache.trace()
    }

    /// Dispatch decisions so far (per-backend op counts, fallbacks).
    pub fn dispatch_log(&self) -> &crate::backend::DispatchLog {
        &self.state.ctx.log
    }

    /// Turns on the per-op dispatch record of each forward (`--dispatch`).
    pub fn keep_dispatch_records(&mut self, on: bool) {
        self.state.ctx.log.keep_records(on);
    }

    /// Logits of the next token after the last forward, as f32.
    pub fn logits(&self) -> Option<Vec<f32>> {
        let t = self.state.logits.as_ref()?;
        self.model.dispatcher.primary().try_download_f32(t).ok()
    }

    /// Appends `ids` to the conversation and returns the logits of every one of
    /// them (`[ids.len(), vocab]`, row-major), for scoring and tests.
    pub fn forward_all(&mut self, ids: &[u32]) -> Result<Vec<f32>, ExecutionError> {
        self.forward_rows(ids, 0)
    }

    /// Appends `ids` to the conversation and returns the logits of `ids[from..]`
    /// (`[ids.len() - from, vocab]`, row-major; the output projection runs on
    /// those rows only). `from` must be below `ids.len()`.
    pub fn forward_rows(&mut self, ids: &[u32], from: usize) -> Result<Vec<f32>, ExecutionError> {
        let requested = self.state.cache.len() + ids.len();
        if requested > self.state.cache.capacity() {
            return Err(ExecutionError::ContextOverflow {
                max: self.state.cache.capacity(),
                requested,
            });
        }
        let m = self.model.clone();
        let logits = self.state.forward(&m, ids, LogitRows::From(from))?;
        let values = m.dispatcher.primary().try_download_f32(&logits)?;
        let vocab = m.llama.vocab();
        self.state.logits = Some(Tensor::from_f32(
            &[1, vocab],
            values[values.len() - vocab..].to_vec(),
        )?);
        Ok(values)
    }

    /// Starts generating from `prompt`: at most `max_tokens` tokens (`None`:
    /// until a stop or a full context). The prompt is prefilled now; a prompt
    /// that does not fit is `ContextOverflow { max, requested }`.
    pub fn generate(
        &mut self,
        prompt: impl Into<Prompt>,
        max_tokens: Option<usize>,
        sampling: &Sampling,
    ) -> Result<Generation<'_>, ExecutionError> {
        self.generate_with(prompt, max_tokens, sampling, &GenerateOptions::default())
    }

    /// [`Generator::generate`] with extra stop strings and special-token output.
    pub fn generate_with(
        &mut self,
        prompt: impl Into<Prompt>,
        max_tokens: Option<usize>,
        sampling: &Sampling,
        opts: &GenerateOptions,
    ) -> Result<Generation<'_>, ExecutionError> {
        sampling
            .validate()
            .map_err(|e| ExecutionError::InvalidConfig {
                field: e.field.into(),
                reason: e.reason,
            })?;
        let prompt = prompt.into();
        let Generator { model, state } = self;
        let m: &TextModel = model;
        state.timings = Timings {
            load_ms: m.load_ms,
            ..Timings::default()
        };
        let start = Instant::now();
        // A chat prompt is the whole conversation, so it starts the sequence.
        let at_start = matches!(prompt, Prompt::Chat(_)) || state.history.is_empty();
        let ids = m.prompt_ids(&prompt, at_start)?;
        let ran = match prompt {
            Prompt::Chat(_) => state.sync(m, &ids)?,
            Prompt::Raw(_) | Prompt::Tokens(_) => {
                if ids.is_empty() && state.logits.is_none() {
                    return Err(ExecutionError::Tokenizer {
                        reason: "the prompt is empty (no tokens to start from)".into(),
                    });
                }
                state.prefill(m, &ids)?;
                ids.len()
            }
        };
        // The prompt's time is the time its logits take to exist, not to be
        // queued on a device (as llama.cpp's prompt eval time).
        m.dispatcher.primary().synchronize()?;
        state.timings.prefill_tokens = ran;
        state.timings.prefill_ms = start.elapsed().as_secs_f64() * 1e3;
        let mut stops = m.stop_strings.clone();
        stops.extend(opts.stop.iter().filter(|s| !s.is_empty()).cloned());
        Ok(Generation {
            model: m,
            state,
            stream: m.tokenizer.stream(!opts.special),
            sampling: sampling.clone(),
            draws: Draws::new(sampling.seed),
            remaining: max_tokens,
            unforwarded: None,
            ahead: None,
            picked_from: None,
            held: String::new(),
            stops,
            finish: None,
            generated: Vec::new(),
        })
    }
}

/// Options of [`Generator::generate_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Extra stop strings (`--stop`), beside the model's `chat.stop`.
    pub stop: Vec<String>,
    /// Print special tokens (`--special`); skipped by default.
    pub special: bool,
}

/// The running generation: an iterator of [`Piece`]s.
pub struct Generation<'g> {
    model: &'g TextModel,
    state: &'g mut State,
    stream: StreamDecoder<'g>,
    sampling: Sampling,
    draws: Draws,
    remaining: Option<usize>,
    /// The last sampled token, not yet run through the model.
    unforwarded: Option<u32>,
    /// The greedy pick from the current logits, already queued on the device
    /// (see [`Generation::pick_on_device`]).
    ahead: Option<(Tensor, PendingId)>,
    /// The logits the last token was picked from, where the state's moved on
    /// to those of its forward (picked on the device, one step ahead).
    picked_from: Option<Tensor>,
    held: String,
    stops: Vec<String>,
    finish: Option<Finish>,
    generated: Vec<u32>,
}

impl Generation<'_> {
    /// Why it ended (`None` while running).
    pub fn finish(&self) -> Option<Finish> {
        self.finish
    }

    /// Tokens sampled so far (stop token excluded).
    pub fn tokens(&self) -> &[u32] {
        &self.generated
    }

    /// Timings so far.
    pub fn timings(&self) -> &Timings {
        &self.state.timings
    }

    /// The logits the most recent token was sampled from (as f32).
    pub fn logits(&self) -> Option<Vec<f32>> {
        let t = self.picked_from.as_ref().or(self.state.logits.as_ref())?;
        self.model.dispatcher.primary().try_download_f32(t).ok()
    }

    /// Greedy decoding one step ahead on a backend that keeps the pick on
    /// the device ([`crate::backend::Backend::argmax_on_device`]): the pick
    /// from the current logits is queued, then the forward of that token (its
    /// id still on the device) and the pick from its logits are queued too,
    /// and only then is the first pick read back, so the device runs the next
    /// step while the host waits for this one. Returns the id and whether its
    /// forward was queued (then its keys are cached and it is in the history;
    /// a stop token's forward is taken back out). `None` where sampling is not
    /// plain greedy, the path takes host ids only or the backend has no such
    /// pick: the caller samples as usual.
    fn pick_on_device(&mut self) -> Result<Option<(u32, bool)>, ExecutionError> {
        let m = self.model;
        if !self.sampling.is_argmax_of_logits() || !m.llama.takes_id_tensors() {
            return Ok(None);
        }
        let backend = m.dispatcher.primary();
        let pick = match self.ahead.take() {
            Some(p) => p,
            None => {
                let Some(logits) = self.state.logits.as_ref() else {
                    return Ok(None);
                };
                match backend.argmax_on_device(logits) {
                    Some(p) => p?,
                    None => return Ok(None),
                }
            }
        };
        let (id_on_device, pending) = pick;
        let state = &mut *self.state;
        let room = state.cache.len() < state.cache.capacity();
        let more = self.remaining.is_none_or(|r| r > 1);
        let before = state.logits.clone();
        let forwarded = room && more;
        if forwarded {
            let (logits, next) = m.llama.forward_and_pick(
                &m.dispatcher,
                &mut state.ctx,
                &mut state.cache,
                id_on_device,
            )?;
            self.ahead = next;
            state.logits = Some(logits);
        }
        let id = pending.wait()?;
        let id = u32::try_from(id)
            .ok()
            .filter(|&i| (i as usize) < m.llama.vocab())
            .ok_or_else(|| ExecutionError::IndexOutOfRange {
                op: "argmax on the device".into(),
                index: id.into(),
                len: m.llama.vocab(),
            })?;
        if forwarded {
            if m.stop_ids.contains(&id) {
                state.cache.truncate(state.cache.len() - 1);
                state.logits = before;
                self.ahead = None;
                self.picked_from = None;
            } else {
                state.history.push(id);
                self.picked_from = before;
            }
        } else {
            self.picked_from = None;
        }
        Ok(Some((id, forwarded)))
    }

    fn sample(&mut self) -> Result<u32, ExecutionError> {
        let m = self.model;
        let logits = self
            .state
            .logits
            .clone()
            .ok_or_else(|| ExecutionError::Tokenizer {
                reason: "nothing to sample from: no prompt was run".into(),
            })?;
        let u = if self.sampling.is_greedy() {
            0.0
        } else {
            self.draws.next_u()
        };
        let mut inputs = vec![logits];
        if self.sampling.repeat_penalty != 1.0 {
            let h = &self.state.history;
            let from = h.len().saturating_sub(self.sampling.repeat_last_n);
            let recent: Vec<i32> = h[from..].iter().map(|&t| t as i32).collect();
            inputs.push(Tensor::from_i32(&[recent.len()], recent)?);
        }
        let out = m.dispatcher.run1(
            &Op::Sample(self.sampling.params(u)),
            &inputs,
            &mut self.state.ctx,
        )?;
        let id = out
            .as_i32()
            .and_then(|v| v.first().copied())
            .ok_or_else(|| ExecutionError::UnsupportedOp {
                op: "Sample (result not on the host)".into(),
                backend: m.dispatcher.primary().name().to_string(),
                input_dtype: out.dtype(),
            })?;
        u32::try_from(id).map_err(|_| ExecutionError::IndexOutOfRange {
            op: "Sample".into(),
            index: id.into(),
            len: m.llama.vocab(),
        })
    }

    /// Releases held text up to a stop string or a possible stop-string start.
    fn release(&mut self) -> String {
        if let Some(at) = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            self.finish = Some(Finish::StopString);
            let out = self.held[..at].to_string();
            self.held.clear();
            return out;
        }
        let keep = self
            .stops
            .iter()
            .flat_map(|s| {
                let held = &self.held;
                (1..s.len().min(held.len() + 1))
                    .filter(|&n| s.is_char_boundary(n) && held.ends_with(&s[..n]))
                    .max()
            })
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    fn step(&mut self) -> Result<Option<Piece>, ExecutionError> {
        if self.finish.is_some() {
            return Ok(None);
        }
        let start = Instant::now();
        if let Some(t) = self.unforwarded.take() {
            if self.state.cache.len() >= self.state.cache.capacity() {
                return Ok(self.end(Finish::Context));
            }
            let logits = self.state.forward(self.model, &[t], LogitRows::Last)?;
            self.state.logits = Some(logits);
        }
        if self.remaining == Some(0) {
            return Ok(self.end(Finish::MaxTokens));
        }
        let (id, forwarded) = match self.pick_on_device()? {
            Some(picked) => picked,
            None => {
                self.picked_from = None;
                (self.sample()?, false)
            }
        };
        if self.model.stop_ids.contains(&id) {
            return Ok(self.end(Finish::Stop));
        }
        self.generated.push(id);
        if !forwarded {
            self.unforwarded = Some(id);
        }
        if let Some(r) = &mut self.remaining {
            *r -= 1;
        }
        let text = self.stream.push(id);
        self.held.push_str(&text);
        let text = self.release();
        let t = &mut self.state.timings;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        t.decode_tokens += 1;
        t.decode_ms += ms;
        t.step_ms.push(ms);
        Ok(Some(Piece {
            token: Some(id),
            text,
        }))
    }

    /// Ends with `why`; held text that is not part of a stop string comes out last.
    fn end(&mut self, why: Finish) -> Option<Piece> {
        self.finish = Some(why);
        let rest = std::mem::replace(&mut self.stream, self.model.tokenizer.stream(true)).finish();
        self.held.push_str(&rest);
        let text = if self.stops.iter().any(|s| self.held.contains(s.as_str())) {
            let t = self.release();
            self.finish = Some(Finish::StopString);
            t
        } else {
            std::mem::take(&mut self.held)
        };
        (!text.is_empty()).then_some(Piece { token: None, text })
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Piece, ExecutionError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(p)) => Some(Ok(p)),
            Ok(None) => None,
            Err(e) => {
                self.finish = Some(Finish::Stop);
                Some(Err(e))
            }
        }
    }
}
