//! `cyb-llm eval MODEL --input NAME=FILE.npy ... --output-dir DIR`: the generic
//! runner of any graph model (an imported ONNX model, say). Inputs are NumPy
//! `.npy` files named by graph input; every graph output is written as
//! `DIR/<output name>.npy`.

use super::npy::{read_f32, read_i64, write_f32, write_i64};
use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::{BackendChoice, BackendConfig, Tensor};
use cyb_llm::graph::GraphOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// The .model file (or an .onnx file, imported once into the cache).
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    /// A graph input: `NAME=FILE.npy` (f32, C order), once per input.
    #[arg(short, long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Folder the outputs are written to (made when missing).
    #[arg(short, long, default_value = ".")]
    output_dir: PathBuf,
    /// Backend: auto, cpu, reference, wgpu, nox, ...
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Skip the fusion pass.
    #[arg(long)]
    no_fuse: bool,
    /// Run the graph this many times (the outputs are those of the last run;
    /// --timings reports the fastest).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Print load and run times on stderr.
    #[arg(long)]
    timings: bool,
    /// Print the time per op type of the runs on stderr (slowest first).
    #[arg(long)]
    profile: bool,
    /// Print one JSON line per output (name, shape, file) instead of text.
    #[arg(long)]
    json: bool,
    /// Print the dispatch summary (nodes per backend) and every fallback
    /// (op, input shapes and dtypes, why, how often) of the runs on stderr.
    #[arg(long)]
    dispatch: bool,
}

/// A file name for an output: characters outside `[A-Za-z0-9._-]` become `_`.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn run(a: EvalArgs) -> CmdResult {
    let file = a.verify.resolve(&a.model)?;
    let start = Instant::now();
    let model = Arc::new(cyb_llm::load(&file)?);
    let what = a.model.display().to_string();
    let mut given: Vec<(String, PathBuf)> = Vec::new();
    for spec in &a.inputs {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| format!("--input `{spec}`: write it as NAME=FILE.npy"))?;
        if given.iter().any(|(n, _)| n == name) {
            return Err(format!("--input `{name}` is given twice").into());
        }
        given.push((name.to_string(), PathBuf::from(path)));
    }
    let threads = a
        .threads
        .unwrap_or_else(|| BackendConfig::default().threads);
    let opts = GraphOptions {
        fuse: !a.no_fuse,
        ..GraphOptions::default()
    };
    let gm = cyb_llm::path::bind_graph(model, BackendChoice::parse(&a.backend)?, threads, opts)
        .map_err(|e| format!("{what}: {e}"))?;
    let graph = gm.graph();
    let names: Vec<&str> = graph.input_decls.iter().map(|d| d.name.as_str()).collect();
    if let Some((n, _)) = given.iter().find(|(n, _)| !names.contains(&n.as_str())) {
        return Err(format!(
            "{what}: the graph has no input `{n}`; its inputs: {}",
            names.join(", ")
        )
        .into());
    }
    let mut inputs = Vec::with_capacity(names.len());
    for d in &graph.input_decls {
        let (_, path) = given.iter().find(|(n, _)| *n == d.name).ok_or_else(|| {
            format!(
                "{what}: input `{}` ({} {:?}) is not given: add --input {}=FILE.npy",
                d.name, d.dtype, d.shape, d.name
            )
        })?;
        let label = format!("input `{}`", d.name);
        let tensor = match d.dtype.as_str() {
            "i64" => {
                let (shape, data) = read_i64(&label, path)?;
                Tensor::from_i64(&shape, data)?
            }
            "f32" => {
                let (shape, data) = read_f32(&label, path)?;
                Tensor::from_f32(&shape, data)?
            }
            other => {
                return Err(format!(
                    "{what}: input `{}` has dtype {other}; eval reads f32 and i64 inputs",
                    d.name
                )
                .into())
            }
        };
        let shape = tensor.shape().to_vec();
        let fits = shape.len() == d.shape.len()
            && shape
                .iter()
                .zip(&d.shape)
                .all(|(&g, &e)| e < 0 || g as i64 == e);
        if !fits {
            return Err(format!(
                "{what}: input `{}` must have shape {:?} (-1: any size), {} has {shape:?}",
                d.name,
                d.shape,
                path.display()
            )
            .into());
        }
        inputs.push(tensor);
    }
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut session = gm.session()?;
    session.set_profile(a.profile);
    let mut best = f64::INFINITY;
    let mut outputs = Vec::new();
    for _ in 0..a.repeat.max(1) {
        let t = Instant::now();
        outputs = session.run(&inputs, 0)?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    std::fs::create_dir_all(&a.output_dir)
        .map_err(|e| format!("cannot make {}: {e}", a.output_dir.display()))?;
    let backend = gm.dispatcher().primary();
    for (t, &vi) in outputs.iter().zip(&graph.outputs) {
        let name = &graph.values[vi].name;
        let path = a.output_dir.join(format!("{}.npy", file_stem(name)));
        let written = match t.as_i64() {
            Some(v) => write_i64(&path, t.shape(), v),
            None => write_f32(&path, t.shape(), &backend.try_download_f32(t)?),
        };
        written.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if a.json {
            println!(
                "{}",
                serde_json::json!({"output": name, "shape": t.shape(), "file": path.display().to_string()})
            );
        } else {
            println!("{name} {:?} -> {}", t.shape(), path.display());
        }
    }
    if a.profile {
        let runs = a.repeat.max(1) as f64;
        for (op, secs, n) in session.profile() {
            eprintln!(
                "profile: {op:<16} {:>9.2} ms per run  {:>5} nodes per run",
                secs * 1e3 / runs,
                n as f64 / runs
            );
        }
    }
    if a.dispatch {
        super::run::print_dispatch(&session.context().log);
    }
    if a.timings {
        eprintln!(
            "timings: load {load_ms:.1} ms, run {best:.3} ms (fastest of {}), {} nodes ({} fused groups) on {}",
            a.repeat.max(1),
            graph.nodes.len(),
            gm.fused_count(),
            gm.dispatcher().primary().name()
        );
    }
    Ok(ExitCode::SUCCESS)
}
