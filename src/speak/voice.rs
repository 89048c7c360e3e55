//! A Piper voice's configuration (the `VOICE.onnx.json` beside the network) and
//! Piper's phoneme-id rules.

use super::phonemize;
use super::SpeakError;
use crate::loader::config::TtsSection;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use unicode_normalization::UnicodeNormalization;

/// Beginning of an utterance.
pub const BOS: &str = "^";
/// End of an utterance.
pub const EOS: &str = "$";
/// Written after every phoneme (and after BOS).
pub const PAD: &str = "_";

/// How a voice turns text into phoneme symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhonemeType {
    /// espeak-ng IPA (most voices).
    Espeak,
    /// The text's own code points after NFD decomposition.
    Text,
}

/// Synthesis defaults the voice was trained with; a key the JSON leaves out
/// takes Piper's default (0.667, 1.0, 0.8).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default)]
pub struct InferenceDefaults {
    /// Scale of the noise added to the prior (0 gives the mean voice).
    pub noise_scale: f32,
    /// Phoneme duration multiplier (above 1 is slower speech).
    pub length_scale: f32,
    /// Scale of the duration predictor's noise.
    pub noise_w: f32,
}

impl Default for InferenceDefaults {
    /// Piper's defaults: noise 0.667, length 1.0, noise_w 0.8.
    fn default() -> Self {
        InferenceDefaults {
            noise_scale: 0.667,
            length_scale: 1.0,
            noise_w: 0.8,
        }
    }
}

/// Everything about a voice except its network.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceConfig {
    /// Output sample rate in Hz.
    pub sample_rate: u32,
    /// espeak-ng voice name, e.g. `en-us`.
    pub espeak_voice: String,
    /// How text becomes phonemes.
    pub phoneme_type: PhonemeType,
    /// Symbol to id sequence (usually one id).
    pub phoneme_id_map: HashMap<String, Vec<i64>>,
    /// Symbol runs merged into one symbol before the id lookup.
    pub vowel_clusters: BTreeSet<Vec<String>>,
    /// Number of speakers the network was trained on.
    pub num_speakers: u32,
    /// Speaker name to speaker id (empty for one-speaker voices).
    pub speaker_id_map: BTreeMap<String, u32>,
    /// Synthesis defaults.
    pub inference: InferenceDefaults,
}

#[derive(Deserialize)]
struct RawAudio {
    sample_rate: u32,
}

#[derive(Deserialize)]
struct RawEspeak {
    voice: String,
}

/// The JSON key of a `tts.KEY` field, for errors about a voice's JSON file.
fn json_field(field: &str) -> &str {
    match field.strip_prefix("tts.").unwrap_or(field) {
        "sample_rate" => "audio.sample_rate",
        "espeak_voice" => "espeak.voice",
        "noise_scale" => "inference.noise_scale",
        "length_scale" => "inference.length_scale",
        "noise_w" => "inference.noise_w",
        other => other,
    }
}

#[derive(Deserialize)]
struct RawConfig {
    audio: RawAudio,
    #[serde(default)]
    espeak: Option<RawEspeak>,
    #[serde(default)]
    phoneme_type: Option<String>,
    phoneme_id_map: HashMap<String, Vec<i64>>,
    #[serde(default)]
    vowel_clusters: Vec<Vec<String>>,
    #[serde(default)]
    num_speakers: Option<u32>,
    #[serde(default)]
    speaker_id_map: BTreeMap<String, u32>,
    #[serde(default)]
    inference: InferenceDefaults,
}

/// The result of turning phoneme symbols into ids.
#[derive(Debug, Clone, PartialEq)]
pub struct PhonemeIds {
    /// `BOS PAD (phoneme PAD)* EOS`, in the voice's ids.
    pub ids: Vec<i64>,
    /// Symbols the voice has no id for, each once, in order of appearance; they
    /// were left out.
    pub unknown: Vec<String>,
}

