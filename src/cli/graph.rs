//! `cyb-llm graph MODEL [--emit [-o OUT]] [--compare ...]`: the graph section
//! of a model, generated from its config by the family's graph writer; or a
//! side-by-side greedy decode of the graph path and the curated family.

use super::CmdResult;
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext};
use cyb_llm::curated::llama::{Llama, LogitRows};
use cyb_llm::graph::{GraphModel, GraphOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// The .model file.
    model: PathBuf,
    /// Write the graph section into the file (add or replace; temp file + rename).
    #[arg(long)]
    emit: bool,
    /// With --emit: write to this file instead of replacing MODEL.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Greedy-decode on the graph path (and on the curated family when the
    /// model has one) and print tokens/s, token agreement and the trace hash.
    #[arg(long)]
    compare: bool,
    /// --compare: prompt text.
    #[arg(short, long, default_value = "The capital of France is")]
    prompt: String,
    /// --compare: tokens to decode.
    #[arg(short = 'n', long, default_value_t = 64)]
    max_tokens: usize,
    /// --compare: backend of the graph path (the curated path runs on cpu).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// --compare: worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// --compare: skip the fusion pass.
    #[arg(long)]
    no_fuse: bool,
    /// --compare: print the execution-trace hash of the graph run.
    #[arg(long)]
    trace: bool,
    /// --compare: decode runs per path, alternating graph and curated; the
    /// fastest run of each is reported (robust on a loaded machine).
    #[arg(short = 'r', long, default_value_t = 1)]
    repeat: usize,
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// Decode rate of a run: tokens, and seconds spent on the single-token steps.
struct Decode {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
    secs: f64,
}

impl Decode {
    fn tok_s(&self) -> f64 {
        self.tokens.len().saturating_sub(1) as f64 / self.secs.max(1e-9)
    }
}

fn greedy(
    n: usize,
    ids: &[u32],
    mut step: impl FnMut(&[u32]) -> Result<Vec<f32>, cyb_llm::ExecutionError>,
) -> Result<Decode, cyb_llm::ExecutionError> {
    let mut l = step(ids)?;
    let mut d = Decode {
        tokens: Vec::new(),
        logits: Vec::new(),
        secs: 0.0,
    };
    for i in 0..n {
        let t = argmax(&l);
        d.tokens.push(t);
        d.logits.push(l);
        if i + 1 == n {
            break;
        }
        let start = Instant::now();
        l = step(&[t])?;
        d.secs += start.elapsed().as_secs_f64();
    }
    Ok(d)
}

fn compare(a: &GraphArgs, model: cyb_llm::Model) -> CmdResult {
    let model = Arc::new(model);
    let threads = a
        .threads
        .unwrap_or_else(|| BackendConfig::default().threads);
    let tok = cyb_llm::tokenizer::Tokenizer::from_model(&model)?;
    let ids = tok.encode(&a.prompt, true)?;
    let ctx_size = ids.len() + a.max_tokens + 1;
    let opts = GraphOptions {
        fuse: !a.no_fuse,
        ctx_size,
        trace: a.trace,
        ..Default::default()
    };
    let gm = Arc::new(GraphModel::with_backend(
        model.clone(),
        BackendChoice::parse(&a.backend)?,
        threads,
        opts,
    )?);
    let d = Dispatcher::new(
        BackendChoice::Named("cpu".into()),
        &BackendConfig { threads },
    )?;
    let llama = match model.family {
        Some(_) => Some(Llama::new(model.clone(), ctx_size)?),
        None => None,
    };
    let (mut graph, mut curated): (Option<Decode>, Option<Decode>) = (None, None);
    let fastest = |best: &mut Option<Decode>, run: Decode| {
        if best.as_ref().is_none_or(|b| run.secs < b.secs) {
            *best = Some(run);
        }
    };
    for _ in 0..a.repeat.max(1) {
        let mut session = gm.session()?;
        fastest(
            &mut graph,
            greedy(a.max_tokens, &ids, |t| session.forward(t))?,
        );
        if let Some((hash, nodes)) = session.trace() {
            println!("trace   {hash} ({nodes} nodes)");
        }
        eprintln!("{}", session.context().log.summary());
        if let Some(llama) = &llama {
            let mut cache = llama.new_cache(&d)?;
            let mut ctx = ExecContext::new(threads);
            let run = greedy(a.max_tokens, &ids, |t| {
                let l = llama.forward(&d, &mut ctx, &mut cache, t, LogitRows::Last)?;
                d.primary().try_download_f32(&l)
            })?;
            fastest(&mut curated, run);
        }
    }
    let graph = graph.ok_or("no graph run")?;
    println!(
        "graph   ({}, {} nodes, {} fused, {threads} threads): decode {:.2} tok/s",
        a.backend,
        gm.graph().nodes.len(),
        gm.fused_count(),
        graph.tok_s()
    );
    if let Some(curated) = curated {
        let same = curated
            .tokens
            .iter()
            .zip(&graph.tokens)
            .take_while(|(x, y)| x == y)
            .count();
        let mut err = 0.0f32;
        for (g, c) in graph.logits.iter().zip(&curated.logits).take(same + 1) {
            let scale = c.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
            let diff = g
                .iter()
                .zip(c)
                .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            err = err.max(diff / scale);
        }
        println!(
            "curated (cpu, {threads} threads): decode {:.2} tok/s; graph/curated time ratio {:.3}",
            curated.tok_s(),
            curated.tok_s() / graph.tok_s().max(1e-9)
        );
        println!(
            "tokens identical for {same} of {}; max relative logit error over them {err:.2e}",
            a.max_tokens
        );
    }
    println!("text: {}", tok.decode(&graph.tokens, true));
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: GraphArgs) -> CmdResult {
    let model = cyb_llm::load(&a.model)?;
    if a.compare {
        return compare(&a, model);
    }
    if a.emit {
        let out = a.output.clone().unwrap_or_else(|| a.model.clone());
        cyb_llm::graph::emit_graph(&model, &out)?;
        drop(model);
        let back = cyb_llm::load(&out)?;
        let nodes = back.graph.as_ref().map_or(0, |g| g.nodes.len());
        eprintln!(
            "wrote a graph section of {nodes} nodes to {}",
            out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let has = |n: &str| model.tensors.contains(n);
    match cyb_llm::graph::graph_for(&model.config, &has) {
        Some(doc) => print!("{}", doc?.to_toml()),
        None => {
            return Err(format!(
                "no graph writer for model_type '{}'",
                model.config.model_type
            )
            .into())
        }
    }
    Ok(ExitCode::SUCCESS)
}
