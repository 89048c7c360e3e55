//! Subcommands of the binary. Each file is one command; this one parses and routes.

mod backends;
mod bench;
mod chat;
mod classify;
mod diffuse;
mod embed;
mod eval;
mod gemm;
mod graph;
mod import;
mod inspect;
mod npy;
mod perplexity;
mod run;
mod serve;
mod shard;
mod source;
mod speak;
mod transcribe;
mod vad;
mod validate;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Result of a command: an exit code, or an error printed as one line plus causes.
pub type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// cyb-llm: run self-contained .model files.
#[derive(Parser, Debug)]
#[command(name = "cyb-llm", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate text from a prompt (text models; chat template applied unless --no-chat).
    Run(run::RunArgs),
    /// Interactive multi-turn chat on one KV cache (/reset, /exit).
    Chat(chat::ChatArgs),
    /// Write a .model file from a GGUF file or a Hugging Face folder.
    Import(import::ImportArgs),
    /// Show sections, config, family, tensors and identity of a .model file.
    Inspect(inspect::InspectArgs),
    /// Load a .model file and check it; --deep decodes every tensor.
    Validate(validate::ValidateArgs),
    /// Speech to text for many audio files (WhisperStyle models).
    Transcribe(transcribe::TranscribeArgs),
    /// Sentence embeddings of texts (one per line; --text, --file or stdin).
    Embed(embed::EmbedArgs),
    /// Labels and scores of a sequence classifier (one text per line).
    Classify(classify::ClassifyArgs),
    /// Print a model's generated graph section, or --emit it into the file.
    Graph(graph::GraphArgs),
    /// Run any graph model (an imported ONNX model) on .npy inputs; outputs to .npy files.
    Eval(eval::EvalArgs),
    /// Generate images with a diffusion model (an imported ONNX denoiser with a sampler).
    Diffuse(diffuse::DiffuseArgs),
    /// Text to speech with a Piper voice (one WAV, one per line, or raw PCM on stdout).
    Speak(speak::SpeakArgs),
    /// Perplexity of a text model on a text (llama-perplexity's method), and KL divergence between runs.
    Perplexity(perplexity::PerplexityArgs),
    /// OpenAI-compatible HTTP server for text, embedding and speech models.
    Serve(serve::ServeArgs),
    /// Prompt and generation throughput per backend and path (like llama-bench).
    Bench(bench::BenchArgs),
    /// List the backends that can start here (wgpu: adapter, driver, limits, features).
    Backends(backends::BackendsArgs),
    /// This CPU's cache sizes and measured FMA peak, and the float GEMM at encoder shapes.
    Gemm(gemm::GemmArgs),
}

/// Makes `dir` and proves a file can be created there, before any work whose
/// result would go there; the error names `flag` and the folder.
pub fn writable_dir(flag: &str, dir: &std::path::Path) -> Result<(), String> {
    let fail = |e: std::io::Error| {
        format!(
            "{flag} {}: cannot write there ({e}); choose a folder you can write to",
            dir.display()
        )
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    tempfile::NamedTempFile::new_in(dir).map(drop).map_err(fail)
}

/// A progress bar on stderr for `total` steps in the indicatif `template`,
/// drawn only when stderr is a terminal; `None` otherwise.
pub fn terminal_progress(total: usize, template: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    Some(bar)
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> CmdResult {
    match cli.command {
        Command::Run(a) => run::run(a),
        Command::Chat(a) => chat::run(a),
        Command::Import(a) => import::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Validate(a) => validate::run(a),
        Command::Transcribe(a) => transcribe::run(a),
        Command::Embed(a) => embed::run(a),
        Command::Classify(a) => classify::run(a),
        Command::Graph(a) => graph::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Diffuse(a) => diffuse::run(a),
        Command::Speak(a) => speak::run(a),
        Command::Backends(a) => backends::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Gemm(a) => gemm::run(a),
        Command::Perplexity(a) => perplexity::run(a),
        Command::Serve(a) => serve::run(a),
    }
}
