//! Text to speech: the text frontend of Piper voices.
//!
//! [`voice`] reads a voice's JSON config and applies Piper's phoneme-id rules;
//! [`phonemize`] groups espeak-ng's clauses into sentences of phoneme symbols;
//! [`espeak`] is the espeak-ng library, opened at run time.

pub mod espeak;
pub mod phonemize;
pub mod voice;

pub use voice::{PhonemeIds, VoiceConfig};

use std::path::PathBuf;

/// Why text could not be turned into speech input.
#[derive(Debug, thiserror::Error)]
pub enum SpeakError {
    /// A voice file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A voice's JSON config is malformed or unsupported.
    #[error("{path}: voice config `{field}` {reason}")]
    VoiceConfig {
        path: PathBuf,
        field: String,
        reason: String,
    },
    /// The voice names something the phonemizer cannot use.
    #[error("voice config `{field}` {reason}")]
    Voice { field: String, reason: String },
    /// The espeak-ng library is missing or failed.
    #[error("espeak-ng: {reason}")]
    Espeak { reason: String },
}
