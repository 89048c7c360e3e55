//! `cyb-llm run MODEL --prompt TEXT`: one answer from a text model, streamed
//! to stdout; `--json` prints one JSON document with text and timings.
//! The generation flags are shared with `chat`.

use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::BackendChoice;
use cyb_llm::generate::{
    fresh_seed, Finish, GenerateOptions, Generation, LoadOptions, Message, Prompt, Sampling,
    TextModel, Timings,
};
use cyb_llm::WeightPages;
use serde_json::json;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

fn finite(s: &str) -> Result<f32, String> {
    let v: f32 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("`{s}` is not a finite number"))
    }
}

fn temperature(s: &str) -> Result<f32, String> {
    let v = finite(s)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be >= 0 (0 = greedy)"))
    }
}

fn top_p(s: &str) -> Result<f32, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be in (0, 1]"))
    }
}

fn min_p(s: &str) -> Result<f32, String> {
    let v = finite(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} must be in [0, 1]"))
    }
}

fn positive(s: &str) -> Result<f32, String> {
    let v = finite(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be > 0"))
    }
}

/// Which code runs the model (`--path`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChoice {
    /// The curated family when there is one.
    Auto,
    /// The hand-written family code.
    Curated,
    /// The graph executor.
    Graph,
}

impl From<PathChoice> for cyb_llm::path::PathChoice {
    fn from(p: PathChoice) -> Self {
        match p {
            PathChoice::Auto => cyb_llm::path::PathChoice::Auto,
            PathChoice::Curated => cyb_llm::path::PathChoice::Curated,
            PathChoice::Graph => cyb_llm::path::PathChoice::Graph,
        }
    }
}

/// Model, sampling and output flags shared by `run` and `chat`.
#[derive(clap::Args, Debug)]
pub struct GenArgs {
    /// The .model file (a text generator), or a GGUF file / Hugging Face folder (imported once into the cache).
    pub model: PathBuf,
    #[command(flatten)]
    pub verify: VerifyArg,
    /// Tokens to generate (default: until a stop, capped by the context).
    #[arg(short = 'n', long = "max-tokens", alias = "n-predict")]
    pub max_tokens: Option<usize>,
    /// Temperature (0 = greedy). Default: the model's [sampling], then 0.8.
    #[arg(long = "temp", alias = "temperature", value_parser = temperature)]
    pub temp: Option<f32>,
    /// Keep the K most likely tokens (0 = off). Default: the model's, then 40.
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Nucleus sampling threshold in (0, 1]. Default: the model's, then 0.95.
    #[arg(long, value_parser = top_p)]
    pub top_p: Option<f32>,
    /// Minimum probability relative to the top token, in [0, 1]. Default: the model's, then 0.05.
    #[arg(long, value_parser = min_p)]
    pub min_p: Option<f32>,
    /// Repetition penalty (> 0, 1 = off). Default: the model's, then 1.0.
    #[arg(long, value_parser = positive)]
    pub repeat_penalty: Option<f32>,
    /// Tokens the repetition penalty looks back over. Default: 64.
    #[arg(long)]
    pub repeat_last_n: Option<usize>,
    /// Random seed (default: a fresh one, printed with --timings / --json).
    #[arg(short = 's', long)]
    pub seed: Option<u64>,
    /// System message for the chat template.
    #[arg(long)]
    pub system: Option<String>,
    /// Feed the prompt as is, without the chat template.
    #[arg(long)]
    pub no_chat: bool,
    /// Stop when this text appears (repeatable).
    #[arg(long = "stop", value_name = "STR")]
    pub stop: Vec<String>,
    /// Print special tokens (skipped by default).
    #[arg(long)]
    pub special: bool,
    /// Context size in tokens (capped by the model's max_position_embeddings).
    #[arg(short = 'c', long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub ctx_size: u64,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Backend: auto, or a registered name (cpu, wgpu, honeycrisp, nox, ...).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Execution path.
    #[arg(long, value_enum, default_value = "auto")]
    pub path: PathChoice,
    /// Print load ms, prefill ms and tok/s, per-step ms and decode tok/s to stderr.
    #[arg(long)]
    pub timings: bool,
    /// Print per-op backend decisions (counts and fallbacks) to stderr.
    #[arg(long)]
    pub dispatch: bool,
    /// Graph path: skip the fusion pass.
    #[arg(long)]
    pub no_fuse: bool,
    /// Keep the weights in the file mapping (nothing copied at load, pages shared with other
    /// processes) instead of copying them into transparent huge pages (faster decode).
    #[arg(long)]
    pub no_huge_pages: bool,
    /// Graph path: print the execution-trace hash (bit-exact across machines on `--backend nox`).
    #[arg(long)]
    pub trace: bool,
    /// Machine-readable output (timings always included).
    #[arg(long)]
    pub json: bool,
}

impl GenArgs {
    /// Loads the model as the flags say.
    pub fn load(&self) -> Result<Arc<TextModel>, Box<dyn std::error::Error>> {
        let mut opts = LoadOptions {
            backend: BackendChoice::parse(&self.backend)?,
            ctx_size: self.ctx_size as usize,
            path: self.path.into(),
            fuse: !self.no_fuse,
            trace: self.trace,
            pages: if self.no_huge_pages {
                WeightPages::Mapped
            } else {
                WeightPages::HugePages
            },
            ..LoadOptions::default()
        };
        if let Some(t) = self.threads {
            opts.threads = t as usize;
        }
        Ok(TextModel::load(self.verify.resolve(&self.model)?, &opts)?)
    }

