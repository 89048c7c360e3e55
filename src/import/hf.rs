//! The Hugging Face folder importer: `config.json`, `*.safetensors` (sharded too),
//! `tokenizer.json`, `tokenizer_config.json`, `generation_config.json` and, for
//! sentence-transformers models, `modules.json` + the pooling config.
//!
//! - `config` maps `config.json` to the `config` section per model_type
//!   (llama, mistral, qwen2, qwen3, gemma3 / gemma3_text, bert);
//! - `weights` maps the safetensors files (zero-copy for f32 / f16) and
//!   turns source tensor names into canonical ones, splitting fused `qkv_proj` /
//!   `gate_up_proj` and storing Gemma norm gains as `1 + w` (families.md);
//! - `tokenizer` turns `tokenizer.json` into the `vocab` section and
//!   `[tokenizer]`, reads the chat template and generation defaults.

mod config;
mod json;
mod tokenizer;
mod weights;

use super::{requant, ImportOptions};
use crate::error::ImportError;
use crate::loader::config::Config;
use crate::loader::writer::{ModelWriter, PendingTensor};
use json::Json;
use std::path::Path;

/// Imports the Hugging Face folder `source` into the `.model` file `out`.
pub fn import(source: &Path, out: &Path, opts: &ImportOptions) -> Result<(), ImportError> {
    let cfg_path = source.join("config.json");
    let cfg = Json::read(&cfg_path)?;
    let arch = config::map(source, &cfg)?;
    let shards = weights::Shards::open(source)?;
    let tensors = shards.tensors()?;
    let plan = weights::plan(&tensors, &arch)?;
    weights::check_counts(&plan, &arch, &cfg_path)?;

    let tok = tokenizer::read(source, &cfg, arch.vocab_size)?;
    let mut architecture = arch.architecture;
    if arch.family == config::Kind::Llama {
        architecture.tie_word_embeddings = Some(plan.tied);
    }

    let name = opts.name.clone().unwrap_or_else(|| folder_name(source));
    let mut writer = ModelWriter::new(name.clone());
    let mut parameters = 0u64;
    for t in plan.tensors {
        parameters += t.shape.iter().product::<usize>() as u64;
        let (dtype, data) = requant::apply(t.file, &t.name, &t.shape, t.dtype, t.data, opts.quant)?;
        writer.add_tensor(PendingTensor {
            name: t.name,
            shape: t.shape,
            dtype,
            scale: None,
            data,
        })?;
    }
    let config = Config {
        model_type: arch.model_type.clone(),
        parameters: Some(parameters),
        license: readme_license(source),
        architecture,
        tokenizer: Some(tok.config),
        sampling: tokenizer::sampling(source)?,
        ..Default::default()
    };
    writer.set_config(&config)?;
    writer.set_section("vocab", tok.vocab.to_toml());
    if let Some(chat) = tokenizer::chat(source)? {
        let body = toml::to_string(&chat).map_err(|e| ImportError::Format {
            path: source.to_path_buf(),
            reason: format!("cannot serialize the chat section: {e}"),
        })?;
        writer.set_section("chat", body);
    }
    writer.set_section(
        "card",
        format!(
            "# {name}\n\nImported by cyb-llm from a Hugging Face folder (model_type `{}`).\n",
            arch.source_model_type
        ),
    );
    if !opts.no_graph {
        crate::graph::write_graph_section(&mut writer, &config);
    }
    writer.write(out)
}

/// The folder's own name (`.` resolved), for the default `[cyb] name`.
fn folder_name(source: &Path) -> String {
    std::fs::canonicalize(source)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".into())
}

/// `license:` of the model card's YAML front matter (README.md), if any.
fn readme_license(source: &Path) -> Option<String> {
    let text = std::fs::read_to_string(source.join("README.md")).ok()?;
    let front = text.strip_prefix("---\n")?;
    let end = front.find("\n---")?;
    front[..end].lines().find_map(|l| {
        let v = l.strip_prefix("license:")?.trim().trim_matches(['"', '\'']);
        (!v.is_empty()).then(|| v.to_string())
    })
}
