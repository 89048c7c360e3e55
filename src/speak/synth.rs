//! Synthesis on the graph path: a Piper voice's network run on phoneme ids,
//! sentence by sentence, with Piper's per-sentence peak normalization.

use super::{SpeakError, VoiceConfig};
use crate::backend::Tensor;
use crate::graph::{GraphModel, GraphOptions, GraphTaskOptions};
use crate::loader::config::{
    TTS_IDS_INPUT, TTS_LENGTHS_INPUT, TTS_OUTPUT, TTS_SCALES_INPUT, TTS_SPEAKER_INPUT,
};
use crate::loader::Model;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// How a voice is loaded.
pub type VoiceOptions = GraphTaskOptions;

/// What to synthesize with; `None` takes the voice's default.
#[derive(Debug, Clone, Default)]
pub struct SynthesisOptions {
    /// Scale of the prior's noise (0: the mean voice).
    pub noise_scale: Option<f32>,
    /// Phoneme duration multiplier (above 1 is slower).
    pub length_scale: Option<f32>,
    /// Scale of the duration predictor's noise.
    pub noise_w: Option<f32>,
    /// Speaker name or id (multi-speaker voices; default speaker 0).
    pub speaker: Option<String>,
    /// Seconds of silence written between two sentences.
    pub sentence_silence: f32,
    /// Seed of the network's noise: sentence `k` of a text draws from a stream
    /// of (`seed`, `k`), the same on every run, thread count and machine.
    /// `None`: the seeds stored in the graph (also reproducible).
    pub seed: Option<u64>,
}

/// One sentence's speech.
#[derive(Debug, Clone)]
pub struct SentenceAudio {
    /// Its phoneme symbols, joined.
    pub phonemes: String,
    /// The ids fed to the network.
    pub ids: Vec<i64>,
    /// 16-bit PCM at the voice's rate, peak-normalized as Piper does.
    pub samples: Vec<i16>,
    /// Wall time of the network run.
    pub synthesis_ms: f64,
}

/// A whole text's speech.
#[derive(Debug, Clone)]
pub struct Speech {
    /// Samples per second.
    pub sample_rate: u32,
    /// 16-bit PCM: the sentences, with the requested silence between them.
    pub samples: Vec<i16>,
    /// Sentences spoken.
    pub sentences: usize,
    /// Wall time of phonemization.
    pub frontend_ms: f64,
    /// Wall time of the network runs.
    pub synthesis_ms: f64,
    /// Phoneme symbols the voice has no id for (left out), each once.
    pub unknown: Vec<String>,
}

impl Speech {
    /// Seconds of audio.
    pub fn seconds(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}

/// A text's sentences, phonemized, ready for synthesis.
#[derive(Debug, Clone)]
pub struct Frontend {
    /// `(phonemes joined, ids)` per sentence.
    pub sentences: Vec<(String, Vec<i64>)>,
    /// Phoneme symbols the voice has no id for, each once.
    pub unknown: Vec<String>,
    /// Wall time of phonemization.
    pub ms: f64,
}

/// A Piper voice loaded from a `.model` file (an ONNX voice imported with its JSON).
pub struct Voice {
    graph: Arc<GraphModel>,
    config: VoiceConfig,
    load_ms: f64,
}

impl std::fmt::Debug for Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Voice")
            .field("sample_rate", &self.config.sample_rate)
            .field("espeak_voice", &self.config.espeak_voice)
            .finish()
    }
}

fn execution(e: crate::error::ExecutionError) -> SpeakError {
    SpeakError::Execution(e)
}

impl Voice {
    /// Loads the voice in the `.model` file at `path`.
    pub fn load(path: impl AsRef<Path>, opts: &VoiceOptions) -> Result<Voice, SpeakError> {
        let start = Instant::now();
        let model = crate::loader::load(path).map_err(SpeakError::Load)?;
        let mut voice = Voice::from_model(Arc::new(model), opts)?;
        voice.load_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(voice)
    }