    /// Sampling: flags over the model's `[sampling]` over llama.cpp's defaults.
    pub fn sampling(&self, model: &TextModel) -> Sampling {
        let mut s = Sampling::for_model(&model.model().config);
        if let Some(v) = self.temp {
            s.temperature = v;
        }
        if let Some(v) = self.top_k {
            s.top_k = v;
        }
        if let Some(v) = self.top_p {
            s.top_p = v;
        }
        if let Some(v) = self.min_p {
            s.min_p = v;
        }
        if let Some(v) = self.repeat_penalty {
            s.repeat_penalty = v;
        }
        if let Some(v) = self.repeat_last_n {
            s.repeat_last_n = v;
        }
        s.seed = self.seed.unwrap_or_else(fresh_seed);
        s
    }

    /// Stop strings and special-token output.
    pub fn options(&self) -> GenerateOptions {
        GenerateOptions {
            stop: self.stop.clone(),
            special: self.special,
        }
    }

    /// The messages of one user turn (system message first when given).
    pub fn messages(&self, history: &[Message], user: &str) -> Vec<Message> {
        let mut m = Vec::with_capacity(history.len() + 2);
        if let Some(s) = &self.system {
            if history.is_empty() {
                m.push(Message::new("system", s));
            }
        }
        m.extend_from_slice(history);
        m.push(Message::new("user", user));
        m
    }
}

/// `cyb-llm run` arguments.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The prompt ("-" reads stdin).
    #[arg(short = 'p', long, conflicts_with = "file")]
    prompt: Option<String>,
    /// Read the prompt from FILE ("-" reads stdin).
    #[arg(short = 'f', long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    gen: GenArgs,
}

/// Streams `generation` to `out` (unless `quiet`); returns the text.
pub fn stream(
    generation: &mut Generation<'_>,
    out: &mut dyn Write,
    quiet: bool,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut text = String::new();
    for piece in generation {
        let piece = piece?;
        if !quiet && !piece.text.is_empty() {
            out.write_all(piece.text.as_bytes())?;
            out.flush()?;
        }
        text.push_str(&piece.text);
    }
    Ok(text)
}

/// The `--timings` lines.
pub fn print_timings(t: &Timings, seed: u64) {
    eprintln!(
        "timings: load {:.1} ms | prefill {} tokens {:.1} ms ({:.1} tok/s) | decode {} tokens {:.1} ms ({:.1} tok/s, {:.2} ms/step) | seed {seed}",
        t.load_ms,
        t.prefill_tokens,
        t.prefill_ms,
        t.prefill_tok_s(),
        t.decode_tokens,
        t.decode_ms,
        t.decode_tok_s(),
        t.mean_step_ms(),
    );
}

/// JSON of the timings.
pub fn timings_json(t: &Timings) -> serde_json::Value {
    json!({
        "load_ms": t.load_ms,
        "prefill_tokens": t.prefill_tokens,
        "prefill_ms": t.prefill_ms,
        "prefill_tok_s": t.prefill_tok_s(),
        "decode_tokens": t.decode_tokens,
        "decode_ms": t.decode_ms,
        "decode_tok_s": t.decode_tok_s(),
        "step_ms": t.step_ms,
    })
}

/// Prints the dispatch summary and fallbacks of a generator.
pub fn print_dispatch(log: &cyb_llm::backend::DispatchLog) {
    eprintln!("dispatch: {}", log.summary());
    for (decision, n) in log.fallbacks() {
        eprintln!("dispatch: {n} x {decision}");
    }
}

fn read_prompt(a: &RunArgs) -> Result<String, Box<dyn std::error::Error>> {
    let stdin = || -> Result<String, Box<dyn std::error::Error>> {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(s)
    };
    match (&a.prompt, &a.file) {
        (Some(p), _) if p == "-" => stdin(),
        (Some(p), _) => Ok(p.clone()),
        (None, Some(f)) if f.as_os_str() == "-" => stdin(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map_err(|e| format!("{}: cannot read the prompt: {e}", f.display()).into()),
        (None, None) => Err("no prompt: give --prompt TEXT, -f FILE, or -p - for stdin".into()),
    }
}

/// Runs `cyb-llm run`.
pub fn run(a: RunArgs) -> CmdResult {
    let prompt_text = read_prompt(&a)?;
    let g = &a.gen;
    let model = g.load()?;
    let sampling = g.sampling(&model);
    let mut generator = model.generator()?;
    generator.keep_dispatch_records(g.dispatch);
    let prompt = if g.no_chat {
        Prompt::Raw(prompt_text)
    } else {
        Prompt::Chat(g.messages(&[], &prompt_text))
    };
    let mut generation = generator.generate_with(prompt, g.max_tokens, &sampling, &g.options())?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let text = stream(&mut generation, &mut out, g.json)?;
    let finish = generation.finish().unwrap_or(Finish::MaxTokens);
    let tokens = generation.tokens().len();
    drop(generation);
    let t = generator.timings().clone();
    if g.json {
        let doc = json!({
            "model": g.model.display().to_string(),
            "text": text,
            "tokens": tokens,
            "finish": finish,
            "seed": sampling.seed,
            "timings": timings_json(&t),
        });
        writeln!(out, "{doc}")?;
    } else {
        writeln!(out)?;
    }
    if g.timings {
        print_timings(&t, sampling.seed);
    }
    if g.dispatch {
        print_dispatch(generator.dispatch_log());
    }
    if g.trace {
        match generator.trace() {
            Some((hash, nodes)) => eprintln!("trace: {hash} ({nodes} nodes)"),
            None => eprintln!("trace: none (the trace is kept on the graph path only)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
