//! [`TranscribeOptions`]: the decoding rules of [`super::Whisper::transcribe`] and
//! their validation. The defaults are today's greedy decoding with the reference
//! temperature fallback; the beam-search, sampling and prompt fields follow
//! faster-whisper's `transcribe` (which runs CTranslate2's search).

use crate::error::ExecutionError;

/// Options of [`super::Whisper::transcribe`]; `Default` gives greedy decoding under
/// the reference rules.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscribeOptions {
    /// Spoken language code (`en`, `de`, ...); `None` detects it (multilingual models).
    pub language: Option<String>,
    /// Translate to English instead of transcribing (multilingual models).
    pub translate: bool,
    /// Predict timestamps (segments cut at them); off gives one segment per window.
    pub timestamps: bool,
    /// Temperatures tried in order (fallback); the first is normally 0 (greedy or
    /// beam search). Each must be finite and >= 0.
    pub temperatures: Vec<f32>,
    /// Beams of the search at temperature 0; 1 is greedy decoding. faster-whisper's
    /// default is 5; this default stays 1 (greedy, as whisper.cpp).
    pub beam_size: usize,
    /// Beam-search patience: the search stops once `round(beam_size * patience)`
    /// sequences have ended (faster-whisper's default 1).
    pub patience: f32,
    /// Length-penalty exponent: a finished sequence scores
    /// `sum_logprob / len ^ length_penalty` (CTranslate2's rule, faster-whisper's
    /// default 1 = openai-whisper's plain length normalization).
    pub length_penalty: f32,
    /// Samples drawn at each temperature above 0; the best by that same score is kept.
    pub best_of: usize,
    /// Text put before the first window's prompt (after `<|startofprev|>`), tokenized
    /// as faster-whisper does (`" " + text.trim()`); only its last 223 tokens fit.
    pub initial_prompt: Option<String>,
    /// Fallback when the text's gzip compression ratio is above this.
    pub compression_ratio_threshold: Option<f64>,
    /// Fallback when the average log-probability is below this.
    pub logprob_threshold: Option<f64>,
    /// A window is silence when the no-speech probability is above this (and the
    /// average log-probability is below `logprob_threshold`).
    pub no_speech_threshold: Option<f64>,
    /// Prompt each window with the previous windows' text.
    pub condition_on_previous_text: bool,
    /// A window whose audio RMS is below this is skipped without decoding. This is
    /// an addition to the reference rules, under which Whisper (and faster-whisper)
    /// transcribe 30 s of digital silence as " you". `None` turns it off.
    pub silence_rms: Option<f32>,
    /// Seed of the sampler used at temperatures above 0.
    pub seed: u64,
    /// When the first temperature's decoding fails, decode the later temperatures
    /// together, in batches of up to six sequences on the window's encoder output
    /// (stopping once the first passing one is known), instead of one temperature after
    /// another. The same decodings either way (each sample has its own random stream);
    /// a batch shares each step's weight reads, so it is faster.
    pub batch_fallback: bool,
    /// Per-word start, end and probability in [`super::Segment::words`], from the
    /// cross-attention alignment (faster-whisper's `word_timestamps`). As there, a
    /// window's next one then starts at its last word's end, and segment times follow
    /// their words; off leaves every transcript as it was.
    pub word_timestamps: bool,
}

impl Default for TranscribeOptions {
    fn default() -> Self {
        TranscribeOptions {
            language: None,
            translate: false,
            timestamps: true,
            temperatures: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            beam_size: 1,
            patience: 1.0,
            length_penalty: 1.0,
            best_of: 1,
            initial_prompt: None,
            compression_ratio_threshold: Some(2.4),
            logprob_threshold: Some(-1.0),
            no_speech_threshold: Some(0.6),
            condition_on_previous_text: true,
            silence_rms: Some(1e-3),
            seed: 0,
            batch_fallback: true,
            word_timestamps: false,
        }
    }
}

fn invalid(field: &str, reason: String) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: field.into(),
        reason,
    }
}

impl TranscribeOptions {
    /// Checks the decoding fields: `beam_size` and `best_of` at least 1, every
    /// temperature finite and >= 0 (at least one), `patience` finite and > 0,
    /// `length_penalty` finite. Errors name the field.
    pub fn validate(&self) -> Result<(), ExecutionError> {
        if self.beam_size == 0 {
            return Err(invalid("beam_size", "must be at least 1".into()));
        }
        if self.best_of == 0 {
            return Err(invalid("best_of", "must be at least 1".into()));
        }
        if self.temperatures.is_empty() {
            return Err(invalid("temperature", "no temperature given".into()));
        }
        if let Some(t) = (self.temperatures.iter()).find(|t| !(t.is_finite() && **t >= 0.0)) {
            return Err(invalid("temperature", format!("{t} is outside [0, inf)")));
        }
        if !(self.patience.is_finite() && self.patience > 0.0) {
            return Err(invalid(
                "patience",
                format!("{} must be finite and above 0", self.patience),
            ));
        }
        if !self.length_penalty.is_finite() {
            return Err(invalid(
                "length_penalty",
                format!("{} is not finite", self.length_penalty),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(o: TranscribeOptions) -> String {
        match o.validate() {
            Err(ExecutionError::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_decoding_options_are_named() {
        let d = TranscribeOptions::default;
        assert!(d().validate().is_ok());
        assert_eq!(
            field(TranscribeOptions {
                beam_size: 0,
                ..d()
            }),
            "beam_size"
        );
        assert_eq!(field(TranscribeOptions { best_of: 0, ..d() }), "best_of");
        for t in [-0.1, f32::NAN, f32::INFINITY] {
            let o = TranscribeOptions {
                temperatures: vec![0.0, t],
                ..d()
            };
            assert_eq!(field(o), "temperature");
        }
        let none = TranscribeOptions {
            temperatures: vec![],
            ..d()
        };
        assert_eq!(field(none), "temperature");
        assert_eq!(
            field(TranscribeOptions {
                patience: 0.0,
                ..d()
            }),
            "patience"
        );
        let lp = TranscribeOptions {
            length_penalty: f32::NAN,
            ..d()
        };
        assert_eq!(field(lp), "length_penalty");
    }
}
