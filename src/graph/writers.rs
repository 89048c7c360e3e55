//! The `graph` section of a model of any curated family: recorded from the
//! family's one definition ([`crate::curated::llama::llama_graph`],
//! [`crate::curated::bert::bert_graph`],
//! [`crate::curated::whisper::whisper_graph`]); added at import and by
//! `cyb-llm graph --emit`.

use crate::error::ExecutionError;
use crate::ir::GraphDoc;
use crate::loader::{Config, Family};

/// The graph of a model of any family (LlamaStyle, BertStyle, WhisperStyle);
/// `None` for a model type no family claims (its file gets no `graph` section).
pub fn graph_for(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Option<Result<GraphDoc, ExecutionError>> {
    match Family::for_model_type(&config.model_type)? {
        Family::LlamaStyle => Some(crate::curated::llama::llama_graph(config, has)),
        Family::BertStyle => Some(crate::curated::bert::bert_graph(config, has)),
        Family::WhisperStyle => Some(crate::curated::whisper::whisper_graph(config, has)),
    }
}

/// Adds the `graph` section an importer writes for `config` (families with a
/// graph writer only). A config the writer cannot express is reported as a
/// warning and the file gets no graph section: the import itself goes on.
pub fn write_graph_section(writer: &mut crate::loader::writer::ModelWriter<'_>, config: &Config) {
    let names: std::collections::HashSet<String> =
        writer.tensor_names().map(str::to_string).collect();
    let has = |n: &str| names.contains(n);
    match graph_for(config, &has) {
        Some(Ok(doc)) => writer.set_section("graph", doc.to_toml()),
        Some(Err(e)) => tracing::warn!("no graph section written: {e}"),
        None => {}
    }
}

/// `cyb-llm graph MODEL --emit`: generates the graph of `model` from its
/// config and writes the file again with that `graph` section added or
/// replaced, to `out` (temp file, validated by loading, then renamed; `out`
/// may be the model's own path).
pub fn emit_graph(
    model: &crate::loader::Model,
    out: &std::path::Path,
) -> Result<(), crate::error::ImportError> {
    use crate::error::ImportError;
    use crate::loader::writer::{ModelWriter, PendingTensor};
    let doc = graph_for(&model.config, &|n| model.tensors.contains(n))
        .ok_or_else(|| ImportError::Unsupported {
            path: model.path().to_path_buf(),
            reason: format!(
                "no graph writer for model_type '{}' (LlamaStyle, BertStyle and WhisperStyle models have one)",
                model.config.model_type
            ),
        })?
        .map_err(|e| ImportError::Format {
            path: model.path().to_path_buf(),
            reason: format!("cannot write a graph for this config: {e}"),
        })?;
    let mut writer = ModelWriter::new(model.name.clone());
    for s in &model.sections {
        if matches!(s.name.as_str(), "tensors" | "weights" | "graph") {
            continue;
        }
        if let Some(text) = model.section_text(&s.name) {
            writer.set_section(&s.name, text);
        }
    }
    writer.set_section("graph", doc.to_toml());
    for entry in model.tensors.entries() {
        writer.add_tensor(PendingTensor {
            name: entry.name.clone(),
            shape: entry.shape.clone(),
            dtype: entry.dtype,
            scale: entry.scale,
            data: std::borrow::Cow::Borrowed(model.tensor_of(entry).bytes),
        })?;
    }
    writer.write(out)
}
