//! `cyb-llm import SOURCE [-o OUT] [--quant ...] [--name NAME]`.

use super::CmdResult;
use cyb_llm::import::{self, ImportOptions, QuantChoice};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// A .gguf file (first part of a split file) or a Hugging Face model folder.
    source: PathBuf,
    /// Output .model path (default: SOURCE's name with .model, in the current folder).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Weight encoding: keep | f16 | q8_0 | q4_0 | q4_k | q6_k.
    #[arg(long, default_value = "keep", value_parser = parse_quant)]
    quant: QuantChoice,
    /// Model name written into the file (default: the source's name).
    #[arg(long)]
    name: Option<String>,
    /// Do not write a `graph` section (graph path and `--backend nox` then unavailable).
    #[arg(long)]
    no_graph: bool,
}

fn parse_quant(s: &str) -> Result<QuantChoice, String> {
    QuantChoice::parse(s)
        .ok_or_else(|| format!("unknown --quant `{s}` (keep|f16|q8_0|q4_0|q4_k|q6_k)"))
}

pub fn run(a: ImportArgs) -> CmdResult {
    let out = a
        .output
        .unwrap_or_else(|| import::default_output(&a.source));
    let opts = ImportOptions {
        quant: a.quant,
        name: a.name,
        no_graph: a.no_graph,
    };
    let started = std::time::Instant::now();
    import::import(&a.source, &out, &opts)?;
    eprintln!(
        "imported {} -> {} in {:.1} s",
        a.source.display(),
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
