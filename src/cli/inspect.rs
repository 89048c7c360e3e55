//! `cyb-llm inspect MODEL [--tensors] [--hash] [--json]`.

use super::CmdResult;
use cyb_llm::loader::{ExecPath, Model};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    model: PathBuf,
    /// List every tensor (name, encoding, shape, bytes).
    #[arg(long)]
    tensors: bool,
    /// Print the SHA-256 of the whole file (the model's identity).
    #[arg(long)]
    hash: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

fn path_name(m: &Model) -> String {
    match m.exec_path {
        ExecPath::Curated(f) => format!("curated ({})", f.name()),
        ExecPath::Graph => "graph".into(),
    }
}

/// The summary `inspect` prints, as JSON.
fn summary(m: &Model, with_tensors: bool, with_hash: bool) -> serde_json::Value {
    let mut by_encoding: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut params = 0u64;
    for t in m.tensors.entries() {
        let slot = by_encoding.entry(t.dtype.name()).or_default();
        slot.0 += 1;
        slot.1 += t.size;
        params += t.elements() as u64;
    }
    let sections: Vec<_> = m
        .sections
        .iter()
        .map(|s| json!({"name": s.name, "bytes": s.body.len(), "digest": m.digest(&s.name)}))
        .collect();
    let mut v = json!({
        "file": m.path().display().to_string(),
        "name": m.name,
        "model_type": m.config.model_type,
        "family": m.family.map(|f| f.name()),
        "path": path_name(m),
        "sections": sections,
        "architecture": serde_json::to_value(&m.config.architecture).unwrap_or_default(),
        "tokenizer": serde_json::to_value(&m.config.tokenizer).unwrap_or_default(),
        "vocab_tokens": m.vocab.as_ref().map(|v| v.tokens.len()),
        "tensor_count": m.tensors.len(),
        "parameters": params,
        "encodings": by_encoding.iter().map(|(k, (n, b))| (k.to_string(), json!({"tensors": n, "bytes": b}))).collect::<serde_json::Map<_, _>>(),
    });
    if let Some(g) = &m.graph {
        let io = |ids: &[usize]| -> Vec<serde_json::Value> {
            ids.iter()
                .map(|&i| {
                    let val = &g.values[i];
                    json!({"name": val.name, "dtype": val.dtype.name(), "shape": cyb_llm::ir::dims_text(&val.shape)})
                })
                .collect()
        };
        v["graph"] = json!({
            "nodes": g.nodes.len(),
            "inputs": io(&g.inputs),
            "outputs": io(&g.outputs),
        });
    }
    if with_tensors {
        v["tensors"] = m
            .tensors
            .entries()
            .iter()
            .map(|t| json!({"name": t.name, "encoding": t.dtype.name(), "shape": t.shape, "offset": t.offset, "bytes": t.size}))
            .collect();
    }
    if with_hash {
        v["sha256"] = json!(m.sha256_hex());
    }
    v
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

pub fn run(a: InspectArgs) -> CmdResult {
    let m = cyb_llm::load(&a.model)?;
    let s = summary(&m, a.tensors, a.hash);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("file        {}", a.model.display());
    println!("name        {}", m.name);
    println!("model_type  {}", m.config.model_type);
    println!("path        {}", path_name(&m));
    let sections: Vec<String> = m
        .sections
        .iter()
        .map(|s| format!("{} ({})", s.name, human_bytes(s.body.len() as u64)))
        .collect();
    println!("sections    {}", sections.join(", "));
    for s in &m.sections {
        println!(
            "  {:<9} {}",
            s.name,
            m.digest(&s.name)
                .unwrap_or("no digest (written before digests)")
        );
    }
    let arch = toml::to_string(&m.config.architecture).unwrap_or_default();
    for line in arch.lines().filter(|l| !l.is_empty()) {
        println!("  {line}");
    }
    if let Some(d) = &m.config.diffusion {
        println!(
            "diffusion   {} sampler, {} step(s); run with `cyb-llm diffuse`",
            d.sampler.name(),
            d.steps
        );
        let keys = toml::to_string(d).unwrap_or_default();
        for line in keys.lines().filter(|l| !l.is_empty()) {
            println!("  {line}");
        }
    }
    if let Some(t) = &m.config.tts {
        println!(
            "tts         Piper voice: {} Hz, {} phonemes{}, {} symbols, {} speaker(s), noise {} length {} noise_w {}; run with `cyb-llm speak`",
            t.sample_rate,
            t.phoneme_type,
            if t.espeak_voice.is_empty() {
                String::new()
            } else {
                format!(" (espeak-ng `{}`)", t.espeak_voice)
            },
            t.phoneme_id_map.len(),
            t.num_speakers,
            t.noise_scale,
            t.length_scale,
            t.noise_w
        );
    }
    if let (Some(t), Some(v)) = (&m.config.tokenizer, &m.vocab) {
        println!(
            "tokenizer   {} (pre {}), {} tokens, {} merges",
            t.kind,
            t.pre.as_deref().unwrap_or("-"),
            v.tokens.len(),
            v.merges.len()
        );
    }
    if let Some(g) = s["graph"].as_object() {
        println!(
            "graph       {} nodes (-1: a size given at run time)",
            g["nodes"]
        );
        for (kind, key) in [("input ", "inputs"), ("output", "outputs")] {
            for v in g[key].as_array().into_iter().flatten() {
                println!(
                    "  {kind}  {} {} {}",
                    v["name"].as_str().unwrap_or_default(),
                    v["dtype"].as_str().unwrap_or_default(),
                    v["shape"]
                );
            }
        }
    }
    println!(
        "tensors     {} ({} parameters)",
        m.tensors.len(),
        s["parameters"]
    );
    if let Some(enc) = s["encodings"].as_object() {
        for (k, v) in enc {
            println!(
                "  {k:<8} {:>5} tensors  {}",
                v["tensors"],
                human_bytes(v["bytes"].as_u64().unwrap_or(0))
            );
        }
    }
    if a.tensors {
        println!(
            "{:<56} {:<8} {:>24} {:>12}",
            "name", "encoding", "shape", "bytes"
        );
        for t in m.tensors.entries() {
            println!(
                "{:<56} {:<8} {:>24} {:>12}",
                t.name,
                t.dtype.name(),
                format!("{:?}", t.shape),
                t.size
            );
        }
    }
    if a.hash {
        println!("sha256      {}", s["sha256"].as_str().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}
