//! `cyb-llm embed MODEL [--text T]... [--file F]`: sentence embeddings, one
//! text per line (stdin when neither is given), as json / jsonl / tsv.

use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher};
use cyb_llm::encode::input::TextSource;
use cyb_llm::encode::{EmbedOptions, Encoder, Pooling};
use cyb_llm::error::ExecutionError;
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Inputs of at least this many texts get a progress bar (when stderr is a terminal).
const PROGRESS_MIN: usize = 64;

/// Output format of `embed` and `classify`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON document with every result.
    Json,
    /// One JSON object per input line, in input order.
    Jsonl,
    /// Tab-separated: the text, then the values.
    Tsv,
}

/// Where the texts come from and how the model runs: shared by `embed` and `classify`.
#[derive(clap::Args, Debug)]
pub struct InputArgs {
    /// The .model file (a BertStyle encoder), or a Hugging Face folder (imported once into the cache).
    pub model: PathBuf,
    #[command(flatten)]
    pub verify: VerifyArg,
    /// A text to process (repeatable).
    #[arg(long = "text", value_name = "TEXT")]
    pub texts: Vec<String>,
    /// A file with one text per line ("-" reads stdin). Without --text or --file, stdin is read.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
    /// Texts per forward pass.
    #[arg(short = 'b', long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Backend: auto, or a registered name (cpu, wgpu, ...).
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Print load time, encode time and texts/s to stderr.
    #[arg(long)]
    pub timings: bool,
    /// Execution path of the encoder (graph: the model's graph section on the executor).
    #[arg(long, value_enum, default_value = "auto")]
    pub path: super::run::PathChoice,
    /// Take texts K, K+N, K+2N, ... only (0-based K; one worker of N); json/jsonl records get their `index` in the whole input.
    #[arg(long, value_name = "K/N", value_parser = super::shard::Shard::parse)]
    pub shard: Option<super::shard::Shard>,
}

impl InputArgs {
    /// The effective output format.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }

    /// The texts: every --text, then the lines of --file; stdin when neither is given.
    pub fn texts(&self) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let mut texts = self.texts.clone();
        let source = match &self.file {
            Some(p) if p.as_os_str() == "-" => Some(TextSource::Stdin),
            Some(p) => Some(TextSource::File(p.clone())),
            None if texts.is_empty() => Some(TextSource::Stdin),
            None => None,
        };
        if let Some(source) = source {
            if source == TextSource::Stdin && std::io::stdin().is_terminal() {
                eprintln!("reading texts from stdin, one per line (end with Ctrl-D)");
            }
            texts.extend(source.read()?);
        }
        Ok(match self.shard {
            Some(s) => s.select(texts),
            None => texts,
        })
    }

    /// Loads the model and binds it to the chosen backends; returns the load time too.
    pub fn encoder(&self) -> Result<(Encoder, f64), Box<dyn std::error::Error>> {
        let file = self.verify.resolve(&self.model)?;
        let start = Instant::now();
        let model = cyb_llm::load(file)?;
        let path = self.model.display().to_string();
        let mut config = BackendConfig::default();
        if let Some(t) = self.threads {
            config.threads = t as usize;
        }
        let dispatcher = Dispatcher::new(BackendChoice::parse(&self.backend)?, &config)?;
        let encoder = Encoder::with_path(Arc::new(model), dispatcher, self.path.into())
            .map_err(|e| format!("{path}: {e}"))?;
        Ok((encoder, start.elapsed().as_secs_f64() * 1e3))
    }
}

/// A progress bar on stderr for `total` texts, drawn only on a terminal and
/// for big inputs; `None` otherwise.
pub fn progress_bar(total: usize) -> Option<indicatif::ProgressBar> {
    if total < PROGRESS_MIN {
        return None;
    }
    super::terminal_progress(total, "{bar:40} {pos}/{len} texts  {per_sec}  eta {eta}")
}

/// Prints the `--timings` line.
pub fn print_timings(load_ms: f64, texts: usize, tokens: usize, secs: f64) {
    eprintln!(
        "timings: load {load_ms:.1} ms, {texts} texts ({tokens} tokens) in {:.1} ms: {:.1} texts/s, {:.0} tokens/s",
        secs * 1e3,
        texts as f64 / secs.max(1e-9),
        tokens as f64 / secs.max(1e-9)
    );
}

