//! A Piper voice: the `VOICE.onnx.json` Piper keeps beside the network becomes
//! the `[tts]` section, checked against the graph's inputs.

use crate::error::ImportError;
use crate::ir::GraphDoc;
use crate::loader::config::{TtsSection, TTS_INPUTS};
use crate::speak::VoiceConfig;
use std::path::{Path, PathBuf};

/// Where Piper keeps a voice's config: `VOICE.onnx.json` beside `VOICE.onnx`.
pub fn config_path(source: &Path) -> PathBuf {
    let mut name = source.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Whether the graph reads the inputs of a Piper voice (by name).
fn reads_voice_inputs(graph: &GraphDoc) -> bool {
    TTS_INPUTS
        .iter()
        .all(|(name, _, _)| graph.inputs.iter().any(|d| d.name == *name))
}

/// The `[tts]` section of the ONNX model `source`: its voice config read from
/// [`config_path`] and checked against `graph`. `None` when there is no config
/// and the graph does not read a voice's inputs; a graph that does, without
/// its config, is an error naming the file to put beside it.
pub fn section(source: &Path, graph: &GraphDoc) -> Result<Option<TtsSection>, ImportError> {
    let json = config_path(source);
    let bad = |field: String, reason: String| ImportError::Voice {
        path: json.clone(),
        field,
        reason,
    };
    if !json.is_file() {
        if reads_voice_inputs(graph) {
            return Err(bad(
                "(file)".into(),
                format!(
                    "`{}` reads a Piper voice's inputs (input, input_lengths, scales) but its config is missing; put the voice's JSON file beside it as `{}` (Piper voices ship as the two files VOICE.onnx and VOICE.onnx.json)",
                    source.display(),
                    json.display()
                ),
            ));
        }
        return Ok(None);
    }
    let voice = VoiceConfig::from_json_file(&json).map_err(|e| match e {
        crate::speak::SpeakError::VoiceConfig { field, reason, .. } => bad(field, reason),
        other => bad("(file)".into(), other.to_string()),
    })?;
    let section = voice.to_section();
    section
        .check(&graph.inputs, &graph.outputs)
        .map_err(|m| bad(m.field, m.reason))?;
    Ok(Some(section))
}
