//! Text to speech with Piper voices: `phonemes = text_frontend(text); audio = model(phonemes)`.
//!
//! [`voice`] reads a voice's config (its JSON, or the `[tts]` section) and
//! applies Piper's phoneme-id rules; [`phonemize`] groups espeak-ng's clauses
//! into sentences of phoneme symbols; [`espeak`] is the espeak-ng library,
//! opened at run time; [`synth`] runs the network on the graph path;
//! [`wav`] writes the result.

pub mod espeak;
pub mod phonemize;
pub mod synth;
pub mod voice;
pub mod wav;

pub use synth::{Frontend, SentenceAudio, Speech, SynthesisOptions, Voice, VoiceOptions};
pub use voice::{PhonemeIds, VoiceConfig};

use std::path::PathBuf;

/// Tells the C allocator (glibc) to keep freed memory for reuse rather than return it to
/// the system: allocations up to 32 MiB come from the heap, not fresh mappings, the heap
/// is not trimmed below 1 GiB, and every thread allocates from one arena. Each sentence's
/// activations (buffers of a few MB whose sizes follow the sentence's length) then reuse
/// the pages the previous sentence freed instead of faulting in new ones: on the 36 lines
/// of `scripts/bench-tts.sh`, 1.2 M page faults (a quarter of the CPU time, in the kernel)
/// became 0.23 M. Process-wide, for a command that synthesizes many sentences; a no-op
/// off glibc.
pub fn retain_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters; any value is accepted or refused
    // (returning 0), and the allocator stays consistent either way.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

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
    /// The model could not be loaded.
    #[error(transparent)]
    Load(crate::error::LoadError),
    /// The model is not a voice.
    #[error(
        "'{model_type}' is not a text-to-speech voice (its config has no [tts] section); {advice}"
    )]
    NotAVoice { model_type: String, advice: String },
    /// The text gave no phoneme to speak.
    #[error("the text gives nothing to speak (no phonemes): {text:?}")]
    NothingToSay { text: String },
    /// A synthesis option is out of range.
    #[error("{field}: {reason}")]
    Request { field: &'static str, reason: String },
    /// The network failed.
    #[error(transparent)]
    Execution(crate::error::ExecutionError),
    /// The output could not be written.
    #[error("{path}: cannot write: {reason}")]
    Write { path: PathBuf, reason: String },
}
