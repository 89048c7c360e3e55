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
    #[command(flatten)]
    diffusion: DiffusionFlags,
}

/// `[diffusion]` keys of an ONNX denoiser; any of them makes the import a
/// diffusion model (`cyb-llm diffuse`). Flags override `--config`.
#[derive(clap::Args, Debug, Default)]
struct DiffusionFlags {
    /// A TOML file of `[diffusion]` keys (a `[diffusion]` table or top-level keys).
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Sampler: consistency | euler | ddim.
    #[arg(long)]
    sampler: Option<String>,
    /// What the network predicts: sample | epsilon | v.
    #[arg(long)]
    prediction: Option<String>,
    /// How the noise level is fed: sigma | timestep.
    #[arg(long)]
    noise_level: Option<String>,
    /// Smallest noise level.
    #[arg(long)]
    sigma_min: Option<f64>,
    /// Largest noise level (where sampling starts).
    #[arg(long)]
    sigma_max: Option<f64>,
    /// Data standard deviation (EDM scaling).
    #[arg(long)]
    sigma_data: Option<f64>,
    /// Karras schedule exponent (default 7).
    #[arg(long)]
    rho: Option<f64>,
    /// Default denoiser calls per sample.
    #[arg(long)]
    steps: Option<usize>,
    /// The graph input holding the noisy sample (default: the 4-D input).
    #[arg(long)]
    sample_input: Option<String>,
    /// The graph input holding the noise level (default: found by name).
    #[arg(long)]
    noise_input: Option<String>,
    /// The graph input holding the class condition (default: the other 1-D input).
    #[arg(long)]
    condition_input: Option<String>,
    /// Class labels the condition takes, `MIN..MAX` (inclusive).
    #[arg(long, value_name = "MIN..MAX")]
    labels: Option<String>,
    /// How a label becomes the condition value: unit ((L-MIN)/(MAX-MIN)) | value.
    #[arg(long)]
    label_encoding: Option<String>,
}

impl DiffusionFlags {
    /// The `[diffusion]` keys given, or `None` when no flag and no file is.
    fn keys(&self) -> Result<Option<toml::Table>, String> {
        let mut keys = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--config {}: {e}", path.display()))?;
                let mut table: toml::Table = text
                    .parse()
                    .map_err(|e| format!("--config {}: {e}", path.display()))?;
                match table.remove("diffusion") {
                    Some(toml::Value::Table(t)) => t,
                    Some(_) => {
                        return Err(format!(
                            "--config {}: `diffusion` must be a table",
                            path.display()
                        ))
                    }
                    None => table,
                }
            }
            None => toml::Table::new(),
        };
        let mut put = |k: &str, v: Option<toml::Value>| {
            if let Some(v) = v {
                keys.insert(k.into(), v);
            }
        };
        let s = |v: &Option<String>| v.clone().map(toml::Value::String);
        let f = |v: Option<f64>| v.map(toml::Value::Float);
        put("sampler", s(&self.sampler));
        put("prediction", s(&self.prediction));
        put("noise_level", s(&self.noise_level));
        put("sigma_min", f(self.sigma_min));
        put("sigma_max", f(self.sigma_max));
        put("sigma_data", f(self.sigma_data));
        put("rho", f(self.rho));
        put("steps", self.steps.map(|n| toml::Value::Integer(n as i64)));
        put("sample_input", s(&self.sample_input));
        put("noise_input", s(&self.noise_input));
        put("condition_input", s(&self.condition_input));
        put("label_encoding", s(&self.label_encoding));
        if let Some(spec) = &self.labels {
            let range = spec
                .split_once("..")
                .and_then(|(a, b)| {
                    Some((a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?))
                })
                .ok_or_else(|| format!("--labels `{spec}`: write it as MIN..MAX, e.g. 1..100"))?;
            put("label_min", Some(toml::Value::Integer(range.0)));
            put("label_max", Some(toml::Value::Integer(range.1)));
        }
        Ok((!keys.is_empty() || self.config.is_some()).then_some(keys))
    }
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
        diffusion: a.diffusion.keys()?,
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
