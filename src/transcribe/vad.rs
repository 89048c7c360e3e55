//! Voice activity detection before transcription, as faster-whisper 1.2.1's
//! `vad_filter` does (`faster_whisper/vad.py`): Silero VAD v6 (faster-whisper's
//! `silero_vad_v6.onnx`, imported through the ONNX importer and run on the graph
//! path) gives a speech probability per 512-sample window; [`speech_timestamps`]
//! turns them into speech regions; the regions are cut out and joined
//! ([`collect`]), transcribed, and the segment times mapped back to the
//! original timeline ([`TimestampMap`]).
//!
//! ```no_run
//! use cyb_llm::transcribe::vad::{Vad, VadOptions};
//! use cyb_llm::transcribe::{SpeechModel, TranscribeOptions};
//! let model = SpeechModel::load("whisper-tiny.en.model", &Default::default())?;
//! let vad = Vad::load("silero_vad_v6.model".as_ref(), &Default::default())?;
//! let samples = cyb_llm::audio::load_16k("padded.wav".as_ref())?;
//! let t = vad.transcribe(&model, &samples, &TranscribeOptions::default(), &VadOptions::default())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::{SpeechError, SpeechModel, SpeechOptions, TranscribeOptions, Transcript};
use crate::backend::Tensor;
use crate::error::ExecutionError;
use crate::graph::{GraphModel, GraphOptions};
use crate::loader::Model;
use std::path::Path;
use std::sync::Arc;

/// Sample rate the VAD runs at.
pub const SAMPLE_RATE: usize = 16_000;
/// Samples per window (one speech probability each).
pub const WINDOW: usize = 512;
/// Samples of the previous window fed before each window.
pub const CONTEXT: usize = 64;
/// Width of the LSTM state `h` / `c` (`[1, 1, STATE]`).
const STATE: usize = 128;
/// Windows per graph run (faster-whisper's `encoder_batch_size`); the LSTM state
/// is carried from one run to the next.
const BATCH: usize = 10_000;

/// VAD options: faster-whisper's `VadOptions`, names and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct VadOptions {
    /// Windows with a speech probability at or above this are speech.
    pub threshold: f64,
    /// Below this a window is silence (default `max(threshold - 0.15, 0.01)`).
    pub neg_threshold: Option<f64>,
    /// Speech regions shorter than this are dropped.
    pub min_speech_duration_ms: u32,
    /// Speech regions longer than this are split (at the last silence of 98 ms
    /// or more when there is one).
    pub max_speech_duration_s: f64,
    /// Silence that ends a speech region.
    pub min_silence_duration_ms: u32,
    /// Padding added on each side of a speech region.
    pub speech_pad_ms: u32,
}

impl Default for VadOptions {
    /// faster-whisper's defaults: 0.5, none, 0 ms, no limit, 2000 ms, 400 ms.
    fn default() -> Self {
        VadOptions {
            threshold: 0.5,
            neg_threshold: None,
            min_speech_duration_ms: 0,
            max_speech_duration_s: f64::INFINITY,
            min_silence_duration_ms: 2000,
            speech_pad_ms: 400,
        }
    }
}

/// A speech region, in samples of the 16 kHz input (`start..end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeechChunk {
    /// First sample.
    pub start: usize,
    /// One past the last sample.
    pub end: usize,
}

/// A loaded Silero VAD model.
pub struct Vad {
    graph: Arc<GraphModel>,
}

impl std::fmt::Debug for Vad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vad").finish_non_exhaustive()
    }
}

/// Why `model` is not a Silero VAD v6 graph, if it is not.
fn not_silero(model: &Model) -> Option<String> {
    let Some(g) = model.graph.as_ref() else {
        return Some(format!(
            "a {} model without a graph section",
            model.config.model_type
        ));
    };
    let inputs: Vec<(&str, &[i64])> = g
        .input_decls
        .iter()
        .map(|d| (d.name.as_str(), d.shape.as_slice()))
        .collect();
    let state = [1, 1, STATE as i64];
    let want_in = [
        ("input", &[-1, (CONTEXT + WINDOW) as i64][..]),
        ("h", &state[..]),
        ("c", &state[..]),
    ];
    let outputs = g.output_names();
    if inputs != want_in || outputs != ["speech_probs", "hn", "cn"] {
        return Some(format!(
            "a {} model with inputs {inputs:?} and outputs {outputs:?}; a VAD model takes \
             input [N, 576], h and c [1, 1, 128] and returns speech_probs, hn, cn",
            model.config.model_type
        ));
    }
    None
}

