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
//! [`format`](mod@format) writes transcripts as txt, srt, vtt or json; [`vad`] transcribes
//! only the speech regions Silero VAD finds (faster-whisper's `vad_filter`).
//!
//! [`SpeechOptions::path`] picks the curated family or the model's graph section
//! ([`crate::path`]); both run the same decoding rules. A graph-only backend
//! (`nox`) takes the graph path.

pub mod format;
mod graph;
pub mod vad;

pub use crate::curated::whisper::{Segment, Timings, TranscribeOptions, Transcript, Whisper, Word};

use crate::backend::{BackendChoice, BackendConfig, Dispatcher};
use crate::error::ExecutionError;
use crate::graph::GraphOptions;
use crate::loader::{Model, Task};
use crate::path::{Engine, PathChoice};
use graph::GraphForward;
use std::path::Path;
use std::sync::Arc;

/// How a [`SpeechModel`] runs.
#[derive(Debug, Clone)]
pub struct SpeechOptions {
    /// Backend choice (`auto`, `cpu`, ...).
    pub backend: BackendChoice,
    /// Worker threads.
    pub threads: usize,
    /// `--path`: the curated family or the graph section (encoder and decoder).
    pub path: PathChoice,
}

impl Default for SpeechOptions {
    /// Auto backend, physical cores.
    fn default() -> Self {
        SpeechOptions {
            backend: BackendChoice::Auto,
            threads: BackendConfig::default().threads,
            path: PathChoice::Auto,
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
pub struct SpeechModel {
    /// Config, tokenizer, mel filters and decoding rules (and the curated forward).
    whisper: Whisper,
    /// The forward the rules drive.
    engine: Engine<(), GraphForward>,
}

impl std::fmt::Debug for SpeechModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpeechModel")
            .field("whisper", &self.whisper)
            .field("path", &self.engine.path_name())
            .finish()
    }
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
        if model.task() != Some(Task::Transcribe) {
            return Err(ExecutionError::InvalidConfig {
                field: "model_type".into(),
                reason: format!(
                    "'{}' is not a speech-recognition (WhisperStyle) model; {}",
                    model.config.model_type,
                    model.commands()
                ),
            });
        }
        let dispatcher = Dispatcher::new(
            opts.backend.clone(),
            &BackendConfig {
                threads: opts.threads.max(1),
            },
        )?;
        let whisper = Whisper::new(model.clone(), dispatcher.clone())?;
        let c = &whisper.config;
        let graph = GraphOptions {
            ctx_size: c.n_text_ctx,
            ..GraphOptions::default()
        };
        let (n_mels, n_text_ctx) = (c.n_mels, c.n_text_ctx);
        let engine = Engine::bind(&model, opts.path, &dispatcher, graph, |_| Ok(()))?
            .map_graph(|g| Ok(GraphForward::new(g, n_mels, n_text_ctx)))?;
        Ok(SpeechModel { whisper, engine })
    }

    /// The path the encoder and decoder run on: `curated` or `graph`.
    pub fn path_name(&self) -> &'static str {
        self.engine.path_name()
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
        match &self.engine {
            Engine::Curated(()) => self.whisper.transcribe(samples, opts),
            Engine::Graph(g) => self.whisper.transcribe_on(g, samples, opts, &mut |_| {}),
        }
    }

    /// Reads an audio file (any format symphonia reads) and transcribes it.
    pub fn transcribe_file(
        &self,
        path: &Path,
        opts: &TranscribeOptions,
    ) -> Result<Transcript, SpeechError> {
        let samples = crate::audio::load_16k(path)?;
        Ok(self.transcribe(&samples, opts)?)
    }
}
