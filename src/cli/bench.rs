//! `cyb-llm bench MODEL`: prompt (ppN) and generation (tgN) throughput per
//! backend and path, in llama-bench's shape (`cyb_llm::bench`).

use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::BackendConfig;
use cyb_llm::bench::{all_backends, BenchOptions, BenchRow};
use cyb_llm::path::PathChoice;
use cyb_llm::WeightPages;
use std::path::PathBuf;
use std::process::ExitCode;

/// Output format of `bench`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A Markdown table (llama-bench's default).
    Md,
    /// An array of row objects.
    Json,
    /// A header line and one line per row.
    Csv,
}

/// Arguments of `bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The .model file (a text generator), or a GGUF file / Hugging Face folder (imported once into the cache).
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    /// Backends, comma-separated (`cpu,wgpu`), `auto`, or `all`.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Execution paths, comma-separated: `curated`, `graph`, `auto`.
    #[arg(long, default_value = "curated")]
    path: String,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Prompt tokens of the pp test (0 skips it).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Generated tokens of the tg test (0 skips it).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Tokens already in the cache when each test starts, prefilled untimed (llama-bench's
    /// `-d`): `-p 0 -n 128 -d 512` is the decode after a 512-token prompt.
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    n_depth: usize,
    /// Timed repetitions per test, after one warm-up.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Md)]
    output: Output,
    /// Same as `--output json`.
    #[arg(long)]
    json: bool,
    /// Keep the weights in the file mapping instead of copying them into transparent huge
    /// pages (as `run --no-huge-pages`).
    #[arg(long)]
    no_huge_pages: bool,
    /// tg: feed random token ids and wait for each token's logits, as llama-bench does
    /// (default: decode as `run` does, the next forward queued before the device's greedy
    /// pick is read back, where the backend picks on the device).
    #[arg(long)]
    sync_tokens: bool,
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn markdown(rows: &[BenchRow]) -> String {
    let mut out = String::from(
        "| backend | path | threads | test | t/s | GB/s | load ms |\n\
         | ------- | ---- | ------: | ---: | --: | ---: | ------: |\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} ± {:.2} | {:.2} | {:.0} |\n",
            r.backend, r.path, r.threads, r.test, r.tokens_per_s, r.stddev, r.gb_per_s, r.load_ms
        ));
    }
    out
}

fn csv(rows: &[BenchRow]) -> String {
    let mut out = String::from(
        "backend,path,test,n_prompt,n_gen,n_depth,threads,tokens_per_s,stddev,gb_per_s,load_ms\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{:.4},{:.4},{:.4},{:.3}\n",
            r.backend,
            r.path,
            r.test,
            r.n_prompt,
            r.n_gen,
            r.n_depth,
            r.threads,
            r.tokens_per_s,
            r.stddev,
            r.gb_per_s,
            r.load_ms
        ));
    }
    out
}

/// Runs `bench`.
pub fn run(a: BenchArgs) -> CmdResult {
    let backends = match a.backend.as_str() {
        "all" => all_backends(),
        s => list(s),
    };
    let mut paths = Vec::new();
    for p in list(&a.path) {
        match PathChoice::parse(&p) {
            Some(p) => paths.push(p),
            None => return Err(format!("--path: unknown path `{p}` (auto, curated, graph)").into()),
        }
    }
    if backends.is_empty() || paths.is_empty() {
        return Err("--backend and --path need at least one value each".into());
    }
    let opts = BenchOptions {
        backends,
        paths,
        threads: a
            .threads
            .unwrap_or_else(|| BackendConfig::default().threads)
            .max(1),
        n_prompt: a.n_prompt,
        n_gen: a.n_gen,
        n_depth: a.n_depth,
        reps: a.reps as usize,
        sync_tokens: a.sync_tokens,
        pages: if a.no_huge_pages {
            WeightPages::Mapped
        } else {
            WeightPages::HugePages
        },
    };
    let rows = cyb_llm::bench::run(&a.verify.resolve(&a.model)?, &opts, |why| {
        eprintln!("bench: skipped {why}")
    })?;
    if rows.is_empty() {
        return Err("bench: nothing ran (every backend/path was skipped)".into());
    }
    let output = if a.json { Output::Json } else { a.output };
    match output {
        Output::Md => print!("{}", markdown(&rows)),
        Output::Csv => print!("{}", csv(&rows)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
    }
    Ok(ExitCode::SUCCESS)
}
