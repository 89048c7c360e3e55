//! `cyb-llm diffuse MODEL [--label L,...] [-n N] [--batch B] [--seed S]
//! [--noise FILE.npy] [--steps N] -o DIR [--raw FILE.npy]`: samples of a
//! diffusion model, one PNG each in DIR, and all of them in model space as
//! one `.npy` with `--raw`.

use super::npy::{read_f32, write_f32};
use super::source::VerifyArg;
use super::{terminal_progress, writable_dir, CmdResult};
use cyb_llm::backend::{BackendChoice, BackendConfig};
use cyb_llm::diffusion::{image, DiffusionModel, DiffusionOptions, DiffusionRequest, NoiseInput};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DiffuseArgs {
    /// The .model file (a denoiser imported with `cyb-llm import MODEL.onnx --sampler ...`).
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    /// Class label(s): one for every sample, or one per sample (default: random, from the seed).
    #[arg(long = "label", value_delimiter = ',', allow_hyphen_values = true)]
    labels: Vec<i64>,
    /// Number of samples.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    count: usize,
    /// Samples per graph run.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Seed of the noise and of random labels (default: random, printed on stderr).
    #[arg(long)]
    seed: Option<u64>,
    /// Unit Gaussian noise to start from (f32 .npy, [N,C,H,W], or [D,N,C,H,W] for every draw).
    #[arg(long, value_name = "FILE.npy")]
    noise: Option<PathBuf>,
    /// Denoiser calls per sample (default: the model's).
    #[arg(long)]
    steps: Option<usize>,
    /// Folder the PNG files are written to (made when missing).
    #[arg(short, long = "output-dir", value_name = "DIR")]
    output_dir: PathBuf,
    /// Also write every sample in model space as one f32 .npy, [N,C,H,W].
    #[arg(long, value_name = "FILE.npy")]
    raw: Option<PathBuf>,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Backend: auto, cpu, reference, wgpu, nox, ...
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Skip the fusion pass.
    #[arg(long)]
    no_fuse: bool,
    /// Print load and sampling times on stderr.
    #[arg(long)]
    timings: bool,
    /// Print one JSON object (samples, files, labels, times) on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(a: DiffuseArgs) -> CmdResult {
    let file = a.verify.resolve(&a.model)?;
    writable_dir("-o", &a.output_dir)?;
    if let Some(raw) = &a.raw {
        let parent = raw.parent().filter(|p| !p.as_os_str().is_empty());
        writable_dir("--raw", parent.unwrap_or(Path::new(".")))?;
    }
    let noise = match &a.noise {
        Some(path) => {
            let (shape, data) = read_f32("--noise", path)?;
            Some(NoiseInput { shape, data })
        }
        None => None,
    };
    let opts = DiffusionOptions {
        backend: BackendChoice::parse(&a.backend)?,
        threads: a
            .threads
            .unwrap_or_else(|| BackendConfig::default().threads),
        fuse: !a.no_fuse,
    };
    let what = a.model.display().to_string();
    let model = DiffusionModel::load(&file, &opts).map_err(|e| format!("{what}: {e}"))?;
    let seed = a.seed.unwrap_or_else(rand::random);
    if a.seed.is_none() && (a.noise.is_none() || a.labels.is_empty()) {
        eprintln!("seed: {seed}");
    }
    let request = DiffusionRequest {
        count: a.count,
        labels: a.labels.clone(),
        seed,
        noise,
        steps: a.steps,
        batch: a.batch,
    };
    let bar = terminal_progress(
        a.count.div_ceil(a.batch.max(1)) * a.steps.unwrap_or(model.config().steps),
        "{bar:40} {pos}/{len} denoiser calls {elapsed}",
    );
    let samples = model
        .diffuse_with(&request, &mut |done, _| {
            if let Some(b) = &bar {
                b.set_position(done as u64);
            }
        })
        .map_err(|e| format!("{what}: {e}"))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let dims = model.sample_dims();
    let range = model.config().value_range;
    let mut files = Vec::with_capacity(samples.shape[0]);
    for i in 0..samples.shape[0] {
        let path = a.output_dir.join(format!("sample_{i:04}.png"));
        let out = std::fs::File::create(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        image::encode_png(samples.sample(i), dims, range, std::io::BufWriter::new(out))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        files.push(path);
    }
    if let Some(raw) = &a.raw {
        write_f32(raw, &samples.shape, &samples.data)
            .map_err(|e| format!("cannot write {}: {e}", raw.display()))?;
    }
    let per_s = samples.shape[0] as f64 / (samples.run_ms / 1e3);
    if a.json {
        let items: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                serde_json::json!({
                    "index": i,
                    "label": samples.labels.get(i),
                    "file": f.display().to_string(),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "samples": items,
                "shape": samples.shape,
                "seed": seed,
                "sampler": model.config().sampler.name(),
                "sigmas": samples.sigmas,
                "raw": a.raw.as_ref().map(|p| p.display().to_string()),
                "load_ms": model.load_ms(),
                "run_ms": samples.run_ms,
                "batch_ms": samples.batch_ms,
                "images_per_s": per_s,
                "backend": model.graph_model().dispatcher().primary().name(),
            })
        );
    } else {
        for (i, f) in files.iter().enumerate() {
            match samples.labels.get(i) {
                Some(l) => println!("{} (label {l})", f.display()),
                None => println!("{}", f.display()),
            }
        }
    }
    if a.timings {
        eprintln!(
            "timings: load {:.1} ms, sampling {:.1} ms ({per_s:.2} images/s), {} steps x {} batches on {}",
            model.load_ms(),
            samples.run_ms,
            samples.sigmas.len(),
            samples.shape[0].div_ceil(a.batch.max(1)),
            model.graph_model().dispatcher().primary().name()
        );
    }
    Ok(ExitCode::SUCCESS)
}
