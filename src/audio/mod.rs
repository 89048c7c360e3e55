//! Audio input for speech models: decode a file (wav, flac, mp3, ogg/vorbis; any
//! sample rate and channel count) with symphonia, mix to mono, resample to the
//! model's rate with a band-limited FFT resampler (rubato), and compute Whisper's
//! log-mel spectrogram ([`mel`]).

pub mod mel;

use rubato::{FftFixedIn, Resampler};
use std::path::{Path, PathBuf};
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// The sample rate speech models take (Whisper: 16 kHz).
pub const SAMPLE_RATE: u32 = 16_000;

/// Most mono samples a file may decode to, at its own rate or resampled: 2^30
/// (4 GiB of f32; 6.2 hours at 48 kHz, 18.6 hours at 16 kHz). A compressed file
/// that expands beyond it (a FLAC of silence claiming days) is an error, not an abort.
pub const MAX_SAMPLES: usize = 1 << 30;

/// Largest sample magnitude accepted. Float audio is nominally within [-1, 1];
/// values far beyond (a damaged float file holds values up to 3e38) would
/// overflow the resampler's FFT into NaN.
pub const MAX_MAGNITUDE: f32 = 1000.0;

/// Sample rates a file may declare, in Hz (a rate of 0 or 1 Hz is a damaged header).
pub const SAMPLE_RATES: std::ops::RangeInclusive<u32> = 1_000..=768_000;

/// Why an audio file could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// The file cannot be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The audio file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The container or codec is not one symphonia reads, or the data is corrupt.
    #[error("{path}: unsupported or corrupt audio: {reason}")]
    Unsupported {
        /// The audio file.
        path: PathBuf,
        /// What symphonia reported.
        reason: String,
    },
    /// The file decodes to no samples.
    #[error("{path}: the file holds no audio samples")]
    Empty {
        /// The audio file.
        path: PathBuf,
    },
    /// The file decodes to more than [`MAX_SAMPLES`] samples.
    #[error("{path}: more than {max} samples at {rate} Hz ({hours:.1} hours); split the file", hours = *max as f64 / f64::from((*rate).max(1)) / 3600.0)]
    TooLong {
        /// The audio file.
        path: PathBuf,
        /// The file's sample rate.
        rate: u32,
        /// The limit, [`MAX_SAMPLES`].
        max: usize,
    },
    /// A sample is not finite or exceeds [`MAX_MAGNITUDE`].
    #[error("{path}: sample {index} is {value}, outside -1000..=1000 (damaged float data?)")]
    BadSample {
        /// The audio file.
        path: PathBuf,
        /// The sample's index (mono, at the file's rate).
        index: usize,
        /// Its value.
        value: f32,
    },
    /// The file declares a sample rate outside [`SAMPLE_RATES`].
    #[error("{path}: sample rate {rate} Hz is outside 1000..=768000 Hz (damaged header?)")]
    SampleRate {
        /// The audio file.
        path: PathBuf,
        /// The declared rate.
        rate: u32,
    },
    /// Resampling failed.
    #[error("{path}: cannot resample from {from} Hz: {reason}")]
    Resample {
        /// The audio file.
        path: PathBuf,
        /// The file's sample rate.
        from: u32,
        /// What rubato reported.
        reason: String,
    },
}

/// Decoded audio: mono samples in [-1, 1] at `sample_rate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    /// Mono samples.
    pub samples: Vec<f32>,
    /// Samples per second.
    pub sample_rate: u32,
}

impl Audio {
    /// Duration in seconds.
    pub fn duration(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate.max(1))
    }
}

fn unsupported(path: &Path, reason: impl std::fmt::Display) -> AudioError {
    AudioError::Unsupported {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Decodes `path` to mono at its own sample rate (channels averaged).
pub fn decode_file(path: &Path) -> Result<Audio, AudioError> {
    let file = std::fs::File::open(path).map_err(|source| AudioError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode_source(Box::new(file), path)
}

/// Decodes an audio file held in memory (an upload) to mono at its own sample
/// rate; `name` (the file name the client gave) names it in errors and its
/// extension is a format hint.
pub fn decode_bytes(bytes: Vec<u8>, name: &Path) -> Result<Audio, AudioError> {
    decode_source(Box::new(std::io::Cursor::new(bytes)), name)
}

/// Reads `bytes` (see [`decode_bytes`]) as mono 16 kHz samples.
pub fn bytes_16k(bytes: Vec<u8>, name: &Path) -> Result<Vec<f32>, AudioError> {
    to_16k(decode_bytes(bytes, name)?, name)
}

/// [`decode_unguarded`], with a panic inside the decoders (symphonia panics on
/// some damaged headers, such as a WAV sample rate of 0) reported as a damaged file.
fn decode_source(
    source: Box<dyn symphonia::core::io::MediaSource>,
    path: &Path,
) -> Result<Audio, AudioError> {
    let guarded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        decode_unguarded(source, path)
    }));
    guarded.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(unsupported(
            path,
            format!("the decoder failed on damaged data: {what}"),
        ))
    })
}