impl Vad {
    /// Loads the `.model` file at `path` (an imported `silero_vad_v6.onnx`); any
    /// other model is [`SpeechError::NotAVad`].
    pub fn load(path: &Path, opts: &SpeechOptions) -> Result<Vad, SpeechError> {
        let model = crate::loader::load(path)?;
        Vad::from_model(Arc::new(model), opts).map_err(|e| match e {
            SpeechError::NotAVad { reason, .. } => SpeechError::NotAVad {
                model: path.display().to_string(),
                reason,
            },
            e => e,
        })
    }

    /// The VAD of a loaded model (checked to be Silero VAD v6's graph).
    pub fn from_model(model: Arc<Model>, opts: &SpeechOptions) -> Result<Vad, SpeechError> {
        if let Some(reason) = not_silero(&model) {
            return Err(SpeechError::NotAVad {
                model: model.name.clone(),
                reason,
            });
        }
        let graph = crate::path::bind_graph(
            model,
            opts.backend.clone(),
            opts.threads.max(1),
            GraphOptions::default(),
        )?;
        Ok(Vad { graph })
    }

    /// The speech probability of each 512-sample window of 16 kHz `samples`, as
    /// faster-whisper's `SileroVADModel` computes them: the audio zero-padded to
    /// whole windows (always at least one sample), the last window's final 64
    /// samples zeroed, each window fed after the previous window's last 64
    /// samples (zeros before the first), the LSTM state carried through.
    pub fn speech_probs(&self, samples: &[f32]) -> Result<Vec<f32>, ExecutionError> {
        let windows = samples.len() / WINDOW + 1;
        let mut padded = samples.to_vec();
        padded.resize(windows * WINDOW, 0.0);
        let tail = padded.len() - CONTEXT;
        padded[tail..].fill(0.0);
        let g = self.graph.graph();
        let mut session = self.graph.session()?;
        let mut h = vec![0f32; STATE];
        let mut c = vec![0f32; STATE];
        let mut probs = Vec::with_capacity(windows);
        for first in (0..windows).step_by(BATCH) {
            let n = BATCH.min(windows - first);
            let mut rows = Vec::with_capacity(n * (CONTEXT + WINDOW));
            for w in first..first + n {
                let start = w * WINDOW;
                match start.checked_sub(CONTEXT) {
                    Some(s) => rows.extend_from_slice(&padded[s..start]),
                    None => rows.extend_from_slice(&[0.0; CONTEXT]),
                }
                rows.extend_from_slice(&padded[start..start + WINDOW]);
            }
            let inputs = g
                .input_decls
                .iter()
                .map(|d| match d.name.as_str() {
                    "input" => Tensor::from_f32(&[n, CONTEXT + WINDOW], std::mem::take(&mut rows)),
                    "h" => Tensor::from_f32(&[1, 1, STATE], h.clone()),
                    _ => Tensor::from_f32(&[1, 1, STATE], c.clone()),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = session.run(&inputs, 0)?;
            let read = |i: usize| -> Result<Vec<f32>, ExecutionError> {
                let t = out.get(i).ok_or_else(|| ExecutionError::MissingTensor {
                    name: ["speech_probs", "hn", "cn"][i].into(),
                    required_by: "the VAD (Silero's outputs)".into(),
                })?;
                self.graph.dispatcher().primary().try_download_f32(t)
            };
            probs.extend(read(0)?);
            h = read(1)?;
            c = read(2)?;
        }
        Ok(probs)
    }

    /// The speech regions of 16 kHz `samples` ([`speech_timestamps`] of
    /// [`Vad::speech_probs`]).
    pub fn speech_chunks(
        &self,
        samples: &[f32],
        opts: &VadOptions,
    ) -> Result<Vec<SpeechChunk>, ExecutionError> {
        let probs = self.speech_probs(samples)?;
        Ok(speech_timestamps(&probs, samples.len(), opts))
    }

    /// Transcribes the speech regions of 16 kHz `samples` with `model`, joined
    /// into one stream, with segment times on the original timeline (faster-whisper's
    /// `vad_filter=True`). No speech gives no segments; `duration` is the whole input's.
    pub fn transcribe(
        &self,
        model: &SpeechModel,
        samples: &[f32],
        opts: &TranscribeOptions,
        vopts: &VadOptions,
    ) -> Result<Transcript, ExecutionError> {
        let chunks = self.speech_chunks(samples, vopts)?;
        let duration = samples.len() as f64 / SAMPLE_RATE as f64;
        if chunks.is_empty() {
            return Ok(Transcript {
                language: opts.language.clone().unwrap_or_default(),
                duration,
                ..Default::default()
            });
        }
        let mut t = model.transcribe(&collect(samples, &chunks), opts)?;
        // faster-whisper's restore_speech_timestamps: a word's start and end are
        // mapped through the chunk of its middle, a segment with words spans them.
        let map = TimestampMap::new(&chunks);
        for s in &mut t.segments {
            if s.words.is_empty() {
                s.start = map.original_time(s.start, false);
                s.end = map.original_time(s.end, true);
                continue;
            }
            for w in &mut s.words {
                let chunk = map.chunk_index((w.start + w.end) / 2.0, false);
                w.start = map.original_time_in(w.start, chunk);
                w.end = map.original_time_in(w.end, chunk);
            }
            s.start = s.words[0].start;
            s.end = s.words[s.words.len() - 1].end;
        }
        t.duration = duration;
        Ok(t)
    }

    /// Reads an audio file (any format symphonia reads) and transcribes its speech
    /// ([`Vad::transcribe`]).
    pub fn transcribe_file(
        &self,
        model: &SpeechModel,
        path: &Path,
        opts: &TranscribeOptions,
        vopts: &VadOptions,
    ) -> Result<Transcript, SpeechError> {
        let samples = crate::audio::load_16k(path)?;
        Ok(self.transcribe(model, &samples, opts, vopts)?)
    }
}

/// faster-whisper's `get_speech_timestamps` on per-window speech `probs` of an input
/// of `len` samples: regions start at a window at or above the threshold, end after
/// `min_silence_duration_ms` below the negative threshold, are split beyond
/// `max_speech_duration_s`, dropped below `min_speech_duration_ms`, then padded by
/// `speech_pad_ms` (half the gap each when two are closer than twice that).
pub fn speech_timestamps(probs: &[f32], len: usize, opts: &VadOptions) -> Vec<SpeechChunk> {
    let sr = SAMPLE_RATE as f64;
    let win = WINDOW as i64;
    let threshold = opts.threshold;
    let neg = opts
        .neg_threshold
        .unwrap_or_else(|| (threshold - 0.15).max(0.01));
    let min_speech = sr * f64::from(opts.min_speech_duration_ms) / 1000.0;
    let pad = sr * f64::from(opts.speech_pad_ms) / 1000.0;
    let max_speech = sr * opts.max_speech_duration_s - WINDOW as f64 - 2.0 * pad;
    let min_silence = sr * f64::from(opts.min_silence_duration_ms) / 1000.0;
    let min_silence_at_max = sr * 98.0 / 1000.0;
    let len = len as i64;

    let mut triggered = false;
    let mut speeches: Vec<(i64, i64)> = Vec::new();
    let mut cur_start: Option<i64> = None;
    let (mut temp_end, mut prev_end, mut next_start) = (0i64, 0i64, 0i64);
    for (i, &p) in probs.iter().enumerate() {
        let p = f64::from(p);
        let at = win * i as i64;
        if p >= threshold && temp_end != 0 {
            temp_end = 0;
            if next_start < prev_end {
                next_start = at;
            }
        }
        if p >= threshold && !triggered {
            triggered = true;
            cur_start = Some(at);
            continue;
        }
        if let (true, Some(start)) = (triggered, cur_start) {
            if (at - start) as f64 > max_speech {
                if prev_end != 0 {
                    speeches.push((start, prev_end));
                    cur_start = None;
                    if next_start < prev_end {
                        triggered = false;
                    } else {
                        cur_start = Some(next_start);
                    }
                    prev_end = 0;
                    next_start = 0;
                    temp_end = 0;
                } else {
                    speeches.push((start, at));
                    cur_start = None;
                    prev_end = 0;
                    next_start = 0;
                    temp_end = 0;
                    triggered = false;
                    continue;
                }
            }
        }
        if p < neg && triggered {
            if temp_end == 0 {
                temp_end = at;
            }
            if (at - temp_end) as f64 > min_silence_at_max {
                prev_end = temp_end;
            }
            if ((at - temp_end) as f64) < min_silence {
                continue;
            }
            // A region cut at max_speech that was not restarted has no start; faster-whisper
            // then fails on the missing key, which these options cannot reach
            // (`triggered` is false whenever the start is gone).
            if let Some(start) = cur_start.take() {
                if (temp_end - start) as f64 > min_speech {
                    speeches.push((start, temp_end));
                }
            }
            prev_end = 0;
            next_start = 0;
            temp_end = 0;
            triggered = false;
            continue;
        }
    }
    if let Some(start) = cur_start {
        if (len - start) as f64 > min_speech {
            speeches.push((start, len));
        }
    }
    // Padding (Python's int() of the float sums: truncation towards zero).
    let n = speeches.len();
    for i in 0..n {
        if i == 0 {
            speeches[0].0 = ((speeches[0].0 as f64 - pad).max(0.0)) as i64;
        }
        if i + 1 != n {
            let silence = speeches[i + 1].0 - speeches[i].1;
            if (silence as f64) < 2.0 * pad {
                speeches[i].1 += silence.div_euclid(2);
                speeches[i + 1].0 = (speeches[i + 1].0 - silence.div_euclid(2)).max(0);
            } else {
                speeches[i].1 = (len as f64).min(speeches[i].1 as f64 + pad) as i64;
                speeches[i + 1].0 = (speeches[i + 1].0 as f64 - pad).max(0.0) as i64;
            }
        } else {
            speeches[i].1 = (len as f64).min(speeches[i].1 as f64 + pad) as i64;
        }
    }
    speeches
        .into_iter()
        .map(|(s, e)| SpeechChunk {
            start: s.max(0) as usize,
            end: e.max(0) as usize,
        })
        .collect()
}

/// The samples of `chunks` joined in order (faster-whisper's `collect_chunks`
/// without a duration limit).
pub fn collect(samples: &[f32], chunks: &[SpeechChunk]) -> Vec<f32> {
    chunks
        .iter()
        .flat_map(|c| &samples[c.start.min(samples.len())..c.end.min(samples.len())])
        .copied()
        .collect()
}

/// Times in the joined speech back to times in the original input
/// (faster-whisper's `SpeechTimestampsMap`, precision 2).
#[derive(Debug, Clone)]
pub struct TimestampMap {
    /// Per chunk, its end in samples of the joined speech.
    chunk_end: Vec<usize>,
    /// Per chunk, the silence removed before it, in seconds.
    silence_before: Vec<f64>,
}

impl TimestampMap {
    /// The map of `chunks` (in time order).
    pub fn new(chunks: &[SpeechChunk]) -> TimestampMap {
        let (mut previous_end, mut silent) = (0usize, 0usize);
        let mut chunk_end = Vec::with_capacity(chunks.len());
        let mut silence_before = Vec::with_capacity(chunks.len());
        for c in chunks {
            silent += c.start.saturating_sub(previous_end);
            previous_end = c.end;
            chunk_end.push(c.end.saturating_sub(silent));
            silence_before.push(silent as f64 / SAMPLE_RATE as f64);
        }
        TimestampMap {
            chunk_end,
            silence_before,
        }
    }

    /// The chunk that `time` seconds of the joined speech fall in; `is_end`: a time
    /// exactly at a chunk's end stays in that chunk.
    pub fn chunk_index(&self, time: f64, is_end: bool) -> usize {
        let last = self.chunk_end.len().saturating_sub(1);
        let sample = (time * SAMPLE_RATE as f64) as usize;
        match self.chunk_end.iter().position(|&e| e == sample) {
            Some(i) if is_end => i,
            _ => self.chunk_end.partition_point(|&e| e <= sample).min(last),
        }
    }

    /// The original time of `time` seconds of the joined speech taken as in chunk
    /// `index`, rounded to 10 ms.
    pub fn original_time_in(&self, time: f64, index: usize) -> f64 {
        match self.silence_before.get(index) {
            Some(silence) => ((silence + time) * 100.0).round() / 100.0,
            None => time,
        }
    }

    /// The original time of `time` seconds of the joined speech, rounded to 10 ms
    /// (its own chunk, [`TimestampMap::chunk_index`]).
    pub fn original_time(&self, time: f64, is_end: bool) -> f64 {
        self.original_time_in(time, self.chunk_index(time, is_end))
    }
}
