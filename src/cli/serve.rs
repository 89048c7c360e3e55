//! `cyb-llm serve MODEL... [--host H] [--port P] [-t N] [--parallel N] [-c CTX]
//! [--api-key KEY] [--alias NAME=FILE]`: an OpenAI-compatible HTTP server for
//! every model given (text, embeddings, speech); exits 0 on SIGTERM / SIGINT.

use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::{BackendChoice, BackendConfig};
use cyb_llm::serve::{Limits, LoadSettings, ModelFile, ServeOptions};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `cyb-llm serve` arguments.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Models to serve: .model files (or GGUF / Hugging Face / CTranslate2 sources, imported once into the cache). Id = the file stem.
    models: Vec<PathBuf>,
    #[command(flatten)]
    verify: VerifyArg,
    /// Serve FILE under the id NAME (repeatable; FILE may also be listed as a model).
    #[arg(long = "alias", value_name = "NAME=FILE", value_parser = parse_alias)]
    aliases: Vec<(String, PathBuf)>,
    /// Address to bind. The default accepts local connections only.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port (0 picks a free one, printed at start).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Worker threads of each model (default: physical cores).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Conversations generated at once per text model, each with its own KV cache.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
    parallel: u64,
    /// Requests that may wait for a slot per text model; more get 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Context size of each conversation, in tokens (capped by the model's maximum).
    #[arg(short = 'c', long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    ctx_size: u64,
    /// Backend: auto, or a registered name (cpu, wgpu, ...).
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Require `Authorization: Bearer KEY` on every route but /health (default: $CYB_LLM_API_KEY, else none).
    #[arg(long, env = "CYB_LLM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Largest JSON request body, bytes.
    #[arg(long, default_value_t = 16 << 20)]
    max_body_bytes: usize,
    /// Largest audio upload (the whole form), bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_audio_bytes: usize,
    /// Seconds requests in flight may run on after SIGTERM / SIGINT.
    #[arg(long, default_value_t = 10.0)]
    grace: f64,
}

fn parse_alias(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!("`{s}` is not NAME=FILE")),
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The served files and their ids: positional files by stem, aliases by name.
fn model_files(a: &ServeArgs) -> Result<Vec<ModelFile>, Box<dyn std::error::Error>> {
    let mut named: Vec<(String, PathBuf)> = Vec::new();
    for m in &a.models {
        match a.aliases.iter().find(|(_, f)| f == m) {
            Some((name, _)) => named.push((name.clone(), m.clone())),
            None => named.push((stem(m), m.clone())),
        }
    }
    for (name, f) in &a.aliases {
        if !a.models.contains(f) {
            named.push((name.clone(), f.clone()));
        }
    }
    if named.is_empty() {
        return Err("no models to serve: give one or more .model files".into());
    }
    let mut files: Vec<ModelFile> = Vec::with_capacity(named.len());
    for (id, source) in named {
        if let Some(other) = files.iter().find(|f| f.id == id) {
            return Err(format!(
                "two models would have the id `{id}` ({} and {}); name one with --alias NAME=FILE",
                other.path.display(),
                source.display()
            )
            .into());
        }
        files.push(ModelFile {
            id,
            path: a.verify.resolve(&source)?,
        });
    }
    Ok(files)
}

/// Runs `cyb-llm serve`.
pub fn run(a: ServeArgs) -> CmdResult {
    if !(a.grace.is_finite() && a.grace >= 0.0) {
        return Err(format!("--grace {}: must be a number of seconds >= 0", a.grace).into());
    }
    let opts = ServeOptions {
        addr: SocketAddr::new(a.host, a.port),
        models: model_files(&a)?,
        load: LoadSettings {
            backend: BackendChoice::parse(&a.backend)?,
            threads: a
                .threads
                .map_or(BackendConfig::default().threads, |t| t as usize),
            ctx_size: a.ctx_size as usize,
            parallel: a.parallel as usize,
            queue: a.queue,
        },
        api_key: a.api_key.clone().filter(|k| !k.is_empty()),
        limits: Limits {
            max_body_bytes: a.max_body_bytes,
            max_audio_bytes: a.max_audio_bytes,
        },
        grace: Duration::from_secs_f64(a.grace),
    };
    let n = opts.models.len();
    cyb_llm::serve::run(opts, |addr| {
        eprintln!("serve: listening on http://{addr} (loading {n} models)");
    })?;
    Ok(ExitCode::SUCCESS)
}
