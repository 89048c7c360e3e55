//! `cyb-llm perplexity MODEL -f TEXT`: perplexity by llama-perplexity's method
//! (the running estimate per chunk on stderr, the final `PPL = x +/- y` on
//! stdout); `--kl-divergence-base FILE` saves the run's log-probabilities,
//! `--kl-divergence FILE` scores this run against them.

use super::run::PathChoice;
use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::BackendChoice;
use cyb_llm::error::ExecutionError;
use cyb_llm::generate::{LoadOptions, TextModel};
use cyb_llm::perplexity::kld::{BaseWriter, Comparison, KldReport};
use cyb_llm::perplexity::{evaluate, tokenize, Chunk, ChunkSink, Options, Perplexity};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// `cyb-llm perplexity` arguments.
#[derive(clap::Args, Debug)]
pub struct PerplexityArgs {
    /// The text generator: a .model file, or a GGUF file / Hugging Face folder (imported once into the cache).
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    /// The text to score (UTF-8).
    #[arg(short = 'f', long, required_unless_present = "kl_divergence")]
    file: Option<PathBuf>,
    /// Tokens per chunk; the second half of each chunk is scored (with --kl-divergence: the base run's).
    #[arg(short = 'c', long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(4..))]
    ctx_size: u64,
    /// Tokens per forward (default: the whole chunk).
    #[arg(short = 'b', long, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: Option<u64>,
    /// Score at most this many chunks (default: every whole chunk of the text).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    chunks: Option<u64>,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Backend: auto, or a registered name (cpu, reference, wgpu, nox, ...).
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Execution path (the graph path scores token by token: slower, same values).
    #[arg(long, value_enum, default_value = "auto")]
    path: PathChoice,
    /// Save this run's log-probabilities of every scored token to FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "kl_divergence")]
    kl_divergence_base: Option<PathBuf>,
    /// Score this run against the base FILE (its tokens and -c; -f is not needed).
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    kl_divergence: Option<PathBuf>,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

/// Everything one chunk goes to: the estimate, the base file or comparison,
/// the running output on stderr.
struct Scoring {
    ppl: Perplexity,
    base: Option<BaseWriter>,
    compare: Option<Comparison>,
    bar: Option<indicatif::ProgressBar>,
}

impl ChunkSink for Scoring {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), ExecutionError> {
        self.ppl.chunk(chunk)?;
        if let Some(b) = &mut self.base {
            b.chunk(chunk)?;
        }
        if let Some(c) = &mut self.compare {
            c.chunk(chunk)?;
        }
        let estimate = self.ppl.value();
        match &self.bar {
            Some(bar) => {
                bar.set_message(format!("PPL {estimate:.4}"));
                bar.inc(1);
            }
            None => {
                eprint!("[{}]{estimate:.4},", chunk.index + 1);
                let _ = std::io::stderr().flush();
            }
        }
        Ok(())
    }
}

fn print_kld(out: &mut dyn Write, k: &KldReport) -> std::io::Result<()> {
    writeln!(out, "Tokens compared             : {}", k.tokens)?;
    writeln!(out, "Mean PPL(Q)                 : {:.6}", k.perplexity)?;
    writeln!(
        out,
        "Mean PPL(base)              : {:.6}",
        k.perplexity_base
    )?;
    writeln!(
        out,
        "Mean PPL(Q)-PPL(base)       : {:.6}",
        k.delta_perplexity
    )?;
    writeln!(
        out,
        "Mean ln(PPL(Q)/PPL(base))   : {:.6}",
        k.mean_ln_ppl_ratio
    )?;
    writeln!(out, "Mean    KLD: {:.6} ± {:.6}", k.mean_kld, k.kld_stderr)?;
    writeln!(out, "Maximum KLD: {:.6}", k.max_kld)?;
    writeln!(out, "99.0%   KLD: {:.6}", k.p99_kld)?;
    writeln!(out, "Median  KLD: {:.6}", k.median_kld)?;
    writeln!(
        out,
        "Same top p: {:.3} ± {:.3} %",
        100.0 * k.same_top,
        100.0 * k.same_top_stderr
    )
}

/// Runs `cyb-llm perplexity`.
pub fn run(a: PerplexityArgs) -> CmdResult {
    let file = a.verify.resolve(&a.model)?;
    let text = match &a.file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| format!("{}: cannot read the text: {e}", f.display()))?,
        ),
        None => None,
    };
    let comparison = a
        .kl_divergence
        .as_deref()
        .map(Comparison::open)
        .transpose()?;
    let mut opts = LoadOptions {
        backend: BackendChoice::parse(&a.backend)?,
        path: a.path.into(),
        ctx_size: comparison
            .as_ref()
            .map_or(a.ctx_size as usize, |c| c.options().ctx),
        ..LoadOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t as usize;
    }
    let model = TextModel::load(file, &opts)?;
    if let Some(c) = &comparison {
        c.check_vocab(model.vocab())?;
    }
    let (tokens, mut eval) = match (&comparison, &text) {
        (Some(c), _) => (c.tokens().to_vec(), c.options()),
        (None, Some(t)) => (
            tokenize(&model, t)?,
            Options {
                ctx: a.ctx_size as usize,
                batch: 0,
                chunks: a.chunks.map(|c| c as usize),
            },
        ),
        (None, None) => return Err("no text: give -f FILE (or --kl-divergence FILE)".into()),
    };
    eval.batch = a.batch_size.map_or(eval.ctx, |b| b as usize);
    let chunks = eval.plan(&model, tokens.len())?;
    let base = a
        .kl_divergence_base
        .as_deref()
        .map(|p| BaseWriter::create(p, model.vocab(), &eval, chunks, &tokens))
        .transpose()?;
    let mut scoring = Scoring {
        ppl: Perplexity::default(),
        base,
        compare: comparison,
        bar: super::terminal_progress(chunks, "{bar:40} {pos}/{len} chunks  {msg}  eta {eta}"),
    };
    let mut generator = model.generator()?;
    let start = Instant::now();
    evaluate(&mut generator, &tokens, &eval, &mut scoring)?;
    let seconds = start.elapsed().as_secs_f64();
    match &scoring.bar {
        Some(bar) => bar.finish_and_clear(),
        None => eprintln!(),
    }
    if let Some(b) = scoring.base.take() {
        b.finish()?;
    }
    let ppl = &scoring.ppl;
    let kld = scoring.compare.as_ref().map(Comparison::report);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.json {
        let mut doc = json!({
            "model": a.model.display().to_string(),
            "perplexity": ppl.value(),
            "stderr": ppl.stderr(),
            "chunks": chunks,
            "ctx": eval.ctx,
            "tokens": ppl.count(),
            "seconds": seconds,
            "tokens_per_second": (chunks * eval.ctx) as f64 / seconds.max(1e-9),
            "per_chunk": ppl.per_chunk,
            "ops": generator.dispatch_log().counts(),
        });
        if let Some(k) = &kld {
            doc["kl_divergence"] = serde_json::to_value(k)?;
        }
        writeln!(out, "{doc}")?;
    } else {
        writeln!(
            out,
            "Final estimate: PPL = {:.4} +/- {:.5}",
            ppl.value(),
            ppl.stderr()
        )?;
        if let Some(k) = &kld {
            print_kld(&mut out, k)?;
        }
        eprintln!(
            "perplexity: {chunks} chunks of {} tokens in {seconds:.2} s ({:.1} tok/s)",
            eval.ctx,
            (chunks * eval.ctx) as f64 / seconds.max(1e-9)
        );
    }
    Ok(ExitCode::SUCCESS)
}
