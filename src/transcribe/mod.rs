//! Speech to text: load a WhisperStyle `.model` once, transcribe many inputs.
//!
//! ```no_run
//! use cyb_llm::transcribe::{SpeechModel, TranscribeOptions};
//! let model = SpeechModel::load("whisper-tiny.en.model", &Default::default())?;
//! let samples = cyb_llm::audio::load_16k("jfk.wav".as_ref())?;
//! let transcript = model.transcribe(&samples, &TranscribeOptions::default())?;
//! for s in &transcript.segments {
//!     println!("[{:.2} -> {:.2}]{}", s.start, s.end, s.text);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`format`] writes transcripts as txt, srt, vtt or json; [`vad`] transcribes
//! only the speech regions Silero VAD finds (faster-whisper's `vad_filter`).

pub mod format;
pub mod vad;

pub use crate::curated::whisper::{Segment, Timings, TranscribeOptions, Transcript, Whisper, Word};

use crate::backend::{BackendChoice, BackendConfig, Dispatcher};
use crate::error::ExecutionError;
use crate::loader::{Family, Model};
use std::path::Path;
use std::sync::Arc;

/// How a [`SpeechModel`] runs.
#[derive(Debug, Clone)]
pub struct SpeechOptions {
    /// Backend choice (`auto`, `cpu`, ...).
    pub backend: BackendChoice,
    /// Worker threads.
    pub threads: usize,
}

impl Default for SpeechOptions {
    /// Auto backend, physical cores.
    fn default() -> Self {
        SpeechOptions {
            backend: BackendChoice::Auto,
            threads: BackendConfig::default().threads,
        }
    }
}

/// Why loading or running a speech model failed.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// The file could not be loaded.
    #[error(transparent)]
    Load(#[from] crate::error::LoadError),
    /// Running the model failed.
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// The audio could not be read.
    #[error(transparent)]
    Audio(#[from] crate::audio::AudioError),
    /// The model given as the VAD is not a Silero VAD v6 graph.
    #[error(
        "{model}: not a voice activity detection model ({reason}); use Silero VAD v6, \
         faster-whisper's silero_vad_v6.onnx (scripts/fetch-models.sh silero puts it in \
         .cache/models/silero/), as --vad-model"
    )]
    NotAVad {
        /// The model file (or name).
        model: String,
        /// What it is instead.
        reason: String,
    },
}

/// A loaded speech-recognition model.
#[derive(Debug)]
pub struct SpeechModel {
    whisper: Whisper,
}

impl SpeechModel {
    /// Loads the `.model` file at `path`.
    pub fn load(path: impl AsRef<Path>, opts: &SpeechOptions) -> Result<SpeechModel, SpeechError> {
        let model = crate::loader::load(path)?;
        Ok(SpeechModel::from_model(Arc::new(model), opts)?)
    }

    /// Prepares a loaded model; a model that is not WhisperStyle is `InvalidConfig`.
    pub fn from_model(
        model: Arc<Model>,
        opts: &SpeechOptions,
    ) -> Result<SpeechModel, ExecutionError> {
        if model.family != Some(Family::WhisperStyle) {
            return Err(ExecutionError::InvalidConfig {
                field: "model_type".into(),
                reason: format!(
                    "'{}' is not a speech-recognition (WhisperStyle) model",
                    model.config.model_type
                ),
            });
        }
        if let BackendChoice::Named(name) = &opts.backend {
            if opts.backend.capabilities().graph_only {
                return Err(ExecutionError::BackendInit {
                    backend: name.clone(),
                    reason: format!(
                        "transcription runs the curated Whisper family, and {name} runs only \
                         graph sections; use --backend cpu (or auto)"
                    ),
                });
            }
        }
        let dispatcher = Dispatcher::new(
            opts.backend.clone(),
            &BackendConfig {
                threads: opts.threads.max(1),
            },
        )?;
        Ok(SpeechModel {
            whisper: Whisper::new(model, dispatcher)?,
        })
    }

    /// The bound Whisper model.
    pub fn whisper(&self) -> &Whisper {
        &self.whisper
    }

    /// Transcribes 16 kHz mono `samples`.
    pub fn transcribe(
        &self,
        samples: &[f32],
        opts: &TranscribeOptions,
    ) -> Result<Transcript, ExecutionError> {
        self.whisper.transcribe(samples, opts)
    }

    /// Reads an audio file (any format symphonia reads) and transcribes it.
    pub fn transcribe_file(
        &self,
        path: &Path,
        opts: &TranscribeOptions,
    ) -> Result<Transcript, SpeechError> {
        let samples = crate::audio::load_16k(path)?;
        Ok(self.whisper.transcribe(&samples, opts)?)
    }
}
