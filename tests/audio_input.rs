//! Audio input and the log-mel frontend on real audio (jfk.wav / jfk.mp3 from the
//! pywhispercpp sdist), against transformers' `WhisperFeatureExtractor` (its float64
//! numpy path; scripts/make_whisper_fixtures.py, `mel` step).

mod whisper_util;

use cyb_llm::audio::{self, mel, AudioError};
use whisper_util::*;

#[test]
fn jfk_wav_decodes_to_16k_mono() {
    let a = audio::decode_file(&whisper_dir().join("jfk.wav")).unwrap();
    assert_eq!(a.sample_rate, 16_000);
    assert_eq!(a.samples.len(), 176_000);
    assert!(a.samples.iter().all(|v| v.abs() <= 1.0));
}

#[test]
fn jfk_mp3_decodes_and_resamples_to_the_same_length() {
    let a = audio::decode_file(&whisper_dir().join("jfk.mp3")).unwrap();
    let x = audio::resample(&a.samples, a.sample_rate, 16_000).unwrap();
    let secs = x.len() as f64 / 16_000.0;
    assert!(
        (secs - 11.0).abs() < 0.1,
        "{secs} s from {} Hz",
        a.sample_rate
    );
}

/// Largest |ours - transformers| of one log-mel value (values span about -0.5..1.5).
const MEL_TOL: f32 = 3e-5;

#[test]
fn log_mel_matches_transformers_feature_extractor() {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("jfk_logmel.json")).unwrap()).unwrap();
    let (n_mels, frames) = (
        meta["n_mels"].as_u64().unwrap() as usize,
        meta["frames"].as_u64().unwrap() as usize,
    );
    let want: Vec<f32> = std::fs::read(fixture("jfk_logmel.f32"))
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(want.len(), n_mels * frames);
    let x = audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap();
    // The filters stored in the model (the import test checks them against whisper.cpp).
    let m = cyb_llm::load(tiny_en_model()).unwrap();
    let filters = m.tensor("model.mel_filters").unwrap().dequantize().unwrap();
    let got = mel::log_mel(&x, &filters, n_mels);
    assert_eq!(got.len(), want.len());
    let max = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("log-mel max |ours - transformers| = {max:e}");
    assert!(max <= MEL_TOL, "max abs diff {max}, above {MEL_TOL:e}");
}

#[test]
fn corrupt_and_missing_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("corrupt.wav");
    std::fs::write(&bad, b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk").unwrap();
    let e = audio::load_16k(&bad).unwrap_err();
    assert!(matches!(e, AudioError::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("corrupt.wav"), "{e}");
    let missing = dir.path().join("missing.flac");
    let e = audio::load_16k(&missing).unwrap_err();
    assert!(matches!(e, AudioError::Io { .. }) && e.to_string().contains("missing.flac"));
    let text = dir.path().join("notes.ogg");
    std::fs::write(&text, "this is not audio at all, just some text").unwrap();
    assert!(audio::load_16k(&text)
        .unwrap_err()
        .to_string()
        .contains("notes.ogg"));
}

#[test]
fn stereo_44k_wav_is_mixed_and_resampled() {
    // 1 kHz in the left channel, silence in the right: mono = 0.5 * sine.
    let n = 44_100;
    let inter: Vec<f32> = (0..n)
        .flat_map(|i| {
            let v = 0.5 * (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 44_100.0).sin();
            [v as f32, 0.0]
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tone.wav");
    write_wav(&p, 44_100, 2, &inter);
    let x = audio::load_16k(&p).unwrap();
    assert_eq!(x.len(), 16_000);
    let err = (2000..14_000)
        .map(|i| {
            let ideal = 0.25 * (2.0 * std::f64::consts::PI * 1000.0 * i as f64 / 16_000.0).sin();
            (f64::from(x[i]) - ideal).abs()
        })
        .fold(0.0, f64::max);
    assert!(err < 2e-3, "max error {err}");
}