    /// The voice of an already loaded model; a model without a `[tts]`
    /// section is an error naming its type and the command that runs it.
    pub fn from_model(model: Arc<Model>, opts: &VoiceOptions) -> Result<Voice, SpeakError> {
        let start = Instant::now();
        let Some(section) = model.config.tts.as_ref() else {
            return Err(SpeakError::NotAVoice {
                model_type: model.config.model_type.clone(),
                advice: model.commands(),
            });
        };
        let config = VoiceConfig::from_section(section)?;
        let graph = model.graph.as_ref().ok_or_else(|| SpeakError::Voice {
            field: "graph".into(),
            reason: "a voice needs its network's graph section (import VOICE.onnx)".into(),
        })?;
        let outputs = graph.output_names();
        section
            .check(&graph.input_decls, &outputs)
            .map_err(|m| SpeakError::Voice {
                field: m.field,
                reason: m.reason,
            })?;
        let gopts = GraphOptions {
            fuse: opts.fuse,
            ..GraphOptions::default()
        };
        let graph = crate::path::bind_graph(model, opts.backend.clone(), opts.threads, gopts)
            .map_err(execution)?;
        Ok(Voice {
            graph,
            config,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The voice's configuration (rate, phoneme map, defaults).
    pub fn config(&self) -> &VoiceConfig {
        &self.config
    }

    /// The network's graph model (backend, dispatcher).
    pub fn graph_model(&self) -> &Arc<GraphModel> {
        &self.graph
    }

    /// Wall time of loading the voice.
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Text to sentences of phoneme ids. Text that gives no phoneme at all is
    /// [`SpeakError::NothingToSay`].
    pub fn frontend(&self, text: &str) -> Result<Frontend, SpeakError> {
        let start = Instant::now();
        let mut unknown: Vec<String> = Vec::new();
        let mut sentences = Vec::new();
        for symbols in self.config.phonemize(text)? {
            let ids = self.config.phoneme_ids(&symbols);
            for u in ids.unknown {
                if !unknown.contains(&u) {
                    unknown.push(u);
                }
            }
            sentences.push((symbols.concat(), ids.ids));
        }
        if sentences.is_empty() {
            return Err(SpeakError::NothingToSay {
                text: text.chars().take(80).collect(),
            });
        }
        Ok(Frontend {
            sentences,
            unknown,
            ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The speaker id `opts.speaker` names (a name of the voice's map, or a
    /// number below its speaker count); 0 when none is given.
    pub fn speaker_id(&self, opts: &SynthesisOptions) -> Result<i64, SpeakError> {
        let Some(name) = opts.speaker.as_deref() else {
            return Ok(0);
        };
        let cfg = &self.config;
        if let Some(&id) = cfg.speaker_id_map.get(name) {
            return Ok(i64::from(id));
        }
        match name.parse::<u32>() {
            Ok(id) if id < cfg.num_speakers => Ok(i64::from(id)),
            _ => {
                let names: Vec<&str> = cfg.speaker_id_map.keys().map(String::as_str).collect();
                Err(SpeakError::Request {
                    field: "speaker",
                    reason: if cfg.num_speakers <= 1 {
                        format!("`{name}`: this voice has one speaker; leave --speaker out")
                    } else {
                        format!(
                            "`{name}` is neither a speaker of this voice ({}) nor an id below {}",
                            names.join(", "),
                            cfg.num_speakers
                        )
                    },
                })
            }
        }
    }

    /// The network's raw output for one sentence's ids (floats, not normalized).
    pub fn synthesize_ids(
        &self,
        ids: &[i64],
        opts: &SynthesisOptions,
    ) -> Result<Vec<f32>, SpeakError> {
        let d = &self.config.inference;
        let scales = [
            opts.noise_scale.unwrap_or(d.noise_scale),
            opts.length_scale.unwrap_or(d.length_scale),
            opts.noise_w.unwrap_or(d.noise_w),
        ];
        for (field, v) in ["noise_scale", "length_scale", "noise_w"]
            .iter()
            .zip(scales)
        {
            if !v.is_finite() || v < 0.0 || (*field == "length_scale" && v == 0.0) {
                return Err(SpeakError::Request {
                    field,
                    reason: format!(
                        "{v} is not a usable scale (a finite number ≥ 0; length_scale > 0)"
                    ),
                });
            }
        }
        let speaker = self.speaker_id(opts)?;
        let g = self.graph.graph();
        let n = ids.len();
        let inputs = g
            .input_decls
            .iter()
            .map(|decl| match decl.name.as_str() {
                TTS_IDS_INPUT => Tensor::from_i64(&[1, n], ids.to_vec()),
                TTS_LENGTHS_INPUT => Tensor::from_i64(&[1], vec![n as i64]),
                TTS_SCALES_INPUT => Tensor::from_f32(&[3], scales.to_vec()),
                TTS_SPEAKER_INPUT => Tensor::from_i64(&[1], vec![speaker]),
                other => Err(crate::error::ExecutionError::MissingTensor {
                    name: other.to_string(),
                    required_by: "speak (a Piper voice feeds input, input_lengths, scales, sid)"
                        .into(),
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(execution)?;
        let mut session = self.graph.session().map_err(execution)?;
        if let Some(seed) = opts.seed {
            session.set_noise_seed(seed);
        }
        let outputs = session.run(&inputs, 0).map_err(execution)?;
        let index = g
            .outputs
            .iter()
            .position(|&v| g.values[v].name == TTS_OUTPUT)
            .unwrap_or(0);
        let audio = outputs.get(index).ok_or_else(|| SpeakError::Voice {
            field: "output".into(),
            reason: format!("the graph returned no `{TTS_OUTPUT}`"),
        })?;
        // Read back from the backend that holds it (a GPU's output too).
        self.graph
            .dispatcher()
            .primary()
            .try_download_f32(audio)
            .map_err(execution)
    }

    /// The speech of sentence `index` of a text from its ids (its noise
    /// seed derived from `opts.seed` and `index`).
    pub fn sentence(
        &self,
        index: usize,
        phonemes: String,
        ids: Vec<i64>,
        opts: &SynthesisOptions,
    ) -> Result<SentenceAudio, SpeakError> {
        let start = Instant::now();
        let opts = SynthesisOptions {
            seed: opts
                .seed
                .map(|s| s ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)),
            ..opts.clone()
        };
        let audio = self.synthesize_ids(&ids, &opts)?;
        Ok(SentenceAudio {
            phonemes,
            ids,
            samples: to_pcm16(&peak_normalized(audio)),
            synthesis_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The speech of `text`, sentence by sentence as each is synthesized
    /// (the streaming form of [`Voice::speak`]). Unknown phonemes are in the
    /// returned [`Frontend`].
    pub fn stream<'a>(
        &'a self,
        text: &str,
        opts: &'a SynthesisOptions,
    ) -> Result<
        (
            Frontend,
            impl Iterator<Item = Result<SentenceAudio, SpeakError>> + 'a,
        ),
        SpeakError,
    > {
        let frontend = self.frontend(text)?;
        let sentences = frontend.sentences.clone();
        let iter = sentences
            .into_iter()
            .enumerate()
            .map(move |(k, (phonemes, ids))| self.sentence(k, phonemes, ids, opts));
        Ok((frontend, iter))
    }

    /// The speech of `text`: its sentences with `opts.sentence_silence`
    /// seconds of silence between them, as Piper writes one input line.
    pub fn speak(&self, text: &str, opts: &SynthesisOptions) -> Result<Speech, SpeakError> {
        if !opts.sentence_silence.is_finite() || opts.sentence_silence < 0.0 {
            return Err(SpeakError::Request {
                field: "sentence_silence",
                reason: format!("{} is not a number of seconds ≥ 0", opts.sentence_silence),
            });
        }
        let silence =
            (f64::from(self.config.sample_rate) * f64::from(opts.sentence_silence)) as usize;
        let (frontend, sentences) = self.stream(text, opts)?;
        let mut samples = Vec::new();
        let mut synthesis_ms = 0.0;
        let mut count = 0;
        for sentence in sentences {
            let sentence = sentence?;
            if count > 0 {
                samples.resize(samples.len() + silence, 0);
            }
            samples.extend_from_slice(&sentence.samples);
            synthesis_ms += sentence.synthesis_ms;
            count += 1;
        }
        Ok(Speech {
            sample_rate: self.config.sample_rate,
            samples,
            sentences: count,
            frontend_ms: frontend.ms,
            synthesis_ms,
            unknown: frontend.unknown,
        })
    }
}

/// Piper's per-sentence normalization: `x / max|x|` (all zeros when the peak
/// is below 1e-8), clipped to [-1, 1].
pub fn peak_normalized(mut audio: Vec<f32>) -> Vec<f32> {
    let peak = audio.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if peak < 1e-8 {
        audio.iter_mut().for_each(|x| *x = 0.0);
    } else {
        audio
            .iter_mut()
            .for_each(|x| *x = (*x / peak).clamp(-1.0, 1.0));
    }
    audio
}

/// Floats in [-1, 1] to 16-bit PCM as Piper writes them: `x · 32767`,
/// clipped, truncated toward zero.
pub fn to_pcm16(audio: &[f32]) -> Vec<i16> {
    audio
        .iter()
        .map(|&x| (x * 32767.0).clamp(-32767.0, 32767.0) as i16)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_and_pcm_follow_piper() {
        let out = to_pcm16(&peak_normalized(vec![0.5, -0.25, 0.1]));
        // numpy: np.clip(a / 0.5 * 32767, ...).astype(np.int16) truncates.
        assert_eq!(out, [32767, -16383, 6553]);
        assert_eq!(to_pcm16(&peak_normalized(vec![1e-9, -1e-9])), [0, 0]);
    }
}
