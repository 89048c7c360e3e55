//! Language detection of a multilingual Whisper against faster-whisper's
//! `detect_language` on the same CTranslate2 weights: a seeded-random tiny model
//! with the real multilingual vocabulary (tests/fixtures/whisper/tiny_multilingual_ct2,
//! made with the fixture by scripts/make_whisper_fixtures.py), jfk.wav as input.

mod whisper_util;

use cyb_llm::transcribe::{SpeechModel, TranscribeOptions};
use serde_json::Value;
use std::sync::OnceLock;
use whisper_util::*;

fn model() -> &'static SpeechModel {
    static M: OnceLock<SpeechModel> = OnceLock::new();
    M.get_or_init(|| SpeechModel::load(tiny_multilingual_model(), &cpu()).expect("load"))
}

fn reference() -> Value {
    let p = fixture("faster_whisper_detect_language.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

fn jfk() -> Vec<f32> {
    cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap()
}

#[test]
fn language_probabilities_match_faster_whisper() {
    let r = reference();
    let want = r["probs"].as_object().unwrap();
    let got = model().whisper().detect_language(&jfk()).expect("detect");
    assert_eq!(got.len(), want.len(), "number of languages");
    assert_eq!(got.len(), 99);
    assert_eq!(got[0].0, r["language"].as_str().unwrap(), "top language");
    let mut worst = 0.0f64;
    for (code, p) in &got {
        let w = want
            .get(code)
            .unwrap_or_else(|| panic!("faster-whisper has no `{code}`"))
            .as_f64()
            .unwrap();
        worst = worst.max((f64::from(*p) - w).abs());
    }
    assert!(worst < 1e-5, "largest probability difference {worst}");
    let sum: f32 = got.iter().map(|x| x.1).sum();
    assert!((sum - 1.0).abs() < 1e-4, "probabilities sum to {sum}");
}

#[test]
fn transcribe_without_language_uses_the_detected_one() {
    let r = reference();
    let opts = TranscribeOptions {
        no_speech_threshold: None,
        ..TranscribeOptions::default()
    };
    let t = model().transcribe(&jfk(), &opts).expect("transcribe");
    assert_eq!(t.language, r["language"].as_str().unwrap());
    let de = TranscribeOptions {
        language: Some("de".into()),
        ..opts
    };
    let t = model()
        .transcribe(&jfk(), &de)
        .expect("transcribe in German");
    assert_eq!(t.language, "de");
}

#[test]
fn english_only_models_refuse_detection() {
    let m = SpeechModel::load(tiny_en_model(), &cpu()).expect("load tiny.en");
    assert!(m.whisper().detect_language(&jfk()).is_err());
}