fn decode_unguarded(
    source: Box<dyn symphonia::core::io::MediaSource>,
    path: &Path,
) -> Result<Audio, AudioError> {
    let mss = MediaSourceStream::new(source, Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
        hint.with_extension(ext);
    }
    let format_opts = FormatOptions {
        enable_gapless: true,
        ..Default::default()
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, mss, &format_opts, &MetadataOptions::default())
        .map_err(|e| unsupported(path, e))?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| unsupported(path, "no audio track"))?;
    let track_id = track.id;
    let mut sample_rate = track.codec_params.sample_rate;
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(|e| unsupported(path, e))?;
    let mut samples = Vec::new();
    let mut buf: Option<SampleBuffer<f32>> = None;
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break
            }
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(unsupported(path, e)),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            // A damaged packet is skipped, as symphonia's players do.
            Err(SymphoniaError::DecodeError(_)) => continue,
            Err(e) => return Err(unsupported(path, e)),
        };
        let spec = *decoded.spec();
        if !SAMPLE_RATES.contains(&spec.rate) {
            return Err(AudioError::SampleRate {
                path: path.to_path_buf(),
                rate: spec.rate,
            });
        }
        sample_rate = Some(spec.rate);
        let channels = spec.channels.count().max(1);
        let frames = decoded.capacity() as u64;
        let sb = match &mut buf {
            Some(b) if b.capacity() >= decoded.capacity() * channels => b,
            _ => buf.insert(SampleBuffer::new(frames, spec)),
        };
        sb.copy_interleaved_ref(decoded);
        // Checked before the samples are added, so the buffer never grows past the limit.
        if samples.len() + sb.samples().len() / channels > MAX_SAMPLES {
            return Err(AudioError::TooLong {
                path: path.to_path_buf(),
                rate: spec.rate,
                max: MAX_SAMPLES,
            });
        }
        mix_into(sb.samples(), channels, &mut samples);
    }
    let sample_rate = sample_rate.ok_or_else(|| unsupported(path, "unknown sample rate"))?;
    if let Some(index) = samples
        .iter()
        .position(|x| !x.is_finite() || x.abs() > MAX_MAGNITUDE)
    {
        return Err(AudioError::BadSample {
            path: path.to_path_buf(),
            index,
            value: samples[index],
        });
    }
    if samples.is_empty() {
        return Err(AudioError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(Audio {
        samples,
        sample_rate,
    })
}

/// Appends the mean of each frame of `interleaved` (`channels` samples a frame).
fn mix_into(interleaved: &[f32], channels: usize, out: &mut Vec<f32>) {
    if channels == 1 {
        out.extend_from_slice(interleaved);
        return;
    }
    let inv = 1.0 / channels as f32;
    out.extend(
        interleaved
            .chunks_exact(channels)
            .map(|f| f.iter().sum::<f32>() * inv),
    );
}

/// Resamples mono `samples` from `from` Hz to `to` Hz with rubato's FFT resampler
/// (band-limited); the output has `ceil(len * to / from)` samples, delay removed.
/// Rates outside [`SAMPLE_RATES`] and outputs over [`MAX_SAMPLES`] are errors.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, String> {
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    for rate in [from, to] {
        if !SAMPLE_RATES.contains(&rate) {
            return Err(format!("rate {rate} Hz is outside 1000..=768000 Hz"));
        }
    }
    let want = (samples.len() as u64 * u64::from(to)).div_ceil(u64::from(from));
    let want = usize::try_from(want)
        .ok()
        .filter(|&w| w <= MAX_SAMPLES)
        .ok_or_else(|| format!("{want} output samples, more than {MAX_SAMPLES}"))?;
    let chunk = 1024;
    let mut r = FftFixedIn::<f32>::new(from as usize, to as usize, chunk, 2, 1)
        .map_err(|e| e.to_string())?;
    let delay = r.output_delay();
    let mut out: Vec<f32> = Vec::with_capacity(want + delay + chunk * 4);
    let mut pos = 0;
    while pos + r.input_frames_next() <= samples.len() {
        let n = r.input_frames_next();
        let y = r
            .process(&[&samples[pos..pos + n]], None)
            .map_err(|e| e.to_string())?;
        out.extend_from_slice(&y[0]);
        pos += n;
    }
    if pos < samples.len() {
        let y = r
            .process_partial(Some(&[&samples[pos..]]), None)
            .map_err(|e| e.to_string())?;
        out.extend_from_slice(&y[0]);
    }
    while out.len() < want + delay {
        let y = r
            .process_partial::<&[f32]>(None, None)
            .map_err(|e| e.to_string())?;
        if y[0].is_empty() {
            break;
        }
        out.extend_from_slice(&y[0]);
    }
    let mut out = out.split_off(delay.min(out.len()));
    out.resize(want, 0.0);
    Ok(out)
}

/// Reads `path` as mono 16 kHz samples (decode, mix, resample).
pub fn load_16k(path: &Path) -> Result<Vec<f32>, AudioError> {
    to_16k(decode_file(path)?, path)
}

fn to_16k(audio: Audio, path: &Path) -> Result<Vec<f32>, AudioError> {
    resample(&audio.samples, audio.sample_rate, SAMPLE_RATE).map_err(|reason| {
        AudioError::Resample {
            path: path.to_path_buf(),
            from: audio.sample_rate,
            reason,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_channels_by_mean() {
        let mut out = Vec::new();
        mix_into(&[1.0, 3.0, -1.0, 1.0], 2, &mut out);
        assert_eq!(out, vec![2.0, 0.0]);
    }

    #[test]
    fn resampled_sine_keeps_frequency_and_length() {
        let (from, to) = (44_100u32, 16_000u32);
        let f = 440.0f64;
        let x: Vec<f32> = (0..44_100)
            .map(|i| (2.0 * std::f64::consts::PI * f * i as f64 / from as f64).sin() as f32)
            .collect();
        let y = resample(&x, from, to).unwrap();
        assert_eq!(y.len(), 16_000);
        // Compare with the ideal sine at 16 kHz away from the edges.
        let err = (1000..15_000)
            .map(|i| {
                let ideal = (2.0 * std::f64::consts::PI * f * i as f64 / to as f64).sin();
                (y[i] as f64 - ideal).abs()
            })
            .fold(0.0, f64::max);
        assert!(err < 1e-2, "max error {err}");
    }
}