/// A text as one TSV field: backslash, tab, CR and LF escaped.
pub fn tsv_field(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// Flushes `out`; a closed pipe (`| head`) ends the command quietly.
pub fn finish(out: &mut impl Write) -> CmdResult {
    match out.flush() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// Turns a broken pipe while writing into a quiet success.
pub fn written(r: std::io::Result<()>) -> Result<bool, Box<dyn std::error::Error>> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Tokenizes `texts` and runs `work` over them (the encoder's batched call, reporting the
/// texts done) with a progress bar for big inputs; prints the `--timings` line.
pub fn run_batches<R>(
    input: &InputArgs,
    enc: &mut Encoder,
    load_ms: f64,
    texts: &[String],
    work: impl FnOnce(
        &mut Encoder,
        &[Vec<u32>],
        &mut dyn FnMut(usize),
    ) -> Result<Vec<R>, ExecutionError>,
) -> Result<Vec<R>, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let tokens = enc.tokenize(texts)?.tokens;
    let bar = progress_bar(texts.len());
    let results = work(enc, &tokens, &mut |done| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if input.timings {
        let count = tokens.iter().map(Vec::len).sum();
        print_timings(load_ms, texts.len(), count, start.elapsed().as_secs_f64());
    }
    Ok(results)
}

/// Writes one result per text to stdout: for json one document, the fields of `header`
/// plus `data` (the `record`s, with their `index` in the whole input under `--shard`);
/// for jsonl one `record` per line; for tsv the text, then the
/// `fields`. A closed pipe ends the output quietly.
pub fn write_results<R>(
    input: &InputArgs,
    header: serde_json::Value,
    texts: &[String],
    results: &[R],
    record: impl Fn(&str, &R) -> serde_json::Value,
    fields: impl Fn(&R) -> Vec<String>,
) -> CmdResult {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut records = texts.iter().zip(results).enumerate().map(|(i, (t, r))| {
        let mut v = record(t, r);
        if let Some(s) = input.shard {
            v["index"] = s.original(i).into();
        }
        v
    });
    match input.format() {
        Format::Json => {
            let mut doc = header;
            doc["data"] = serde_json::Value::Array(records.collect());
            if !written(serde_json::to_writer(&mut out, &doc).map_err(std::io::Error::from))?
                || !written(writeln!(out))?
            {
                return Ok(ExitCode::SUCCESS);
            }
        }
        Format::Jsonl => {
            for line in &mut records {
                let r = serde_json::to_writer(&mut out, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out));
                if !written(r)? {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        Format::Tsv => {
            for (t, r) in texts.iter().zip(results) {
                let mut line = tsv_field(t);
                for f in fields(r) {
                    line.push('\t');
                    line.push_str(&f);
                }
                if !written(writeln!(out, "{line}"))? {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
    }
    finish(&mut out)
}

/// Arguments of `cyb-llm embed`.
#[derive(clap::Args, Debug)]
pub struct EmbedArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Pooling: cls, mean or max (default: the model's).
    #[arg(long, value_parser = ["cls", "mean", "max"])]
    pool: Option<String>,
    /// L2-normalize the embeddings (default: the model's).
    #[arg(long, conflicts_with = "no_normalize")]
    normalize: bool,
    /// Do not normalize, even when the model's default does.
    #[arg(long)]
    no_normalize: bool,
}

/// Runs `cyb-llm embed`.
pub fn run(a: EmbedArgs) -> CmdResult {
    let (mut enc, load_ms) = a.input.encoder()?;
    let texts = a.input.texts()?;
    let mut opts = EmbedOptions::defaults(enc.bert());
    if let Some(p) = a.pool.as_deref().and_then(Pooling::parse) {
        opts.pooling = p;
    }
    if a.normalize {
        opts.normalize = true;
    }
    if a.no_normalize {
        opts.normalize = false;
    }
    opts.batch_size = a.input.batch_size as usize;
    let embeddings = run_batches(
        &a.input,
        &mut enc,
        load_ms,
        &texts,
        |enc, tokens, progress| enc.embed_tokens(tokens, &opts, progress),
    )?;
    let header = json!({
        "model": enc.model().name,
        "pooling": opts.pooling.name(),
        "normalized": opts.normalize,
        "dimensions": enc.bert().config.hidden,
    });
    write_results(
        &a.input,
        header,
        &texts,
        &embeddings,
        |t, e| json!({"text": t, "embedding": e}),
        |e| e.iter().map(f32::to_string).collect(),
    )
}
