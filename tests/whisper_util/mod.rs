//! Shared by the Whisper tests: the real tiny.en CTranslate2 folder and audio from
//! scripts/fetch-models.sh (`$CYB_MODELS_DIR`, default `.cache/models`), the model
//! imported once per test binary, and text normalization for comparisons.
#![allow(dead_code)]

#[path = "../scratch/mod.rs"]
mod scratch;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `$CYB_MODELS_DIR`, default `.cache/models` (where fetch-models.sh writes).
pub fn models_dir() -> PathBuf {
    std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"))
}

/// The folder fetch-models.sh's `whisper` target fills.
pub fn whisper_dir() -> PathBuf {
    let d = models_dir().join("whisper");
    assert!(
        d.join("tiny.en-ct2/model.bin").is_file() && d.join("jfk.wav").is_file(),
        "{} is missing: run scripts/fetch-models.sh whisper (or set CYB_MODELS_DIR) before the tests",
        d.display()
    );
    d
}

/// A committed fixture file.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/whisper")
        .join(name)
}

/// tiny.en imported from the CTranslate2 folder, once per test binary.
pub fn tiny_en_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = scratch::scratch_dir().join("tiny.en.model");
        cyb_llm::import::import(
            &whisper_dir().join("tiny.en-ct2"),
            &out,
            &cyb_llm::import::ImportOptions::default(),
        )
        .expect("import tiny.en");
        out
    })
}

/// The seeded-random multilingual fixture model (tests/fixtures/whisper/tiny_multilingual_ct2)
/// imported once per test binary.
pub fn tiny_multilingual_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = scratch::scratch_dir().join("tiny-multilingual.model");
        cyb_llm::import::import(
            &fixture("tiny_multilingual_ct2"),
            &out,
            &cyb_llm::import::ImportOptions::default(),
        )
        .expect("import the multilingual fixture");
        out
    })
}

/// The cpu backend (the reference results are computed on it).
pub fn cpu() -> cyb_llm::transcribe::SpeechOptions {
    cyb_llm::transcribe::SpeechOptions {
        backend: cyb_llm::backend::BackendChoice::Named("cpu".into()),
        ..Default::default()
    }
}

/// Lower-cased words without punctuation (the comparison rule of the issue).
pub fn normalize(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes 16-bit PCM WAV.
pub fn write_wav(path: &Path, rate: u32, channels: u16, interleaved: &[f32]) {
    let data: Vec<u8> = interleaved
        .iter()
        .flat_map(|&x| ((x * 32768.0).round().clamp(-32768.0, 32767.0) as i16).to_le_bytes())
        .collect();
    let mut b = Vec::with_capacity(44 + data.len());
    b.extend(b"RIFF");
    b.extend((36 + data.len() as u32).to_le_bytes());
    b.extend(b"WAVEfmt ");
    b.extend(16u32.to_le_bytes());
    b.extend(1u16.to_le_bytes());
    b.extend(channels.to_le_bytes());
    b.extend(rate.to_le_bytes());
    b.extend((rate * u32::from(channels) * 2).to_le_bytes());
    b.extend((channels * 2).to_le_bytes());
    b.extend(16u16.to_le_bytes());
    b.extend(b"data");
    b.extend((data.len() as u32).to_le_bytes());
    b.extend(data);
    std::fs::write(path, b).unwrap();
}

/// Two minutes of real speech, as the fixture scripts build it: jfk.wav, 1 s of
/// silence, repeated, cut at 120 s.
pub fn long_2min() -> Vec<f32> {
    let one = cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap();
    let mut x = Vec::new();
    while x.len() < 120 * 16_000 {
        x.extend_from_slice(&one);
        x.extend(std::iter::repeat_n(0.0, 16_000));
    }
    x.truncate(120 * 16_000);
    x
}

/// Word error rate of `hyp` against `reference` (word-level Levenshtein / reference words).
pub fn wer(reference: &str, hyp: &str) -> f64 {
    let r: Vec<&str> = reference.split_whitespace().collect();
    let h: Vec<&str> = hyp.split_whitespace().collect();
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut cur = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(rw != hw))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

/// The faster-whisper fixture `faster_whisper_<name>.json`.
pub fn reference(name: &str) -> serde_json::Value {
    let p = fixture(&format!("faster_whisper_{name}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

/// Normalized text equal to faster-whisper's and every segment within 0.5 s of its times.
pub fn assert_matches_reference(t: &cyb_llm::transcribe::Transcript, name: &str) {
    let r = reference(name);
    let want = normalize(r["text"].as_str().unwrap());
    assert_eq!(normalize(&t.text()), want, "text of {name}");
    let segs = r["segments"].as_array().unwrap();
    assert_eq!(
        t.segments.len(),
        segs.len(),
        "segment count of {name}: {:#?}",
        t.segments
    );
    for (got, want) in t.segments.iter().zip(segs) {
        let (ws, we) = (
            want["start"].as_f64().unwrap(),
            want["end"].as_f64().unwrap(),
        );
        assert!(
            (got.start - ws).abs() <= 0.5 && (got.end - we).abs() <= 0.5,
            "{name}: segment {:?} [{}, {}] vs faster-whisper [{ws}, {we}]",
            got.text,
            got.start,
            got.end
        );
    }
}
