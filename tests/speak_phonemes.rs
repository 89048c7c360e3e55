//! The Piper text frontend vs piper-tts itself.
//!
//! Fixture: `tests/fixtures/tts/phoneme_ids.json`, made by
//! `scripts/make_tts_fixtures.py` with piper-tts 1.8.0 (its bundled espeak-ng)
//! from `tests/fixtures/tts/sentences.txt`. We phonemize with the system's
//! espeak-ng library (CI: Debian's `libespeak-ng1`), a different espeak-ng
//! release, so some words are pronounced differently by the two. The test is
//! exact wherever that cannot matter, and lists the rest:
//! - Piper's id rules on piper-tts's own phonemes give piper-tts's ids, for every case;
//! - every case splits into the same sentences, with the same words and the
//!   same punctuation and spaces between them;
//! - at least 20 cases give exactly piper-tts's ids;
//! - where a word is pronounced differently, our words for the whole case must
//!   be exactly what the system's own `espeak-ng --ipa` command prints, i.e. the
//!   difference is the espeak-ng release's, not the frontend's.
//!
//! The voice config comes from `$CYB_MODELS_DIR/piper` (`scripts/fetch-models.sh piper`);
//! the `espeak-ng` command from the `espeak-ng` package.

use cyb_llm::speak::VoiceConfig;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use unicode_normalization::UnicodeNormalization;

#[derive(Deserialize)]
struct Case {
    text: String,
    phonemes: Vec<String>,
    ids: Vec<Vec<i64>>,
}

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

fn voice() -> VoiceConfig {
    let dir = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".cache/models"));
    let path = dir.join("piper/en_US-joe-medium.onnx.json");
    assert!(
        path.exists(),
        "{} is missing: run scripts/fetch-models.sh piper (or set CYB_MODELS_DIR) before the tests",
        path.display()
    );
    VoiceConfig::from_json_file(&path).expect("voice config")
}

fn read_json<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = Path::new("tests/fixtures/tts").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A sentence's words, each split into its letters and the punctuation after them.
fn words(sentence: &str) -> Vec<(String, String)> {
    sentence
        .nfd()
        .collect::<String>()
        .split(' ')
        .map(|word| {
            let letters = word.trim_end_matches(|c: char| ".,:;!?".contains(c));
            (letters.to_string(), word[letters.len()..].to_string())
        })
        .collect()
}

/// The words (letters only) the `espeak-ng` command prints for `text`.
fn espeak_cli_words(voice: &str, text: &str) -> Vec<String> {
    let out = Command::new("espeak-ng")
        .args(["-q", "--ipa", "-v", voice, "--", text])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `espeak-ng` ({e}): install it (`apt-get install espeak-ng`)")
        });
    assert!(out.status.success(), "espeak-ng failed on {text:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| strip_flags(w).nfd().collect())
        .filter(|w: &String| !w.is_empty())
        .collect()
}

/// Removes language-switch flags such as `(fr)`.
fn strip_flags(word: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in word.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn id_rules_match_piper_on_its_own_phonemes() {
    let voice = voice();
    let fixture: Fixture = read_json("phoneme_ids.json");
    let mut sentences = 0;
    for case in &fixture.cases {
        for (phonemes, want) in case.phonemes.iter().zip(&case.ids) {
            let symbols: Vec<String> = phonemes.nfd().map(String::from).collect();
            let got = voice.phoneme_ids(&symbols);
            assert_eq!(&got.ids, want, "{:?}: sentence {phonemes:?}", case.text);
            assert!(got.unknown.is_empty(), "{:?}: {:?}", case.text, got.unknown);
            sentences += 1;
        }
    }
    assert!(sentences >= 41, "only {sentences} sentences in the fixture");
}

#[test]
fn phoneme_ids_match_piper_tts() {
    let voice = voice();
    let fixture: Fixture = read_json("phoneme_ids.json");
    let mut exact = 0;
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    for case in &fixture.cases {
        let ours = voice.phonemize(&case.text).expect("phonemize");
        let ours_joined: Vec<String> = ours.iter().map(|s| s.concat()).collect();
        if ours.len() != case.phonemes.len() {
            failures.push(format!(
                "{:?}: {} sentences, piper-tts {}: {ours_joined:?} vs {:?}",
                case.text,
                ours.len(),
                case.phonemes.len(),
                case.phonemes
            ));
            continue;
        }
        let ids: Vec<Vec<i64>> = ours.iter().map(|s| voice.phoneme_ids(s).ids).collect();
        if ids == case.ids {
            exact += 1;
            continue;
        }
        let mut our_letters = Vec::new();
        for (mine, theirs) in ours_joined.iter().zip(&case.phonemes) {
            let (mine_words, their_words) = (words(mine), words(theirs));
            if mine_words.len() != their_words.len() {
                failures.push(format!(
                    "{:?}: words differ: {mine:?} vs {theirs:?}",
                    case.text
                ));
                continue;
            }
            for ((m, m_punct), (t, t_punct)) in mine_words.iter().zip(&their_words) {
                if !m.is_empty() {
                    our_letters.push(m.clone());
                }
                if m_punct != t_punct {
                    failures.push(format!(
                        "{:?}: punctuation after {t:?}: {m_punct:?} vs {t_punct:?}",
                        case.text
                    ));
                } else if m != t {
                    seen.insert((t.clone(), m.clone()));
                }
            }
        }
        let cli = espeak_cli_words(&voice.espeak_voice, &case.text);
        if our_letters != cli {
            failures.push(format!(
                "{:?}: differs from piper-tts and from the espeak-ng command: ours {our_letters:?}, \
                 espeak-ng {cli:?}, piper-tts {:?}",
                case.text, case.phonemes
            ));
        }
    }
    for (piper, ours) in &seen {
        eprintln!("espeak-ng release difference: piper-tts {piper:?}, system espeak-ng {ours:?}");
    }
    eprintln!(
        "{exact} of {} cases give piper-tts's ids exactly",
        fixture.cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        exact >= 20,
        "only {exact} cases match piper-tts exactly (need 20)"
    );
}
