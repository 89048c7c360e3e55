//! Whisper's log-mel frontend (families.md, WhisperStyle): STFT with n_fft 400,
//! hop 160, periodic Hann window, centered with reflect padding (as `torch.stft`),
//! power spectrum without the last frame, `filters @ power`, `log10(max(., 1e-10))`,
//! floor at `max - 8`, then `(x + 4) / 4`. The filter bank is librosa's Slaney
//! mel ([`slaney_filters`]), stored in the model as `model.mel_filters`.

use rayon::prelude::*;
use realfft::RealFftPlanner;

/// FFT size.
pub const N_FFT: usize = 400;
/// Hop between frames (10 ms at 16 kHz).
pub const HOP: usize = 160;
/// Frequency bins of one frame (`N_FFT / 2 + 1`).
pub const N_BINS: usize = N_FFT / 2 + 1;

/// Slaney-style mel filters `[n_mels, n_fft / 2 + 1]` (row-major), computed as
/// `librosa.filters.mel(sr, n_fft, n_mels)` does (htk = false, norm = "slaney",
/// fmin 0, fmax sr / 2): triangles in f64, stored as f32, then scaled by the
/// Slaney area normalization in f64 and rounded to f32 again.
pub fn slaney_filters(sample_rate: u32, n_fft: usize, n_mels: usize) -> Vec<f32> {
    let bins = n_fft / 2 + 1;
    let sr = f64::from(sample_rate);
    let fft_freqs: Vec<f64> = (0..bins)
        .map(|i| i as f64 * (sr / 2.0) / (bins - 1).max(1) as f64)
        .collect();
    let (min_mel, max_mel) = (hz_to_mel(0.0), hz_to_mel(sr / 2.0));
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| {
            let m = min_mel + (max_mel - min_mel) * i as f64 / (n_mels + 1) as f64;
            mel_to_hz(m)
        })
        .collect();
    let mut w = vec![0.0f32; n_mels * bins];
    for m in 0..n_mels {
        let (lo_d, hi_d) = (mel_f[m + 1] - mel_f[m], mel_f[m + 2] - mel_f[m + 1]);
        let enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        for (b, &f) in fft_freqs.iter().enumerate() {
            let lower = -(mel_f[m] - f) / lo_d;
            let upper = (mel_f[m + 2] - f) / hi_d;
            let tri = lower.min(upper).max(0.0) as f32;
            w[m * bins + b] = (f64::from(tri) * enorm) as f32;
        }
    }
    w
}

/// Hz to mel on the Slaney scale (linear below 1 kHz, logarithmic above).
fn hz_to_mel(f: f64) -> f64 {
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    let min_log_mel = min_log_hz / f_sp;
    let logstep = 6.4f64.ln() / 27.0;
    if f >= min_log_hz {
        min_log_mel + (f / min_log_hz).ln() / logstep
    } else {
        f / f_sp
    }
}

/// Inverse of [`hz_to_mel`].
fn mel_to_hz(m: f64) -> f64 {
    let f_sp = 200.0 / 3.0;
    let min_log_hz = 1000.0;
    let min_log_mel = min_log_hz / f_sp;
    let logstep = 6.4f64.ln() / 27.0;
    if m >= min_log_mel {
        min_log_hz * (logstep * (m - min_log_mel)).exp()
    } else {
        f_sp * m
    }
}

/// The periodic Hann window of `torch.hann_window(N_FFT)`.
fn hann() -> Vec<f32> {
    (0..N_FFT)
        .map(|i| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / N_FFT as f64).cos()) as f32)
        .collect()
}

/// Sample `i` of `x` extended by reflection about both ends (numpy / torch `reflect`).
fn reflect(x: &[f32], i: isize) -> f32 {
    let n = x.len() as isize;
    if n == 1 {
        return x[0];
    }
    let period = 2 * (n - 1);
    let mut j = i.rem_euclid(period);
    if j >= n {
        j = period - j;
    }
    x[j as usize]
}

/// Whisper's log-mel spectrogram of 16 kHz `samples`: `[n_mels, samples.len() / HOP]`
/// row-major, with `filters` `[n_mels, N_BINS]`. The `max - 8` floor uses the max
/// over the whole input, as `whisper.audio.log_mel_spectrogram` does.
pub fn log_mel(samples: &[f32], filters: &[f32], n_mels: usize) -> Vec<f32> {
    let frames = samples.len() / HOP;
    if frames == 0 || samples.is_empty() {
        return Vec::new();
    }
    let window = hann();
    let pad = (N_FFT / 2) as isize;
    // Power spectra, frame-major [frames, N_BINS], then mel frame-major.
    let mut mel_t = vec![0.0f32; frames * n_mels];
    mel_t
        .par_chunks_mut(n_mels * 64)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut planner = RealFftPlanner::<f32>::new();
            let fft = planner.plan_fft_forward(N_FFT);
            let mut input = fft.make_input_vec();
            let mut spec = fft.make_output_vec();
            let mut scratch = fft.make_scratch_vec();
            let mut power = [0.0f32; N_BINS];
            for (k, row) in out.chunks_mut(n_mels).enumerate() {
                let t = chunk * 64 + k;
                let start = (t * HOP) as isize - pad;
                for (j, v) in input.iter_mut().enumerate() {
                    *v = reflect(samples, start + j as isize) * window[j];
                }
                // The sizes come from the same plan, so processing cannot fail.
                if fft
                    .process_with_scratch(&mut input, &mut spec, &mut scratch)
                    .is_err()
                {
                    row.fill(0.0);
                    continue;
                }
                for (p, c) in power.iter_mut().zip(&spec) {
                    *p = c.re * c.re + c.im * c.im;
                }
                for (m, o) in row.iter_mut().enumerate() {
                    let f = &filters[m * N_BINS..(m + 1) * N_BINS];
                    let s: f32 = f.iter().zip(&power).map(|(a, b)| a * b).sum();
                    *o = s.max(1e-10).log10();
                }
            }
        });
    let max = mel_t.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - 8.0;
    let mut out = vec![0.0f32; n_mels * frames];
    for (t, row) in mel_t.chunks(n_mels).enumerate() {
        for (m, &v) in row.iter().enumerate() {
            out[m * frames + t] = (v.max(floor) + 4.0) / 4.0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_matches_numpy() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let got: Vec<f32> = (-3..7).map(|i| reflect(&x, i)).collect();
        // np.pad([1,2,3,4], 3, mode="reflect") = [4,3,2,1,2,3,4,3,2,1]
        assert_eq!(got, vec![4.0, 3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 2.0, 1.0]);
    }

    #[test]
    fn mel_scale_round_trips() {
        for f in [0.0, 440.0, 1000.0, 3000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(f)) - f).abs() < 1e-9);
        }
    }

    #[test]
    fn shape_of_log_mel() {
        let x: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin()).collect();
        let f = slaney_filters(16_000, N_FFT, 80);
        let m = log_mel(&x, &f, 80);
        assert_eq!(m.len(), 80 * 100);
        let max = m.iter().copied().fold(f32::MIN, f32::max);
        let min = m.iter().copied().fold(f32::MAX, f32::min);
        assert!(
            max - min <= 2.0 + 1e-6,
            "floor at max - 8 dB, scaled by 1/4"
        );
    }
}