impl VoiceConfig {
    /// Reads the JSON config of a Piper voice. `path` names it in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, SpeakError> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| SpeakError::VoiceConfig {
            path: path.to_path_buf(),
            field: "(json)".into(),
            reason: e.to_string(),
        })?;
        let section = TtsSection {
            sample_rate: raw.audio.sample_rate,
            phoneme_type: raw.phoneme_type.unwrap_or_else(|| "espeak".into()),
            espeak_voice: raw.espeak.map(|e| e.voice).unwrap_or_default(),
            phoneme_id_map: raw.phoneme_id_map.into_iter().collect(),
            vowel_clusters: raw.vowel_clusters,
            num_speakers: raw.num_speakers.unwrap_or(1),
            speaker_id_map: raw.speaker_id_map,
            noise_scale: raw.inference.noise_scale,
            length_scale: raw.inference.length_scale,
            noise_w: raw.inference.noise_w,
        };
        Self::from_section(&section).map_err(|e| match e {
            SpeakError::Voice { field, reason } => SpeakError::VoiceConfig {
                path: path.to_path_buf(),
                field: json_field(&field).to_string(),
                reason,
            },
            other => other,
        })
    }

    /// The voice stored in a `.model`'s `[tts]` section, checked: a known
    /// phoneme type, an espeak voice for espeak voices, ids for `^` `_` `$`, a
    /// sample rate above 0 and at least one speaker. Errors name the `tts.KEY`.
    pub fn from_section(section: &TtsSection) -> Result<Self, SpeakError> {
        let bad = |field: &str, reason: String| SpeakError::Voice {
            field: format!("tts.{field}"),
            reason,
        };
        let phoneme_type = match section.phoneme_type.as_str() {
            "espeak" => PhonemeType::Espeak,
            "text" => PhonemeType::Text,
            other => {
                return Err(bad(
                    "phoneme_type",
                    format!("`{other}` voices are not supported (supported: espeak, text)"),
                ))
            }
        };
        if phoneme_type == PhonemeType::Espeak && section.espeak_voice.is_empty() {
            return Err(bad("espeak_voice", "missing for an espeak voice".into()));
        }
        for symbol in [BOS, EOS, PAD] {
            if section.phoneme_id_map.get(symbol).is_none_or(Vec::is_empty) {
                return Err(bad(
                    "phoneme_id_map",
                    format!("has no id for `{symbol}` (Piper voices map `^` `_` `$`)"),
                ));
            }
        }
        if section.sample_rate == 0 {
            return Err(bad("sample_rate", "is 0".into()));
        }
        if section.num_speakers == 0 {
            return Err(bad("num_speakers", "is 0".into()));
        }
        if let Some((name, id)) = section
            .speaker_id_map
            .iter()
            .find(|(_, &id)| id >= section.num_speakers)
        {
            return Err(bad(
                "speaker_id_map",
                format!(
                    "gives `{name}` id {id}, but the voice has {} speakers",
                    section.num_speakers
                ),
            ));
        }
        Ok(VoiceConfig {
            sample_rate: section.sample_rate,
            espeak_voice: section.espeak_voice.clone(),
            phoneme_type,
            phoneme_id_map: section
                .phoneme_id_map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            vowel_clusters: section.vowel_clusters.iter().cloned().collect(),
            num_speakers: section.num_speakers,
            speaker_id_map: section.speaker_id_map.clone(),
            inference: InferenceDefaults {
                noise_scale: section.noise_scale,
                length_scale: section.length_scale,
                noise_w: section.noise_w,
            },
        })
    }

    /// The `[tts]` section that stores this voice ([`VoiceConfig::from_section`]
    /// reads it back unchanged).
    pub fn to_section(&self) -> TtsSection {
        TtsSection {
            sample_rate: self.sample_rate,
            phoneme_type: match self.phoneme_type {
                PhonemeType::Espeak => "espeak",
                PhonemeType::Text => "text",
            }
            .into(),
            espeak_voice: self.espeak_voice.clone(),
            phoneme_id_map: self
                .phoneme_id_map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            vowel_clusters: self.vowel_clusters.iter().cloned().collect(),
            num_speakers: self.num_speakers,
            speaker_id_map: self.speaker_id_map.clone(),
            noise_scale: self.inference.noise_scale,
            length_scale: self.inference.length_scale,
            noise_w: self.inference.noise_w,
        }
    }

    /// Reads `VOICE.onnx.json` (or any Piper voice JSON) from disk.
    pub fn from_json_file(path: &Path) -> Result<Self, SpeakError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpeakError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// Text to phoneme symbols, one list per sentence (empty sentences dropped).
    pub fn phonemize(&self, text: &str) -> Result<Vec<Vec<String>>, SpeakError> {
        let sentences = match self.phoneme_type {
            PhonemeType::Espeak => {
                phonemize::espeak_sentences(&self.espeak_voice, text, &self.vowel_clusters)?
            }
            PhonemeType::Text => vec![text.nfd().map(String::from).collect()],
        };
        Ok(sentences.into_iter().filter(|s| !s.is_empty()).collect())
    }

    /// Piper's id rules: `BOS PAD`, then each known symbol followed by `PAD`,
    /// then `EOS`. Unknown symbols are skipped and reported once each.
    pub fn phoneme_ids(&self, symbols: &[String]) -> PhonemeIds {
        let map = &self.phoneme_id_map;
        let ids_of = |symbol: &str| map.get(symbol).map_or(&[][..], Vec::as_slice);
        let mut ids = Vec::with_capacity(2 * symbols.len() + 3);
        ids.extend(ids_of(BOS));
        ids.extend(ids_of(PAD));
        let mut unknown: Vec<String> = Vec::new();
        for symbol in symbols {
            match map.get(symbol) {
                Some(symbol_ids) => {
                    ids.extend(symbol_ids);
                    ids.extend(ids_of(PAD));
                }
                None if !unknown.contains(symbol) => unknown.push(symbol.clone()),
                None => {}
            }
        }
        ids.extend(ids_of(EOS));
        PhonemeIds { ids, unknown }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{"audio": {"sample_rate": 22050}, "espeak": {"voice": "en-us"},
        "inference": {"noise_scale": 0.667, "length_scale": 1, "noise_w": 0.8},
        "phoneme_id_map": {"_": [0], "^": [1], "$": [2], "a": [14], "b": [15]}}"#;

    #[test]
    fn ids_follow_piper_rules_and_report_unknown_symbols_once() {
        let voice = VoiceConfig::from_json(CONFIG, Path::new("v.json")).unwrap();
        let symbols = ["a", "?", "b", "?"].map(String::from);
        let got = voice.phoneme_ids(&symbols);
        assert_eq!(got.ids, [1, 0, 14, 0, 15, 0, 2]);
        assert_eq!(got.unknown, ["?"]);
    }

    #[test]
    fn config_errors_name_the_field() {
        let no_pad = CONFIG.replace(r#""_": [0], "#, "");
        let err = VoiceConfig::from_json(&no_pad, Path::new("v.json")).unwrap_err();
        assert!(err.to_string().contains("phoneme_id_map"), "{err}");
        let pinyin = CONFIG.replace(r#""audio""#, r#""phoneme_type": "pinyin", "audio""#);
        let err = VoiceConfig::from_json(&pinyin, Path::new("v.json")).unwrap_err();
        assert!(err.to_string().contains("phoneme_type"), "{err}");
        let rate0 = CONFIG.replace("22050", "0");
        let err = VoiceConfig::from_json(&rate0, Path::new("v.json")).unwrap_err();
        assert!(err.to_string().contains("audio.sample_rate"), "{err}");
    }

    #[test]
    fn the_stored_section_reads_back_the_same_voice() {
        let voice = VoiceConfig::from_json(CONFIG, Path::new("v.json")).unwrap();
        let text = toml::to_string(&voice.to_section()).unwrap();
        let back: TtsSection = toml::from_str(&text).unwrap();
        assert_eq!(VoiceConfig::from_section(&back).unwrap(), voice);
    }
}
