//! WhisperStyle hyper-parameters and special tokens, read from the `config` section
//! (written by the CTranslate2 importer; keys in `[architecture]`).

use crate::error::ExecutionError;
use crate::loader::config::Config;

/// Whisper's special token ids.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecialTokens {
    /// `<|endoftext|>`.
    pub eot: u32,
    /// `<|startoftranscript|>`.
    pub sot: u32,
    /// `<|translate|>`.
    pub translate: u32,
    /// `<|transcribe|>`.
    pub transcribe: u32,
    /// `<|startoflm|>`.
    pub sot_lm: u32,
    /// `<|startofprev|>`.
    pub sot_prev: u32,
    /// `<|nospeech|>` / `<|nocaptions|>`, when the vocabulary has it.
    pub no_speech: Option<u32>,
    /// `<|notimestamps|>`.
    pub no_timestamps: u32,
    /// `<|0.00|>`; every id from here on is a timestamp (0.02 s steps).
    pub timestamp_begin: u32,
    /// Language tokens `<|en|>`, `<|zh|>`, ... in id order.
    pub languages: Vec<u32>,
}

/// Hyper-parameters of a WhisperStyle model.
#[derive(Debug, Clone, PartialEq)]
pub struct WhisperConfig {
    /// Model width (encoder and decoder).
    pub d_model: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Encoder attention heads.
    pub encoder_heads: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Decoder attention heads.
    pub decoder_heads: usize,
    /// Mel bins (80, or 128 for large-v3).
    pub n_mels: usize,
    /// Encoder positions (1500 = 30 s).
    pub n_audio_ctx: usize,
    /// Decoder positions (448).
    pub n_text_ctx: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// LayerNorm epsilon.
    pub eps: f32,
    /// True for multilingual models (not `.en`).
    pub multilingual: bool,
    /// Special token ids.
    pub special: SpecialTokens,
    /// Tokens never sampled (`suppress_tokens`).
    pub suppress: Vec<u32>,
    /// Tokens not sampled first (`begin_suppress_tokens`).
    pub begin_suppress: Vec<u32>,
    /// Cross-attention heads `(decoder layer, head)` that follow the word timing
    /// (`alignment_heads`, written at import); `None` in files imported before the
    /// key existed.
    pub alignment_heads: Option<Vec<(usize, usize)>>,
}

fn bad(field: &str, reason: &str) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: format!("architecture.{field}"),
        reason: reason.to_string(),
    }
}

/// `alignment_heads`: a non-empty list of `[layer, head]` pairs inside the decoder.
fn head_pairs(
    v: &toml::Value,
    layers: usize,
    heads: usize,
) -> Result<Vec<(usize, usize)>, ExecutionError> {
    let reason =
        format!("must be [layer, head] pairs inside the decoder ({layers} layers, {heads} heads)");
    let pair = |p: &toml::Value| {
        let p = p.as_array().filter(|p| p.len() == 2)?;
        let at = |i: usize| usize::try_from(p[i].as_integer()?).ok();
        Some((at(0)?, at(1)?)).filter(|&(l, h)| l < layers && h < heads)
    };
    let pairs: Option<Vec<(usize, usize)>> =
        (v.as_array()).and_then(|a| a.iter().map(pair).collect());
    pairs
        .filter(|p| !p.is_empty())
        .ok_or_else(|| bad("alignment_heads", &reason))
}

impl WhisperConfig {
    /// Reads the WhisperStyle keys of `config`.
    pub fn from_config(config: &Config) -> Result<WhisperConfig, ExecutionError> {
        let a = &config.architecture;
        let int = |k: &str| -> Result<usize, ExecutionError> {
            a.extra
                .get(k)
                .and_then(toml::Value::as_integer)
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| bad(k, "missing (required by WhisperStyle)"))
        };
        let id = |k: &str| int(k).map(|v| v as u32);
        let list = |k: &str| -> Vec<u32> {
            a.extra
                .get(k)
                .and_then(toml::Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(toml::Value::as_integer)
                        .filter_map(|x| u32::try_from(x).ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let pos = |v: Option<usize>, k: &str| {
            v.filter(|&x| x > 0)
                .ok_or_else(|| bad(k, "missing or zero (required by WhisperStyle)"))
        };
        let d_model = pos(a.hidden_size, "hidden_size")?;
        let decoder_heads = pos(a.num_attention_heads, "num_attention_heads")?;
        let encoder_heads = int("encoder_attention_heads")?;
        for (h, k) in [
            (decoder_heads, "num_attention_heads"),
            (encoder_heads, "encoder_attention_heads"),
        ] {
            if h == 0 || d_model % h != 0 {
                return Err(bad(
                    k,
                    &format!("{h} does not divide hidden_size {d_model}"),
                ));
            }
        }
        let n_vocab = pos(a.vocab_size, "vocab_size")?;
        let special = SpecialTokens {
            eot: id("eot_token_id")?,
            sot: id("sot_token_id")?,
            translate: id("translate_token_id")?,
            transcribe: id("transcribe_token_id")?,
            sot_lm: id("sot_lm_token_id")?,
            sot_prev: id("sot_prev_token_id")?,
            no_speech: id("no_speech_token_id").ok(),
            no_timestamps: id("no_timestamps_token_id")?,
            timestamp_begin: id("timestamp_begin")?,
            languages: list("lang_token_ids"),
        };
        let all = [
            special.eot,
            special.sot,
            special.translate,
            special.transcribe,
            special.sot_lm,
            special.sot_prev,
            special.no_timestamps,
            special.timestamp_begin,
        ];
        if let Some(&bad_id) = all.iter().find(|&&i| i as usize >= n_vocab) {
            return Err(bad(
                "eot_token_id",
                &format!("special token id {bad_id} is outside the vocabulary ({n_vocab})"),
            ));
        }
        let decoder_layers = pos(a.num_hidden_layers, "num_hidden_layers")?;
        let alignment_heads = match a.extra.get("alignment_heads") {
            None => None,
            Some(v) => Some(head_pairs(v, decoder_layers, decoder_heads)?),
        };
        Ok(WhisperConfig {
            d_model,
            encoder_layers: int("encoder_layers")?,
            encoder_heads,
            decoder_layers,
            decoder_heads,
            n_mels: int("n_mels")?,
            n_audio_ctx: int("max_source_positions")?,
            n_text_ctx: pos(a.max_position_embeddings, "max_position_embeddings")?,
            n_vocab,
            eps: a.layer_norm_eps.unwrap_or(1e-5) as f32,
            multilingual: a
                .extra
                .get("multilingual")
                .and_then(toml::Value::as_bool)
                .unwrap_or(n_vocab >= 51865),
            special,
            suppress: list("suppress_tokens"),
            begin_suppress: list("begin_suppress_tokens"),
            alignment_heads,
        })
    }
}
