//! `cyb-llm graph MODEL [--emit] [-o OUT]`: the graph section of a model,
//! generated from its config by the family's graph writer.

use super::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;

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
}

pub fn run(a: GraphArgs) -> CmdResult {
    let model = cyb_llm::load(&a.model)?;
    if a.emit {
        let out = a.output.clone().unwrap_or_else(|| a.model.clone());
        cyb_llm::graph::llama::emit_graph(&model, &out)?;
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
    match cyb_llm::graph::llama::graph_for(&model.config, &has) {
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
