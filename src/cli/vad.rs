//! The `--vad` flags of `cyb-llm transcribe`: Silero VAD before transcription
//! (faster-whisper's `vad_filter` and `VadOptions`).

use cyb_llm::transcribe::vad::{Vad, VadOptions};
use cyb_llm::transcribe::SpeechOptions;
use std::path::PathBuf;

/// `--vad`, the VAD model and faster-whisper's `VadOptions`.
#[derive(clap::Args, Debug)]
pub struct VadArgs {
    /// Transcribe only the speech Silero VAD finds (faster-whisper's vad_filter); times stay on the original timeline.
    #[arg(long, requires = "vad_model")]
    vad: bool,
    /// The VAD model: faster-whisper's silero_vad_v6.onnx (imported once into the cache) or its .model.
    #[arg(long, value_name = "PATH", requires = "vad")]
    vad_model: Option<PathBuf>,
    /// Windows with a speech probability at or above this are speech.
    #[arg(long, value_name = "P", default_value_t = 0.5, requires = "vad", value_parser = parse_probability)]
    vad_threshold: f64,
    /// Speech regions shorter than this are dropped.
    #[arg(long, value_name = "MS", default_value_t = 0, requires = "vad")]
    vad_min_speech_duration_ms: u32,
    /// Silence that ends a speech region.
    #[arg(long, value_name = "MS", default_value_t = 2000, requires = "vad")]
    vad_min_silence_duration_ms: u32,
    /// Padding kept on each side of a speech region.
    #[arg(long, value_name = "MS", default_value_t = 400, requires = "vad")]
    vad_speech_pad_ms: u32,
}

fn parse_probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("`{s}` is not a probability in [0, 1]")),
    }
}

impl VadArgs {
    /// The VAD and its options when `--vad` is given (the model resolved and loaded
    /// on `opts`' backend), else None.
    pub fn load(
        &self,
        opts: &SpeechOptions,
    ) -> Result<Option<(Vad, VadOptions)>, Box<dyn std::error::Error>> {
        let (true, Some(path)) = (self.vad, &self.vad_model) else {
            return Ok(None);
        };
        let file = super::source::resolve_model_source(path)?;
        let vad = Vad::load(&file, opts).map_err(|e| match e {
            cyb_llm::transcribe::SpeechError::NotAVad { reason, .. } => {
                cyb_llm::transcribe::SpeechError::NotAVad {
                    model: path.display().to_string(),
                    reason,
                }
            }
            e => e,
        })?;
        let vopts = VadOptions {
            threshold: self.vad_threshold,
            min_speech_duration_ms: self.vad_min_speech_duration_ms,
            min_silence_duration_ms: self.vad_min_silence_duration_ms,
            speech_pad_ms: self.vad_speech_pad_ms,
            ..VadOptions::default()
        };
        Ok(Some((vad, vopts)))
    }
}
